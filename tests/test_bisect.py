"""``benchmark-agent bisect`` on a real git repository of six commits, the third of which makes
the measured loop five times slower: the bisection finds it with real ``pytest --bench`` runs
in worktrees, leaves the user's checkout as it was, reports again from its state without
measuring, and refuses bad input with exit code 2."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from benchhelpers import git

from pytest_benchmark_agent.cli import main as cli
from pytest_benchmark_agent.engine.bisect_state import STATE, Bisection

WORK = """\
import sys
import time

FACTOR = {factor}
start = time.process_time()
total = 0
for i in range(int(sys.argv[1]) * FACTOR):
    total += i
print(f"loop_ms={{(time.process_time() - start) * 1000:.4f}}")
"""

#: One configuration: each step measures GOOD and the commit interleaved in one session, paired
#: by block; 6 blocks, the fewest whose exact paired test can reach 0.05 (2/2^6 = 0.031). A
#: noise threshold of 100% (twice as slow) keeps a loaded machine from counting, and lets an
#: equal loop's interval clear it (a good step needs that evidence).
BENCH = {
    "name": "loop",
    "hypothesis": "the loop costs what it cost at the good commit",
    "params": {"n": 200_000},
    "replicates": 6,
    "stages": [
        {
            "name": "loop",
            "kind": "measure",
            "cmd": f"{sys.executable} work.py {{n}}",
            "metrics_from": {"stdout": True, "fields": ["loop_ms"]},
        }
    ],
    "metrics": {
        "loop_ms": {
            "direction": "lower",
            "primary": True,
            "noise_threshold": 1.0,
            "min_replicates": 4,
        }
    },
}


def commit(repo: Path, message: str, files: dict[str, str]) -> str:
    for name, text in files.items():
        (repo / name).write_text(text)
    git(repo, "add", *files)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Six commits on branch main: #1 the benchmark, #3 the five-fold loop, the rest README;
    and branch ``gone`` from #1: a commit without the benchmark, then it back, five-fold."""
    path = tmp_path_factory.mktemp("bisect") / "project"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "dev@example.com")
    git(path, "config", "user.name", "dev")
    shas = [
        commit(
            path,
            "add the loop benchmark",
            {
                "bench.yaml": yaml.safe_dump(BENCH, sort_keys=False),
                "work.py": WORK.format(factor=1),
                "README.md": "loop\n",
                ".gitignore": "benchmark_data/\n",
            },
        )
    ]
    shas.append(commit(path, "README: what the loop does", {"README.md": "loop: sums\n"}))
    shas.append(commit(path, "work: five times the loop", {"work.py": WORK.format(factor=5)}))
    for k in (4, 5, 6):
        shas.append(commit(path, f"README: edit {k}", {"README.md": f"loop: sums ({k})\n"}))
    git(path, "checkout", "-q", "-b", "gone", shas[0])
    git(path, "rm", "-q", "bench.yaml")
    git(path, "commit", "-q", "-m", "remove the benchmark")
    commit(
        path,
        "bring the benchmark back, five times the loop",
        {"bench.yaml": yaml.safe_dump(BENCH, sort_keys=False), "work.py": WORK.format(factor=5)},
    )
    git(path, "checkout", "-q", "main")
    return path, shas


def checkout_of(repo: Path) -> tuple[str, str, str, str, int]:
    """What bisecting must leave as it was: HEAD, the branch, git status, the worktrees, and
    no bisection in progress (git bisect log fails)."""
    return (
        git(repo, "rev-parse", "HEAD"),
        git(repo, "symbolic-ref", "HEAD"),
        git(repo, "status", "--porcelain", "--untracked-files=all"),
        git(repo, "worktree", "list", "--porcelain"),
        subprocess.run(["git", "-C", str(repo), "bisect", "log"], capture_output=True).returncode,
    )


