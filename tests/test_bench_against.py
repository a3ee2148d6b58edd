"""``--bench-against REV``: two revisions measured in one session, on real git repositories.

The metric is synthetic and of known truth: ``measure.py`` reports ``cost``, the committed
``cost.txt`` times a machine factor from the environment (``MACHINE_FACTOR``, drifting by
``MACHINE_DRIFT`` over ``MACHINE_TRIALS`` trials, counted in a file outside the repository, so
drift hits both revisions alike) times Gaussian noise of CV ``NOISE_CV``, seeded per trial. So a
commit raising ``cost.txt`` by 10% is a real +10% regression, and a README-only commit is none.
The counts over many sessions are ``benchmarks/bench_against_counts.py``'s; here a few sessions.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest
import yaml
from benchhelpers import git

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_against_counts.py"


def _load_script() -> Any:
    """benchmarks/bench_against_counts.py as a module: the synthetic repository's helpers."""
    spec = importlib.util.spec_from_file_location("bench_against_counts", SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


counts = _load_script()
Repo, bench_file, REPLICATES = counts.Repo, counts.bench_file, counts.REPLICATES


def _gate_line(done: subprocess.CompletedProcess[str]) -> str:
    return next(line for line in done.stdout.splitlines() if "CI gate:" in line)


@pytest.mark.parametrize("noise_seed", [1, 2])
def test_a_ten_percent_costlier_commit_regresses_naming_both_commits(
    tmp_path: Path, noise_seed: int
) -> None:
    repo = Repo(tmp_path, noise_seed)
    old = repo.base()
    new = repo.commit("10% more work", **{"cost.txt": "1.1"})
    done = repo.bench("--bench-against", "HEAD~1", "--bench-fail-on=regression")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REGRESSED" in _gate_line(done)
    assert f"code: {old[:12]} (HEAD~1) -> {new[:12]} (HEAD)" in done.stdout
    results = repo.record()
    assert results["treatment_variable"] == "code"
    assert results["control"] == old[:12] and results["treatments"] == [old[:12], new[:12]]
    verdict = results["verdicts"]["cost"][new[:12]]
    assert verdict["verdict"] == "regressed" and verdict["ci"][0] > 1.05
    assert results["revisions"]["against"]["sha"] == old
    assert results["revisions"]["this"]["sha"] == new
    (run_dir,) = (repo.home / "runs").iterdir()
    report = (run_dir / "report.md").read_text()
    assert re.search(rf"^- \*\*Revisions:\*\* `{old[:12]}` .* -> `{new[:12]}` ", report, re.M)
    # REV's trials ran in REV's checkout and read REV's files (cost 1.0 against 1.1)
    against = Path(results["revisions"]["against"]["checkout"])
    for trial in results["trials"]:
        mine = against if trial["treatment"] == old[:12] else repo.path
        assert trial["code_from"] == [str(mine / "measure.py")]
        stdout = Path(trial["stdout"]).read_text()
        assert f"checkout {mine}" in stdout
    medians = {label: row["median"] for label, row in results["summary"]["cost"].items()}
    assert 1.07 < medians[new[:12]] / medians[old[:12]] < 1.13
    # the worktree is gone, and git's record of it too
    assert not against.exists()
    assert git(repo.path, "worktree", "list", "--porcelain").count("worktree ") == 1


@pytest.mark.parametrize("noise_seed", [3, 4])
def test_a_readme_only_commit_passes_while_the_machine_drifts_ten_percent(
    tmp_path: Path, noise_seed: int
) -> None:
    repo = Repo(tmp_path, noise_seed, drift=0.10)
    repo.base()
    repo.commit("docs only", **{"README.md": "a demo, better explained\n"})
    done = repo.bench("--bench-against", "HEAD~1", "--bench-fail-on=regression")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "CI gate: passed" in _gate_line(done)
    results = repo.record()
    (verdict,) = results["verdicts"]["cost"].values()
    assert verdict["verdict"] == "no_change"
    # the evidence of no regression: the interval lies inside the 5% fail_threshold
    assert 0.95 < verdict["ci"][0] <= verdict["ci"][1] < 1.05
    # the machine really drifted: the last block's values are ~10% above the first's
    first, last = (
        [t["metrics"]["cost"] for t in results["trials"] if t["replicate"] == r]
        for r in (0, REPLICATES - 1)
    )
    assert sum(last) / sum(first) > 1.06


def test_each_treatment_of_the_file_runs_under_both_revisions(tmp_path: Path) -> None:
    repo = Repo(tmp_path)
    document = bench_file(
        params={"scale": 1},
        treatment_variable="scale",
        treatments=[1, 2],
        replicates=8,
    )
    document["stages"][0]["cmd"] = f"{sys.executable} measure.py && echo scale={{scale}}"
    document["stages"][0]["metrics_from"]["fields"] = ["cost", "scale"]
    document["metrics"]["scale"] = {"direction": "lower"}
    old = repo.base(document)
    new = repo.commit("10% more work", **{"cost.txt": "1.1"})
    done = repo.bench("--bench-against", old)
    assert done.returncode == 0, done.stdout + done.stderr
    results = repo.record()
    labels = [f"{sha[:12]},scale={value}" for sha in (old, new) for value in (1, 2)]
    assert results["treatments"] == labels
    # each treatment under HEAD is judged against the same treatment under REV
    assert set(results["verdicts"]["cost"]) == {labels[2], labels[3]}
    assert set(results["verdicts"]["scale"]) == {labels[2], labels[3]}
    assert all(v["verdict"] == "no_change" for v in results["verdicts"]["scale"].values())
    counted = {label: 0 for label in labels}
    for trial in results["trials"]:
        counted[trial["treatment"]] += 1
    assert set(counted.values()) == {8}


def test_each_revision_may_run_its_own_benchmark_file(tmp_path: Path) -> None:
    repo = Repo(tmp_path)
    old = repo.base(bench_file(replicates=2))
    changed = bench_file(replicates=2)
    changed["stages"][0]["cmd"] = f"{sys.executable} measure.py && echo from-head"
    repo.commit("a new stage command", **{"bench.yaml": yaml.safe_dump(changed)})
    repo.bench("--bench-against", "HEAD~1", "--bench-against-file=revision")
    commands = {t["treatment"]: t["command"] for t in repo.record()["trials"]}
    assert "from-head" not in commands[old[:12]]
    assert sum("from-head" in command for command in commands.values()) == 1


def test_a_prep_with_equal_inputs_is_built_once_and_others_per_revision(
    tmp_path: Path,
) -> None:
    repo = Repo(tmp_path)
    document = bench_file(replicates=2)
    document["stages"] = [
        {"name": "data", "kind": "prep", "cmd": "cp data.txt {out}/", "inputs": ["data.txt"]},
        {"name": "env", "kind": "prep", "cmd": "echo built > {out}/marker"},
        {
            "name": "code",
            "kind": "prep",
            "cmd": "cp {checkout}/cost.txt {out}/",
            "inputs": ["data.txt"],
        },
        {**document["stages"][0], "needs": ["data", "env", "code"]},
    ]
    repo.commit("data", **{"data.txt": "the same in both\n"})
    repo.base(document)
    repo.commit("10% more work", **{"cost.txt": "1.1"})
    done = repo.bench("--bench-against", "HEAD~1")
    assert done.returncode == 0, done.stdout + done.stderr
    built = [p["stage"] for p in repo.record()["preps"] if p["action"] == "built"]
    # data: equal inputs, once; env: no inputs, code: names {checkout}: once per revision
    assert sorted(built) == ["code", "code", "data", "env", "env"]


def test_an_editable_install_of_the_working_tree_is_refused_with_the_recipe(
    tmp_path: Path,
) -> None:
    repo = Repo(tmp_path)
    repo.commit(
        "a package",
        **{
            "pyproject.toml": '[project]\nname = "demo-pkg"\nversion = "0.1"\n'
            '[tool.setuptools]\npackages = ["demo_pkg"]\n'
            '[build-system]\nrequires = ["setuptools>=68", "wheel"]\n'
            'build-backend = "setuptools.build_meta"\n',
            "demo_pkg/__init__.py": "VALUE = 1\n",
        },
    )
    repo.base()
    repo.commit("docs only", **{"README.md": "more\n"})
    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True)
    python = str(env_dir / "bin" / "python")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "-e"]
        + [str(repo.path)],
        check=True,
        capture_output=True,
    )
    # this plugin's code, ahead of any installed copy, without installing it again
    (site,) = (env_dir / "lib").glob("python*/site-packages")
    (site / "plugin_under_test.pth").write_text(str(Path(__file__).resolve().parent.parent))
    # and, as a project's own virtualenv may, no psutil: the host check, which imports it only
    # on a busy machine, must not stop the session whatever the load (issue 45, point 8)
    (site / "psutil.py").write_text("raise ImportError('no psutil in this virtualenv')\n")
    done = repo.bench("--bench-against", "HEAD~1", python=python)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--bench-against: demo-pkg" in done.stdout
    assert "installed in editable mode from the working tree" in done.stdout
    assert "Fix: install the code under test per revision" in done.stdout
    assert not (repo.home / "runs").exists() or not any((repo.home / "runs").iterdir())


