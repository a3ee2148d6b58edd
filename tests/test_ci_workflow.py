"""examples/ci/: the one-session gate (github-actions.yml) and the recorded-baseline gate
(github-actions-recorded-baseline.yml): their structure, and their shell steps run locally.

The workflows' ``run:`` steps run as GitHub runs them (``bash --noprofile --norc -eo pipefail``,
the workflow's env, ``$GITHUB_OUTPUT``, ``$GITHUB_STEP_SUMMARY``) against a real git repository
holding a small benchmark. The one-session gate: a pull request's job on GitHub's merge commit,
checked out with the base branch as ``origin/main``, measuring both. The recorded baseline:
main's job on commit A, then the pull request's job on a merge commit whose first parent is A,
in another clone with its own data directory. The standard actions are played by the few lines
they stand for: checkout is a fetch of the commit (with ``fetch-depth: 0`` every branch as
``origin/*``), the cache is a folder shared by the jobs, an upload copies the file. The
repository variable ``BENCH_TOOL`` names the tool as this test environment already has it
(``pytest-benchmark-agent``, installed: pip finds it satisfied and never reaches an index).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from benchhelpers import git

from pytest_benchmark_agent.engine import counters

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "ci"
WORKFLOW = EXAMPLES / "github-actions-recorded-baseline.yml"
ONE_SESSION = EXAMPLES / "github-actions.yml"
ACTIONS = {
    "actions/checkout",
    "actions/setup-python",
    "actions/cache/save",
    "actions/cache/restore",
    "actions/upload-artifact",
    "actions/download-artifact",
    "actions/cache",
}
#: The repository variables the workflows read: the tool as this environment has it installed.
REPOSITORY_VARIABLES = {"vars.BENCH_TOOL": "pytest-benchmark-agent"}
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")

BENCH = """\
name: ci-demo
hypothesis: this commit costs no more than main
replicates: 7
stages:
  - name: measure
    kind: measure
    cmd: sh src/measure.sh
    metrics_from: {stdout: true, fields: [cost]}
metrics:
  cost: {direction: lower, primary: true}