def bisect(repo: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.chdir(repo)
    return cli.main(["bisect", *args, "--home", str(repo / "benchmark_data")])


def run_folders(repo: Path) -> list[str]:
    runs = repo / "benchmark_data" / "runs"
    return sorted(p.name for p in runs.iterdir()) if runs.is_dir() else []


def test_bisect_finds_the_slow_commit_and_resumes_from_its_state(
    repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    path, shas = repo
    before = checkout_of(path)
    assert bisect(path, monkeypatch, shas[0], "main", "bench.yaml") == 0
    out = capfd.readouterr().out
    assert f"first bad commit: {shas[2]} work: five times the loop" in out
    # BAD by the gate's rule, the first bad commit beyond the midpoint BAD set
    assert re.search(r"loop_ms x\S+ \[\S+, \S+\] MDE \S+ \(fail_threshold 100%\): regressed", out)
    assert re.search(r"^  loop_ms x\S+ \[\S+, \S+\] MDE \S+: beyond midpoint x2\.", out, re.M)
    assert f"({shas[0][:7]} -> {shas[2][:7]}, interleaved in one session)" in out
    assert checkout_of(path) == before  # same HEAD, branch, clean tree, no worktree left
    state = Bisection.load(next((path / "benchmark_data" / "bisect").glob(f"*/{STATE}")))
    assert shas[2] in state.commits and shas[-1] in state.commits
    for k, sha in enumerate(shas[1:], start=1):
        if sha in state.commits:
            assert state.commits[sha]["outcome"] == ("good" if k < 2 else "bad"), k
    run = state.commits[shas[2]]["run_id"]
    assert f"run: {run} (GOOD {shas[0][:7]} and {shas[2][:7]} interleaved)" in out
    runs = run_folders(path)
    assert run in runs and len(runs) == len(state.commits)  # one session per step, no other
    # the staircase: every measured commit's ratio to GOOD with its interval, then its evidence
    assert "the staircase: each measured commit's ratio to GOOD" in out
    for sha in state.commits:
        assert re.search(rf"^  {sha[:7]} (good|bad) +loop_ms x\S+ \[\S+, \S+\]  ", out, re.M), sha
        assert re.search(rf"^ +run {state.commits[sha]['run_id']}: loop_ms x.* MDE ", out, re.M)
    assert re.search(rf"^  {shas[2][:7]} bad .*  <- first bad$", out, re.M)
    # BAD set the midpoint the later steps hunted: halfway (geometrically) to its ratio
    assert set(state.midpoints) == {"loop_ms"} and state.midpoints["loop_ms"] > 1.5
    assert re.search(r"loop_ms x\S+ \[\S+, \S+\] MDE \S+: beyond midpoint x", out)

    assert bisect(path, monkeypatch, shas[0], "main", "bench.yaml") == 0  # resumed: no new run
    captured = capfd.readouterr()
    assert f"first bad commit: {shas[2]}" in captured.out
    assert "measuring" not in captured.err and "(recorded" in captured.err
    assert run_folders(path) == runs
    assert checkout_of(path) == before

    # killed after the first bad commit's run finished, before its outcome was saved
    state.commits[shas[2]] = {"outcome": "pending", "run_id": state.commits[shas[2]]["run_id"]}
    state.save()
    assert bisect(path, monkeypatch, shas[0], "main", "bench.yaml") == 0
    captured = capfd.readouterr()
    assert f"first bad commit: {shas[2]}" in captured.out
    assert f"{shas[2][:7]} bad (recovered from its finished run" in captured.err
    assert run_folders(path) == runs


def test_no_regression_between_two_equal_commits(
    repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    path, shas = repo
    assert bisect(path, monkeypatch, shas[0], shas[1], "bench.yaml") == 1
    out = capfd.readouterr().out
    assert f"no regression: BAD {shas[1][:7]} did not regress against GOOD {shas[0][:7]}" in out
    assert "loop_ms x" in out and "(fail_threshold 100%): passed" in out


def test_a_commit_without_the_file_is_skipped_and_can_hide_the_first_bad_one(
    repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    path, shas = repo
    before = checkout_of(path)
    args = ("--file-from", "revision")  # each commit's own file: one commit has none
    assert bisect(path, monkeypatch, shas[0], "gone", "bench.yaml", *args) == 3
    out = capfd.readouterr().out
    gone, back = git(path, "rev-parse", "gone~1", "gone").split()
    assert "undecided: the first bad commit is one of (the others were skipped):" in out
    assert f"  {gone[:7]} remove the benchmark" in out and f"  {back[:7]} bring" in out
    assert f"  {gone[:7]} skip    -  remove the benchmark" in out
    assert "run -: bench.yaml is not in this commit" in out
    assert checkout_of(path) == before


@pytest.mark.parametrize(
    ("good", "bad", "file", "said"),
    [
        ("nosuchrev", "main", "bench.yaml", "GOOD `nosuchrev` is no commit of"),
        ("main", "main~5", "bench.yaml", "is not an ancestor of BAD `main~5`"),
        ("main~5", "main", "nosuch.yaml", "cannot read the benchmark file"),
    ],
)
def test_bad_input_exits_2_naming_the_fix(
    repo: tuple[Path, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    good: str,
    bad: str,
    file: str,
    said: str,
) -> None:
    path, _ = repo
    runs = run_folders(path)
    assert bisect(path, monkeypatch, good, bad, file) == 2
    err = capfd.readouterr().err
    assert said in err and "fix:" in err
    assert run_folders(path) == runs


def test_a_step_its_session_refuses_stops_the_bisection_as_bad_input(
    repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A commit whose own benchmark file gate 1 refuses: exit 2 with the refusal's message,
    not 'undecided' with the message hidden in a log."""
    path, shas = repo
    git(path, "checkout", "-q", "-b", "broken", shas[0])
    broken = {**BENCH, "warmpu": 1}  # a typo gate 1 names
    bad = commit(path, "a typo in the file", {"bench.yaml": yaml.safe_dump(broken)})
    git(path, "checkout", "-q", "main")
    assert bisect(path, monkeypatch, shas[0], bad, "bench.yaml", "--file-from", "revision") == 2
    captured = capfd.readouterr()
    assert "benchmark-agent bisect: a step was refused:" in captured.err
    assert "warmpu" in captured.err and "warmpu" in captured.out


def test_a_checkout_holding_a_copy_of_the_harness_is_measured_by_the_installed_one(
    repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Bisecting this project itself: a commit's worktree holds a package of the harness's
    name. Its session must not import it (``python -m pytest`` in the worktree would: the
    current folder comes first on sys.path), so every step runs the plugin that bisects."""
    path, shas = repo
    git(path, "checkout", "-q", "-b", "shadow", shas[0])
    (path / "pytest_benchmark_agent").mkdir()
    shadow = {
        "pytest_benchmark_agent/__init__.py": "raise SystemExit('the checkout copy was imported')\n"
    }
    bad = commit(path, "a package named like the harness", shadow)
    git(path, "checkout", "-q", "main")
    assert bisect(path, monkeypatch, shas[0], bad, "bench.yaml") == 1
    captured = capfd.readouterr()
    assert f"no regression: BAD {bad[:7]} did not regress" in captured.out
    assert "the checkout copy was imported" not in captured.out + captured.err


def test_the_working_trees_file_runs_for_every_commit_and_home_after_the_verb_is_named(
    repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The benchmark is fixed, the code varies: an uncommitted edit of the file (another name)
    is what every step runs; and --home given after the verb is the home every message
    names (no default home is announced or created)."""
    path, shas = repo
    edited = {**BENCH, "name": "loop-edited"}
    original = (path / "bench.yaml").read_text()
    (path / "bench.yaml").write_text(yaml.safe_dump(edited, sort_keys=False))
    try:
        monkeypatch.chdir(path)
        home = path.parent / "elsewhere"
        code = cli.main(["bisect", shas[0], shas[3], "bench.yaml", "--home", str(home)])
    finally:
        (path / "bench.yaml").write_text(original)
    assert code == 0
    captured = capfd.readouterr()
    assert f"first bad commit: {shas[2]}" in captured.out
    assert "data home" not in captured.err  # the verb's --home, not a default, named
    runs = sorted((home / "runs").iterdir())
    assert runs and all("loop-edited" in run.name for run in runs)
