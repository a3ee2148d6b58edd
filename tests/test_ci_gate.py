"""The CI gate across commits, on a real git repository and real ``pytest --bench`` processes.

A benchmark of one configuration times a Python loop. Commit A is the loop, commit B does five
times the work, commit C only edits the README. Each session names its baseline as CI would
(``HEAD~1``, ``latest``, a commit without a run, a REF naming nothing) and the gate's outcome,
exit code, terminal lines and record are checked; so are ``benchmark-agent compare`` between
revisions and the refusal of a baseline with another param value. Then REF resolution on its
own (index entries written by hand in a real repository) and the resolution benchmark's table.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_benchmark_agent.judge.baseline import Resolution, resolve_ref
from pytest_benchmark_agent.records.reader import load_results

LOOP = """import sys
import time

WORK = {work}
start = time.process_time()
total = 0
for i in range(WORK * int(sys.argv[1])):
    total += i
print(f"loop_s={{time.process_time() - start}}")
"""
BENCH = {
    "name": "loop",
    "hypothesis": "the loop keeps its speed from commit to commit",
    "params": {"size": 1},
    "replicates": 5,
    "stages": [
        {
            "name": "measure",
            "kind": "measure",
            "cmd": f"{sys.executable} loop.py {{size}}",
            "metrics_from": {"stdout": True, "fields": ["loop_s"]},
        }
    ],
    # noise_threshold, fail_threshold and reproduce_tolerance are wide: the gate must catch x5,
    # never a busy machine, and a rerun's interval must fit the tolerance to count as agreeing
    "metrics": {
        "loop_s": {
            "direction": "lower",
            "primary": True,
            "noise_threshold": 0.5,
            "fail_threshold": 1.0,
            "reproduce_tolerance": 1.0,
        }
    },
}
GIT_ENV = {
    "GIT_AUTHOR_NAME": "ci",
    "GIT_AUTHOR_EMAIL": "ci@example.invalid",
    "GIT_COMMITTER_NAME": "ci",
    "GIT_COMMITTER_EMAIL": "ci@example.invalid",
}


class Repo:
    """A git work tree holding the benchmark, its data home beside it, sessions run in it."""

    def __init__(self, root: Path):
        self.path = root / "repo"
        self.home = root / "home"
        self.path.mkdir()
        self.env = {k: v for k, v in os.environ.items() if k != "BENCHMARK_HOME"} | GIT_ENV
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=self.path, env=self.env, capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    def commit(self, message: str, **files: str) -> str:
        """Write ``files`` (name -> text), commit them; the new commit's 7-hex label."""
        for name, text in files.items():
            (self.path / name).write_text(text)
        self.git("add", *files)
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")[:7]

    def bench(self, run_id: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--bench",
                "bench.yaml",
                "--bench-home",
                str(self.home),
                "--bench-run-id",
                run_id,
                "-p",
                "no:cacheprovider",
                "-p",
                "no:randomly",
                *args,
            ],
            cwd=self.path,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def record(self, run_id: str) -> dict[str, Any]:
        return load_results(self.home / "runs" / run_id)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Commits 0 (README only, never benchmarked), A, B (x5 work) and C (README), each
    benchmarked as CI would against the commit before it, then the odd cases."""
    repo = Repo(tmp_path_factory.mktemp("ci"))
    out: dict[str, Any] = {"repo": repo}
    out["zero"] = repo.commit("readme", **{"README.md": "# loop\n"})
    out["a"] = repo.commit(
        "the loop",
        **{
            "loop.py": LOOP.format(work=300_000),
            "bench.yaml": yaml.safe_dump(BENCH, sort_keys=False),
        },
    )
    out["at-a"] = repo.bench("at-a")
    out["b"] = repo.commit("five times the work", **{"loop.py": LOOP.format(work=1_500_000)})
    out["at-b"] = repo.bench("at-b", "--bench-baseline", "HEAD~1", "--bench-fail-on=regression")
    out["c"] = repo.commit("docs only", **{"README.md": "# loop\n\nIt loops.\n"})
    out["at-c"] = repo.bench("at-c", "--bench-baseline", "HEAD~1", "--bench-fail-on=regression")
    (repo.path / "notes.txt").write_text("an untracked file\n")
    out["untracked"] = repo.bench(
        "untracked", "--bench-baseline", "latest", "--bench-fail-on=regression"
    )
    out["other-param"] = repo.bench(
        "other-param", "--bench-baseline", "HEAD~1", "--bench-set", "size=2"
    )
    out["no-run"] = repo.bench(
        "no-run", "--bench-baseline", out["zero"], "--bench-fail-on=regression"
    )
    out["no-run-strict"] = repo.bench(
        "no-run-strict", "--bench-baseline", "no-such-ref", "--bench-fail-on=regression,unjudged"
    )
    return out


def test_a_slower_commit_fails_the_gate_naming_both_commits(history: dict[str, Any]) -> None:
    done = history["at-b"]
    assert done.returncode == 1, done.stdout + done.stderr
    a, b = history["a"], history["b"]
    assert f"code {a} -> {b}" in done.stdout
    gate_line = next(line for line in done.stdout.splitlines() if "CI gate:" in line)
    assert gate_line.startswith("  CI gate: REGRESSED: `loop_s`")
    assert "against at-a" in gate_line
    assert f"({a} -> {b}), beyond fail_threshold 100%" in gate_line
    base = history["repo"].record("at-b")["baseline"]
    assert base["run_id"] == "at-a" and base["ref"] == "HEAD~1"
    assert base["resolved"] == f"git revision {a}"
    assert base["code"] == {"baseline": a, "this": b, "changed": True}
    assert base["gate"]["outcome"] == "regressed"
    (verdict,) = base["verdicts"]["loop_s"].values()
    assert verdict["verdict"] == "regressed" and verdict["ratio"] > 2
    assert {"verdict", "ratio", "ci", "p", "p_holm", "n", "reason", "against"} <= set(verdict)
    report = (history["repo"].home / "runs" / "at-b" / "report.md").read_text()
    assert f"- **Code:** {a} -> {b} (changed: this is a comparison of code)" in report
    assert "- **CI gate:** REGRESSED" in report
    assert f"### `loop_s` against the baseline ({a} -> {b})" in report
    assert "the baseline at-a is EXPLORATORY" in report


def test_a_commit_that_only_edits_the_readme_passes(history: dict[str, Any]) -> None:
    done = history["at-c"]
    assert done.returncode == 0, done.stdout + done.stderr
    b, c = history["b"], history["c"]
    assert (
        "  CI gate: passed: every primary metric's interval rules out a regression beyond its "
        f"fail_threshold against baseline at-b ({b} -> {c})" in done.stdout
    )
    record = history["repo"].record("at-c")
    assert record["baseline"]["code"] == {"baseline": b, "this": c, "changed": True}
    # every CI run of a new commit is one session of its code: EXPLORATORY, and it says why
    assert record["tag"] == "EXPLORATORY"
    assert any(
        reason.startswith("no earlier run of this frozen config and code to reproduce")
        for reason in record["tag_reasons"]
    )


def test_an_untracked_file_changes_nothing_and_latest_is_the_last_run(
    history: dict[str, Any],
) -> None:
    done = history["untracked"]
    assert done.returncode == 0, done.stdout + done.stderr
    c = history["c"]
    record = history["repo"].record("untracked")
    base = record["baseline"]
    assert base["run_id"] == "at-c" and base["resolved"] == "latest"
    assert base["code"] == {"baseline": c, "this": c, "changed": False}
    assert base["fingerprint"]["blocking"] == [] and base["fingerprint"]["code"] == []
    # the same code never fails the gate; whether two timed sessions are close enough to pass
    # on the evidence (or, on a loaded machine, stay unjudged, saying why) is the machine's
    # load, and the evidence rule itself is test_judge's
    assert base["gate"]["outcome"] in ("passed", "unjudged"), base["gate"]
    assert base["gate"]["reasons"], base["gate"]
    # the same config and code again: at-c is the run it is checked against (whether two timed
    # runs agree depends on the machine's load; the rule itself is test_judge's)
    reproduces = record["reproduces"]
    assert reproduces["run_id"] == "at-c" and reproduces["kind"] == "reproduction"
    assert reproduces["lines"] and all("against at-c" in line for line in reproduces["lines"])


def test_a_baseline_with_another_param_value_is_refused_naming_it(history: dict[str, Any]) -> None:
    done = history["other-param"]
    assert done.returncode == 2, done.stdout + done.stderr  # a collection error
    assert (
        "params.size: is '2' here but '1' in baseline at-b (HEAD~1): a baseline may differ "
        "in the code only."
    ) in done.stdout
    assert not (history["repo"].home / "runs" / "other-param").exists()


def test_a_missing_baseline_is_unjudged_loudly_and_fails_only_when_asked(
    history: dict[str, Any],
) -> None:
    done = history["no-run"]
    assert done.returncode == 0, done.stdout + done.stderr  # regression only: nothing regressed
    zero = history["zero"]
    gate_line = next(line for line in done.stdout.splitlines() if "CI gate:" in line)
    assert gate_line.startswith(
        f"  CI gate: UNJUDGED: baseline `{zero}`: `{zero}` is git commit "
        f"{zero} (in {history['repo'].path}), but no finished run of "
        "benchmark 'loop' measured it with a clean tree"
    )
    assert "fix: run `pytest --bench` at that commit first" in gate_line
    record = history["repo"].record("no-run")
    assert record["baseline"]["run_id"] is None
    assert record["baseline"]["gate"]["outcome"] == "unjudged"
    strict = history["no-run-strict"]
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert (
        "  CI gate: UNJUDGED: baseline `no-such-ref`: `no-such-ref` is no run id" in strict.stdout
    )


def test_compare_takes_revisions_and_names_both_commits(history: dict[str, Any]) -> None:
    repo = history["repo"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_benchmark_agent.cli.main",
            "--home",
            str(repo.home),
            "compare",
            "HEAD~2",
            "HEAD~1",
        ],
        cwd=repo.path,
        env=repo.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    a, b = history["a"], history["b"]
    assert done.stdout.startswith("compare at-a (EXPLORATORY, complete) -> at-b")
    assert f"code: {a} -> {b} (B measured other code: this is a comparison of code)" in done.stdout
    row = next(line.split() for line in done.stdout.splitlines() if "regressed" in line)
    assert row[3] == "regressed"
    missing = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_benchmark_agent.cli.main",
            "--home",
            str(repo.home),
            "compare",
            history["zero"],
            "latest",
        ],
        cwd=repo.path,
        env=repo.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2
    assert f"unjudged: `{history['zero']}` is git commit" in missing.stderr


# -- resolving a REF from the index entries -------------------------------------------------------


def entry(
    home: Path,
    run_id: str,
    commit: str | None,
    *,
    name: str = "loop",
    state: str = "complete",
    tag: str = "EXPLORATORY",
    dirty: bool = False,
    key: str = "k",
    ended: str = "2026-01-01T00:00:00.000Z",
) -> None:
    """A recorded run as the index knows it (its index.json and a minimal results.yaml)."""
    folder = home / "runs" / run_id
    folder.mkdir(parents=True)
    code = (
        None
        if commit is None
        else {
            "commit": commit,
            "short": commit[:7],
            "branch": "main",
            "dirty": dirty,
            "label": commit[:7],
        }
    )
    (folder / "index.json").write_text(
        json.dumps(
            {
                "run_id": run_id,
                "name": name,
                "state": state,
                "tag": tag,
                "ended": ended,
                "code": code,
                "comparison_key": key,
            }
        )
    )
    (folder / "results.yaml").write_text(f"run_id: {run_id}\nstate: {state}\n")


@pytest.fixture
def two_commits(tmp_path: Path) -> tuple[Repo, str, str]:
    repo = Repo(tmp_path)
    repo.commit("one", **{"a.txt": "1\n"})
    repo.commit("two", **{"a.txt": "2\n"})
    return repo, repo.git("rev-parse", "HEAD~1"), repo.git("rev-parse", "HEAD")


def test_a_ref_is_a_run_id_a_prefix_latest_or_a_revision(two_commits) -> None:
    repo, first, second = two_commits
    home = repo.home
    entry(home, "2026-01-01T00-00-00-loop-aaaa", first, ended="2026-01-01T00:00:01.000Z")
    entry(
        home, "2026-01-01T00-00-05-loop-bbbb", first, dirty=True, ended="2026-01-01T00:00:06.000Z"
    )
    entry(
        home, "2026-01-01T00-00-09-loop-cccc", second, key="other", ended="2026-01-01T00:00:10.000Z"
    )
    entry(home, "2026-01-01T00-00-12-loop-dddd", second, ended="2026-01-01T00:00:13.000Z")
    entry(
        home,
        "2026-01-01T00-00-15-loop-eeee",
        second,
        tag="UNRELIABLE",
        ended="2026-01-01T00:00:16.000Z",
    )
    entry(
        home,
        "2026-01-01T00-00-20-other-ffff",
        second,
        name="other",
        ended="2026-01-01T00:00:21.000Z",
    )

    def resolve(ref: str, **kwargs: Any) -> Resolution:
        return resolve_ref(home, ref, "loop", repo.path, key="k", **kwargs)

    assert resolve("2026-01-01T00-00-00-loop-aaaa").how == "run id"
    assert resolve("2026-01-01T00-00-09").run_id == "2026-01-01T00-00-09-loop-cccc"
    latest = resolve("latest")  # the UNRELIABLE and the other benchmark's runs are skipped,
    assert (latest.run_id, latest.how) == ("2026-01-01T00-00-12-loop-dddd", "latest")
    # ... and a run sharing the comparison key is preferred to a newer one of other params
    assert (
        resolve("latest", exclude="2026-01-01T00-00-12-loop-dddd").run_id
        == "2026-01-01T00-00-05-loop-bbbb"
    )
    assert (
        resolve_ref(home, "latest", "loop", repo.path, key="other").run_id
        == "2026-01-01T00-00-09-loop-cccc"
    )
    head = resolve("HEAD")
    assert (head.run_id, head.how) == (
        "2026-01-01T00-00-12-loop-dddd",
        f"git revision {second[:7]}",
    )
    assert resolve("main~1").run_id == "2026-01-01T00-00-00-loop-aaaa"  # the clean one
    assert resolve(first[:10]).run_id == "2026-01-01T00-00-00-loop-aaaa"
    refused = resolve("2026-01-01T00-00-15")
    assert refused.run_id == "2026-01-01T00-00-15-loop-eeee"
    assert refused.problem.startswith(
        "run 2026-01-01T00-00-15-loop-eeee is UNRELIABLE (a gate "
        "failed in it) and cannot be a baseline"
    )
    assert resolve_ref(home, "2026-01-01T00-00-15", None, repo.path, strict=False).problem is None
    ambiguous = resolve("2026-01-01T00-00-")
    assert ambiguous.run_dir is None
    assert ambiguous.problem.startswith("`2026-01-01T00-00-` is a prefix of 6 run ids")


def test_a_revision_without_a_clean_run_says_what_it_searched(two_commits) -> None:
    repo, first, _ = two_commits
    entry(repo.home, "r-dirty", first, dirty=True)
    entry(repo.home, "r-old", None)
    found = resolve_ref(repo.home, "HEAD~1", "loop", repo.path)
    assert found.run_dir is None
    assert found.problem == (
        f"`HEAD~1` is git commit {first[:7]} (in {repo.path}), but no finished run of benchmark "
        f"'loop' measured it with a clean tree in {repo.home / 'runs'} (2 run(s) of it recorded: "
        "0 at other commits, 1 at it with a dirty tree, 1 without a recorded commit); fix: run "
        "`pytest --bench` at that commit first (in CI: on the base branch, keeping or importing "
        "its data home), or name a run id (benchmark-agent history lists them)"
    )
    outside = resolve_ref(repo.home, "HEAD", "loop", repo.home)
    assert outside.problem.endswith(
        "(that folder is in no git repository); fix: give a run id "
        "(benchmark-agent history lists them), `latest`, or a "
        "commit, branch or tag of that repository"
    )


def test_a_bad_fail_on_value_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--bench",
            "--bench-fail-on=regresion",
            "-p",
            "no:cacheprovider",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 4
    assert "'regresion': give a comma list of regression, unjudged" in done.stderr


def test_the_resolution_benchmark_prints_its_table() -> None:
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "baseline_resolution.py"
    done = subprocess.run(
        [sys.executable, str(script), "--runs", "40", "--repeat", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert lines[0].startswith("baseline resolution in a home of 40 recorded runs")
    assert lines[1].split() == ["REF", "median", "min", "n", "target", "result"]
    rows = [
        re.match(r"^(.+?)\s+(\d+\.\d{3}) ms\s+(\d+\.\d{3}) ms\s+2  < 50 ms\s+(met|MISSED)$", line)
        for line in lines[2:5]
    ]
    assert all(rows), lines
    assert [row.group(1) for row in rows] == [
        "latest",
        f"run id prefix ({rows[1].group(1).split('(')[1][:-1]})",
        "git revision (HEAD~2)",
    ]
    assert lines[5] == "files one resolution opens: 40 index.json, 0 results.yaml, 0 config.yaml"