def test_a_trial_that_imported_the_other_revisions_code_is_not_comparable(
    tmp_path: Path,
) -> None:
    repo = Repo(tmp_path)
    document = bench_file(replicates=2)
    # every trial imports the working tree's measure.py, REV's included: what an editable
    # install, or a PYTHONPATH into the working tree, does
    document["stages"][0]["cmd"] = f"{sys.executable} {repo.path}/measure.py"
    repo.base(document)
    repo.commit("docs only", **{"README.md": "more\n"})
    done = repo.bench("--bench-against", "HEAD~1")
    trials = repo.record()["trials"]
    against = repo.record()["control"]
    assert done.returncode == 1, done.stdout + done.stderr
    for trial in trials:
        if trial["treatment"] == against:
            assert trial["status"] == "not_comparable"
            assert "the other revision's checkout" in trial["reason"]
        else:
            assert trial["status"] == "passed"


# -- hostile input ---------------------------------------------------------------------------------


def _refused(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--bench-against:" in done.stdout and "Fix:" in done.stdout
    for word in words:
        assert word in done.stdout


def test_a_revision_that_does_not_resolve_is_refused(tmp_path: Path) -> None:
    repo = Repo(tmp_path)
    repo.base()
    _refused(repo.bench("--bench-against", "no-such-branch"), "names no commit", "fetch-depth")


@pytest.mark.parametrize("ref", ["HEAD; touch pwned", "$(touch pwned)", "--output=pwned"])
def test_a_revision_with_shell_metacharacters_is_only_ever_a_name(tmp_path: Path, ref: str) -> None:
    repo = Repo(tmp_path)
    repo.base()
    repo.commit("docs only", **{"README.md": "more\n"})
    _refused(repo.bench(f"--bench-against={ref}"), "names no commit")
    assert not list(tmp_path.rglob("pwned"))


def test_a_dirty_tree_is_refused(tmp_path: Path) -> None:
    repo = Repo(tmp_path)
    repo.base()
    repo.commit("docs only", **{"README.md": "more\n"})
    (repo.path / "cost.txt").write_text("2.0")
    _refused(repo.bench("--bench-against", "HEAD~1"), "uncommitted changes", "git stash")


def test_the_same_commit_on_both_sides_is_refused(tmp_path: Path) -> None:
    repo = Repo(tmp_path)
    repo.base()
    _refused(repo.bench("--bench-against", "main"), "both sides would run the same code")


def test_outside_a_git_repository_it_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "bench.yaml").write_text(yaml.safe_dump(bench_file()))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--bench", "bench.yaml", "--bench-against", "main"],
        cwd=folder,
        capture_output=True,
        text=True,
        env={**os.environ, "BENCHMARK_HOME": str(tmp_path / "home")},
        timeout=300,
    )
    _refused(done, "in no git repository", "--bench-baseline")