"""


def workflow(path: Path = WORKFLOW) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def test_the_workflow_has_a_main_job_and_a_pull_request_job() -> None:
    document = workflow()
    triggers = document.get("on", document.get(True))  # YAML 1.1 reads a bare `on` as true
    assert triggers["push"]["branches"] == ["main"] and "pull_request" in triggers
    jobs = document["jobs"]
    assert set(jobs) == {"main", "pull-request"}
    assert jobs["main"]["if"] == "github.event_name == 'push'"
    assert jobs["pull-request"]["if"] == "github.event_name == 'pull_request'"
    for job in jobs.values():
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), step
            if "uses" in step:
                assert step["uses"].split("@")[0] in ACTIONS, step["uses"]
    main = " ".join(s.get("run", "") for s in jobs["main"]["steps"])
    assert "pytest --bench" in main and "benchmark-agent export" in main
    pr = " ".join(s.get("run", "") for s in jobs["pull-request"]["steps"])
    assert "benchmark-agent import" in pr
    assert '--bench-baseline "$BASE_SHA" --bench-fail-on=regression,unjudged' in pr
    saved = next(
        s for s in jobs["main"]["steps"] if s.get("uses", "").startswith("actions/cache/save")
    )
    restored = next(
        s
        for s in jobs["pull-request"]["steps"]
        if s.get("uses", "").startswith("actions/cache/restore")
    )
    assert saved["with"]["path"] == restored["with"]["path"] == "bench-main.json"
    checkout = jobs["pull-request"]["steps"][0]
    assert checkout["uses"].startswith("actions/checkout") and checkout["with"]["fetch-depth"] >= 2


class Runner:
    """Plays one job of the workflow in ``workspace``, on the commit ``ref`` of ``origin``."""

    def __init__(self, tmp: Path, origin: Path, name: str, ref: str, cache: Path) -> None:
        self.origin, self.ref, self.cache = origin, ref, cache
        self.workspace = tmp / name
        self.summary = tmp / f"{name}-summary.md"
        self.artifacts = tmp / f"{name}-artifacts"
        self.outputs: dict[str, dict[str, str]] = {}
        self.sha = git(origin, "rev-parse", ref)

    def expression(self, text: str) -> str:
        def value(match: re.Match[str]) -> str:
            expr = match[1]
            if expr == "github.sha":
                return self.sha
            if expr == "github.workspace":
                return str(self.workspace)
            step = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr)
            if step:
                return self.outputs[step[1]][step[2]]
            raise AssertionError(f"the test knows no value for the expression {expr!r}")

        return _EXPRESSION.sub(value, str(text))

    def run_job(self, job: dict[str, Any], env: dict[str, str]) -> list[tuple[str, int]]:
        """Every step in order (after a failure only those with ``if: always()``); returns
        (step name, exit status) of each shell step."""
        statuses: list[tuple[str, int]] = []
        failed = False
        for step in job["steps"]:
            if failed and "always()" not in str(step.get("if", "")):
                continue
            if "uses" in step:
                self.action(
                    step["uses"].split("@")[0],
                    {k: self.expression(v) for k, v in (step.get("with") or {}).items()},
                )
                continue
            status = self.shell(step, env)
            statuses.append((step.get("name", step["run"][:30]), status))
            failed = failed or status != 0
        return statuses

    def action(self, name: str, given: dict[str, str]) -> None:
        if name == "actions/checkout":
            self.workspace.mkdir()
            git(self.workspace, "init", "-q")
            depth = int(given.get("fetch-depth", 1))
            if depth == 0:  # all history, and every branch as origin/<branch>
                branches = "+refs/heads/*:refs/remotes/origin/*"
                git(self.workspace, "fetch", "-q", f"file://{self.origin}", self.ref, branches)
            else:
                git(
                    self.workspace,
                    "fetch",
                    "-q",
                    f"--depth={depth}",
                    f"file://{self.origin}",
                    self.ref,
                )
            git(self.workspace, "checkout", "-q", "FETCH_HEAD")
        elif name == "actions/setup-python":
            assert given["python-version"]
        elif name == "actions/cache/save":
            shutil.copy(self.workspace / given["path"], self.cache / given["key"])
        elif name == "actions/cache/restore":
            if (self.cache / given["key"]).is_file():
                shutil.copy(self.cache / given["key"], self.workspace / given["path"])
        elif name == "actions/upload-artifact":
            (self.artifacts / given["name"]).mkdir(parents=True)
            shutil.copy(self.workspace / given["path"], self.artifacts / given["name"])
        else:
            raise AssertionError(f"the test does not play {name}")

    def shell(self, step: dict[str, Any], env: dict[str, str]) -> int:
        output = self.workspace.parent / f"{self.workspace.name}-output"
        output.write_text("")
        step_env = {
            **env,
            **{k: self.expression(v) for k, v in (step.get("env") or {}).items()},
            "GITHUB_OUTPUT": str(output),
            "GITHUB_STEP_SUMMARY": str(self.summary),
            "GITHUB_SHA": self.sha,
            "GITHUB_BASE_REF": "main",
            "GITHUB_WORKSPACE": str(self.workspace),
        }
        done = subprocess.run(
            [
                "bash",
                "--noprofile",
                "--norc",
                "-eo",
                "pipefail",
                "-c",
                self.expression(step["run"]),
            ],
            cwd=self.workspace,
            env=step_env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        self.log = getattr(self, "log", "") + f"\n$ {step['run']}\n{done.stdout}{done.stderr}"
        if "id" in step:
            self.outputs[step["id"]] = dict(
                line.split("=", 1) for line in output.read_text().splitlines() if "=" in line
            )
        return done.returncode


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    """A git repository with the benchmark on main (commit A, cost 100)."""
    repo = tmp_path / "origin"
    (repo / "src").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "ci@example.com")
    git(repo, "config", "user.name", "ci")
    (repo / "bench.yaml").write_text(BENCH)
    (repo / "src" / "measure.sh").write_text("echo cost=$(cat src/cost.txt)\n")
    (repo / "src" / "cost.txt").write_text("100\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "A")
    return repo


def pull_request(repo: Path, number: int, change: tuple[str, str]) -> str:
    """A pull request branch with one commit, and GitHub's merge commit of it into main as
    ``refs/pull/N/merge`` (its first parent is main)."""
    git(repo, "checkout", "-q", "-b", f"pr{number}", "main")
    (repo / change[0]).write_text(change[1])
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"pr {number}")
    git(repo, "checkout", "-q", "--detach", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", f"Merge pr {number}", f"pr{number}")
    ref = f"refs/pull/{number}/merge"
    git(repo, "update-ref", ref, "HEAD")
    git(repo, "checkout", "-q", "main")
    return ref


def job_env(document: dict[str, Any]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("BENCHMARK_HOME", "PYTEST_ADDOPTS")}
    env.update(
        {
            k: _EXPRESSION.sub(lambda match: REPOSITORY_VARIABLES[match[1]], str(v))
            for k, v in document["env"].items()
        }
    )
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")  # never the network
    return env


def test_main_then_pull_requests_gate_on_main_s_run(origin: Path, tmp_path: Path) -> None:
    document = workflow()
    env = job_env(document)
    cache = tmp_path / "cache"
    cache.mkdir()

    main = Runner(tmp_path, origin, "main", "refs/heads/main", cache)
    statuses = main.run_job(document["jobs"]["main"], env)
    assert all(status == 0 for _, status in statuses), main.log
    assert (cache / f"bench-main-{main.sha}").is_file()
    assert (main.artifacts / f"bench-main-{main.sha}" / "bench-main.json").is_file()
    assert "gate **unjudged** (within the run: no --bench-baseline)" in main.summary.read_text()

    # A pull request that edits only the README: compared with main's run, and it passes.
    docs = Runner(
        tmp_path, origin, "pr-docs", pull_request(origin, 1, ("README.md", "hi\n")), cache
    )
    statuses = docs.run_job(document["jobs"]["pull-request"], env)
    assert all(status == 0 for _, status in statuses), docs.log
    assert "imported " in docs.log
    summary = docs.summary.read_text()
    assert f"{main.sha[:7]} -> {docs.sha[:7]}: gate **passed**" in summary, summary
    assert "| metric | baseline | this run | ratio | interval | MDE | n | CV | verdict |" in summary
    assert re.search(
        r"^\| `cost` \| 100 \| 100 \| x1 \| \[1, 1\] \| 1% \| 7/7 \| 0%/0% \| no_change \|$",
        summary,
        re.M,
    ), summary

    # A pull request that triples the cost: the gate fails the job, naming both commits.
    slow = Runner(
        tmp_path, origin, "pr-slow", pull_request(origin, 2, ("src/cost.txt", "300\n")), cache
    )
    statuses = slow.run_job(document["jobs"]["pull-request"], env)
    gate = dict(statuses)["Benchmark the pull request against main"]
    assert gate == 1, slow.log
    assert dict(statuses)["Export the pull request's run"] == 0  # if: always()
    summary = slow.summary.read_text()
    assert f"{main.sha[:7]} -> {slow.sha[:7]}: gate **regressed**" in summary, summary
    assert re.search(
        r"^\| `cost` \| 100 \| 300 \| x3 \| \[3, 3\] \| \S+ \| 7/7 \| 0%/0% \| regressed",
        summary,
        re.M,
    ), summary
    assert "beyond fail_threshold" in summary


def test_a_pull_request_without_main_s_run_is_unjudged_and_fails(
    origin: Path, tmp_path: Path
) -> None:
    document = workflow()
    cache = tmp_path / "cache"
    cache.mkdir()  # empty: main's job never ran at this commit
    pr = Runner(tmp_path, origin, "pr", pull_request(origin, 3, ("README.md", "x\n")), cache)
    statuses = dict(pr.run_job(document["jobs"]["pull-request"], job_env(document)))
    assert statuses["Import main's run"] == 0
    assert "::warning::no run of main at" in pr.log
    assert statuses["Benchmark the pull request against main"] == 1, pr.log
    summary = pr.summary.read_text()
    assert "gate **unjudged**" in summary and "no baseline ->" in summary, summary


def test_under_xdist_the_summary_is_written_once_by_the_controller(
    origin: Path, tmp_path: Path
) -> None:
    summary = tmp_path / "summary.md"
    env = {k: v for k, v in os.environ.items() if k not in ("BENCHMARK_HOME", "PYTEST_ADDOPTS")}
    env["GITHUB_STEP_SUMMARY"] = str(summary)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--bench",
            "bench.yaml",
            "-p",
            "no:cacheprovider",
            "-n",
            "2",
        ],
        cwd=origin,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    text = summary.read_text()
    assert text.count("### `ci-demo`") == 1, text
    assert re.search(
        r"^\| `cost` \| - \| 100 \| - \| - \| - \| \d+ \| \S+ \| not judged", text, re.M
    ), text


# -- the one-session gate: github-actions.yml ----------------------------------------------------


def test_the_one_session_workflow_is_one_pull_request_job_needing_nothing_from_main() -> None:
    document = workflow(ONE_SESSION)
    triggers = document.get("on", document.get(True))  # YAML 1.1 reads a bare `on` as true
    assert set(triggers) == {"pull_request"}
    (job,) = document["jobs"].values()
    uses = [step["uses"].split("@")[0] for step in job["steps"] if "uses" in step]
    assert set(uses) <= ACTIONS and not any("cache" in u or "download" in u for u in uses)
    checkout = job["steps"][0]
    assert checkout["uses"].startswith("actions/checkout") and checkout["with"]["fetch-depth"] == 0
    script = " ".join(step.get("run", "") for step in job["steps"])
    assert '--bench-against "origin/$GITHUB_BASE_REF" --bench-fail-on=regression' in script
    assert "pip install pytest-benchmark-agent" not in script  # not on the index
    assert 'pip install "$BENCH_TOOL"' in script
    assert document["env"]["BENCH_TOOL"] == "${{ vars.BENCH_TOOL }}"


def test_the_one_session_gate_passes_a_readme_edit_and_fails_a_slowdown(
    origin: Path, tmp_path: Path
) -> None:
    document = workflow(ONE_SESSION)
    env = job_env(document)
    job = document["jobs"]["pull-request"]
    cache = tmp_path / "cache"  # no job of main ran: nothing is restored
    cache.mkdir()
    main = git(origin, "rev-parse", "main")

    docs = Runner(tmp_path, origin, "docs", pull_request(origin, 1, ("README.md", "hi\n")), cache)
    statuses = docs.run_job(job, env)
    assert all(status == 0 for _, status in statuses), docs.log
    summary = docs.summary.read_text()
    both = f"{main[:12]} (origin/main) -> {docs.sha[:12]} (HEAD)"
    assert f"### `ci-demo`: {both}: gate **passed**" in summary, summary
    assert "(both revisions measured in this session, interleaved)" in summary

    slow = Runner(
        tmp_path, origin, "slow", pull_request(origin, 2, ("src/cost.txt", "300\n")), cache
    )
    statuses = dict(slow.run_job(job, env))
    assert statuses["Benchmark the pull request against its base, in one session"] == 1, slow.log
    assert statuses["Export the run"] == 0  # if: always()
    summary = slow.summary.read_text()
    both = f"{main[:12]} (origin/main) -> {slow.sha[:12]} (HEAD)"
    assert f"### `ci-demo`: {both}: gate **regressed**" in summary, summary
    row = f"| `cost` [{slow.sha[:12]} vs control {main[:12]}] | 100 | 300 | x3 | [3, 3] |"
    assert any(line.startswith(row) and "| regressed" in line for line in summary.splitlines())
    assert (slow.artifacts / f"bench-pr-{slow.sha}" / "bench-pr.json").is_file()
    # the base's worktree is gone: only the job's own checkout is left
    assert git(slow.workspace, "worktree", "list", "--porcelain").count("worktree ") == 1


@pytest.mark.skipif(counters.backend() is None, reason="no counting backend (install valgrind)")
def test_the_one_session_gate_decides_on_counted_instructions_in_three_blocks(
    tmp_path: Path,
) -> None:
    """examples/ci/bench.yaml as a repository's benchmark: a pull request doing 2% more work
    fails the gate on its instructions at 3 blocks, with wall time measured beside them (and
    its trials never overlapping the counted ones, which run a block at once)."""
    repo = tmp_path / "origin"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "ci@example.com")
    git(repo, "config", "user.name", "ci")
    for name in ("bench.yaml", "work.py"):
        shutil.copy(EXAMPLES / name, repo / name)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "the counted benchmark")
    work = (repo / "work.py").read_text().replace("STEPS = 100_000", "STEPS = 102_000")
    document = workflow(ONE_SESSION)
    cache = tmp_path / "cache"
    cache.mkdir()
    more = Runner(tmp_path, repo, "more", pull_request(repo, 1, ("work.py", work)), cache)
    statuses = dict(more.run_job(document["jobs"]["pull-request"], job_env(document)))
    assert statuses["Benchmark the pull request against its base, in one session"] == 1, more.log
    summary = more.summary.read_text()
    assert "gate **regressed**" in summary, summary
    rows = [line for line in summary.splitlines() if line.startswith("| `")]
    assert any(r.startswith("| `instructions` [") and "| regressed" in r for r in rows), summary
    assert any(r.startswith("| `wall_s` [") for r in rows), summary