def test_checkout_is_a_command_placeholder_only(tmp_path: Path) -> None:
    repo = Repo(tmp_path)
    document = bench_file(replicates=2)
    document["stages"][0]["inputs"] = ["{checkout}/cost.txt"]
    repo.base(document)
    done = repo.bench()
    assert done.returncode == 2
    assert "uses {checkout}, which only a stage's cmd and env may use" in done.stdout


def test_the_per_revision_environment_example_measures_each_revisions_package(
    tmp_path: Path,
) -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "per-revision-env"
    repo = Repo(tmp_path)
    files = {
        str(path.relative_to(example)): path.read_text()
        for path in example.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    old = repo.commit("the example", **files)
    package = "slowsum/slowsum/__init__.py"
    slower = files[package].replace("result += i", "result += i * 1 + 0")  # more bytecode
    new = repo.commit("more work per step", **{package: slower})
    done = repo.bench("--bench-against", "HEAD~1", "--bench-fail-on=regression")
    assert done.returncode == 1, done.stdout + done.stderr
    results = repo.record()
    assert results["verdicts"]["total_s"][new[:12]]["verdict"] == "regressed"
    assert sorted(p["action"] for p in results["preps"]) == ["built", "built"]
    for trial in results["trials"]:
        (where,) = trial["code_from"]
        assert str(repo.home / "cache") in where and where.endswith("slowsum/__init__.py")
    assert results["revisions"]["against"]["sha"] == old
    # it installed a copy of each commit's package: nothing built in the working tree
    assert not (repo.path / "slowsum" / "build").exists()
    assert not list((repo.path / "slowsum").glob("*.egg-info"))


def test_compare_against_measures_both_revisions_in_one_session(tmp_path: Path) -> None:
    repo = Repo(tmp_path)
    old = repo.base()
    new = repo.commit("10% more work", **{"cost.txt": "1.1"})
    command = [sys.executable, "-m", "pytest_benchmark_agent.cli.main", "--home", str(repo.home)]
    done = subprocess.run(
        [*command, "compare", "--against", "HEAD~1", "bench.yaml"],
        cwd=repo.path,
        env=repo.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"code: {old[:12]} (HEAD~1) -> {new[:12]} (HEAD)" in done.stdout
    assert "CI gate: REGRESSED" in done.stdout
    alone = subprocess.run(
        [*command, "compare", "bench.yaml"], cwd=repo.path, capture_output=True, text=True
    )
    assert alone.returncode == 2 and "--against REV and one benchmark file" in alone.stderr


def test_bisect_names_the_costlier_commit_while_the_machine_shifts_between_sessions(
    tmp_path: Path,
) -> None:
    repo, shas, slow = counts.bisect_commits(tmp_path, 5)
    done = counts.bisect(repo, shas[0], shas[-1])
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"first bad commit: {shas[slow]} commit {slow}")
    # the first bad commit lies wholly beyond the midpoint BAD's ratio set
    assert re.search(
        r"^  cost x1\.1\d* \[\S+, \S+\] MDE \S+: beyond midpoint x1\.\d+", done.stdout, re.M
    )
    # each step measured GOOD and its commit in one session: one run per step
    steps = re.findall(r"^ +run (\S+): cost x", done.stdout, re.M)
    assert steps and len(set(steps)) == len(steps)
    assert len(list((repo.home / "runs").iterdir())) == len(steps)


def test_options_that_cannot_go_with_it_are_refused(tmp_path: Path) -> None:
    repo = Repo(tmp_path)
    repo.base()
    repo.commit("docs only", **{"README.md": "more\n"})
    _refused(
        repo.bench("--bench-against", "HEAD~1", "--bench-baseline", "HEAD~1"),
        "is given with --bench-baseline",
    )
    distributed = repo.bench("--bench-against", "HEAD~1", "-n", "2")
    assert distributed.returncode == pytest.ExitCode.USAGE_ERROR
    assert "cannot run under pytest-xdist (-n); fix: leave out -n" in distributed.stderr
    assert git(repo.path, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_sequential_replicates_with_a_treatment_variable_compare_each_pair(
    tmp_path: Path,
) -> None:
    """A range works for every file shape (issue 44): each treatment under HEAD is judged
    against itself under REV at each look, at alpha / pairs, and the run stops when the gate
    can decide every pair."""
    repo = Repo(tmp_path)
    document = bench_file(
        params={"scale": 1},
        treatment_variable="scale",
        treatments=[1, 2],
        replicates={"min": 8, "max": 16},
    )
    document["stages"][0]["cmd"] += " {scale}"
    old = repo.base(document)
    new = repo.commit("docs only", **{"README.md": "more\n"})
    done = repo.bench("--bench-against", "HEAD~1")
    assert done.returncode == 0, done.stdout + done.stderr
    results = repo.record()
    assert set(results["verdicts"]["cost"]) == {f"{new[:12]},scale={k}" for k in (1, 2)}
    sequential = results["sequential"]
    assert sequential["min"] == 8 and 8 <= sequential["blocks_used"] <= 16
    assert results["ci_gate"]["outcome"] == "passed", results["ci_gate"]
    reasons = " ".join(results["ci_gate"]["reasons"])
    assert reasons.count("the interval rules out a regression beyond fail_threshold") == 2
    for k in (1, 2):  # each pair named with its own control, and that control's CV
        assert f"[{new[:12]},scale={k}] no_change x" in reasons or "changed x" in reasons
        assert f"against the control {old[:12]},scale={k} (" in reasons
    assert "beyond its fail_threshold each against itself under REV" in reasons


def test_too_few_blocks_to_compare_the_revisions_warn_and_leave_the_gate_unjudged(
    tmp_path: Path,
) -> None:
    """Every count runs (issue 35): 5 blocks cannot decide one comparison at alpha 0.05, so the
    session warns with the arithmetic and the gate is unjudged, which --bench-fail-on=unjudged
    fails."""
    repo = Repo(tmp_path)
    repo.base(bench_file(replicates=5))
    repo.commit("docs only", **{"README.md": "more\n"})
    done = repo.bench("--bench-against", "HEAD~1", "--bench-fail-on=unjudged")
    assert "5 blocks can never decide" in done.stdout, done.stdout
    assert "against itself under REV" in done.stdout
    assert done.returncode == 1 and "unjudged" in done.stdout, done.stdout


def test_a_revision_without_the_benchmark_file_of_its_own_is_refused(tmp_path: Path) -> None:
    repo = Repo(tmp_path)
    repo.commit("before the benchmark", **{"README.md": "a demo\n"})
    repo.base()
    _refused(
        repo.bench("--bench-against", "HEAD~1", "--bench-against-file=revision"),
        "has no bench.yaml",
    )
    assert git(repo.path, "worktree", "list", "--porcelain").count("worktree ") == 1
