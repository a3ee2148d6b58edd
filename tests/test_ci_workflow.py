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
#: The repository the workflows run in (``GITHUB_REPOSITORY``).
REPOSITORY = "owner/repo"
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
        #: Each shell step's outcome by its id, for ``if: steps.ID.outcome == 'success'``.
        self.outcomes: dict[str, str] = {}
        self.sha = git(origin, "rev-parse", ref)
        #: The pull request's head repository: a fork's differs from ``GITHUB_REPOSITORY``.
        self.head_repo = REPOSITORY

    def expression(self, text: str) -> str:
        def value(match: re.Match[str]) -> str:
            expr = match[1]
            if expr == "github.sha":
                return self.sha
            if expr == "github.workspace":
                return str(self.workspace)
            if expr == "github.event.pull_request.head.repo.full_name":
                return self.head_repo
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
            if not self.runs(step.get("if"), failed):
                continue
            if "uses" in step:
                self.action(
                    step["uses"].split("@")[0],
                    {k: self.expression(v) for k, v in (step.get("with") or {}).items()},
                )
                continue
            status = self.shell(step, env)
            statuses.append((step.get("name", step["run"][:30]), status))
            if "id" in step:
                self.outcomes[step["id"]] = "success" if status == 0 else "failure"
            failed = failed or status != 0
        return statuses

    def runs(self, condition: str | None, failed: bool) -> bool:
        """A step's ``if:``, for the forms the workflows use: ``always()`` and
        ``steps.ID.outcome == 'VALUE'`` joined by ``&&`` (without ``always()``, only while no
        step has failed, as GitHub's implied ``success()``)."""
        terms = [term.strip() for term in str(condition or "").split("&&") if term.strip()]
        ok = "always()" in terms or not failed
        for term in terms:
            outcome = re.fullmatch(r"steps\.([\w-]+)\.outcome == '(\w+)'", term)
            if term != "always()" and outcome is None:
                raise AssertionError(f"the test cannot evaluate the condition {condition!r}")
            ok = ok and (outcome is None or self.outcomes.get(outcome[1]) == outcome[2])
        return ok

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
            "GITHUB_REPOSITORY": REPOSITORY,
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


# -- both workflows: permissions, concurrency, and an install that fails once ----------------

BOTH = pytest.mark.parametrize("path", [ONE_SESSION, WORKFLOW], ids=["one-session", "recorded"])


@BOTH
def test_the_workflow_reads_only_and_cancels_a_superseded_pull_request_run(path: Path) -> None:
    document = workflow(path)
    assert document["permissions"] == {"contents": "read"}
    concurrency = document["concurrency"]
    assert "github.event.pull_request.number" in concurrency["group"]
    cancel = str(concurrency["cancel-in-progress"])
    assert cancel == "True" or cancel == "${{ github.event_name == 'pull_request' }}", cancel
    for job in document["jobs"].values():
        install = next(step for step in job["steps"] if step.get("name") == "Install")
        assert install["id"] == "install"
        for step in job["steps"]:
            if "always()" in str(step.get("if", "")):  # after a failure: never without the tool
                assert "steps.install.outcome == 'success'" in step["if"], step


def _pull_request_job(path: Path) -> dict[str, Any]:
    return workflow(path)["jobs"]["pull-request"]


def _errors(log: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith("::error::")]


@BOTH
def test_a_fork_s_pull_request_without_the_variable_fails_once_saying_so(
    path: Path, origin: Path, tmp_path: Path
) -> None:
    """GitHub passes a fork's pull request no repository variables: BENCH_TOOL is empty."""
    env = {**job_env(workflow(path)), "BENCH_TOOL": ""}
    pr = Runner(tmp_path, origin, "fork", pull_request(origin, 4, ("README.md", "x\n")), tmp_path)
    pr.head_repo = "someone/fork"
    statuses = pr.run_job(_pull_request_job(path), env)
    assert statuses == [("Install", 1)], pr.log  # nothing that needs the tool ran
    (error,) = _errors(pr.log)
    assert "comes from the fork someone/fork" in error and "no repository variables" in error
    assert "Fix: in this workflow's env" in error
    assert "command not found" not in pr.log


@BOTH
def test_a_pull_request_without_the_variable_names_the_setting(
    path: Path, origin: Path, tmp_path: Path
) -> None:
    env = {**job_env(workflow(path)), "BENCH_TOOL": ""}
    pr = Runner(tmp_path, origin, "unset", pull_request(origin, 5, ("README.md", "x\n")), tmp_path)
    statuses = pr.run_job(_pull_request_job(path), env)
    assert statuses == [("Install", 1)], pr.log
    (error,) = _errors(pr.log)
    assert "set the repository variable BENCH_TOOL" in error and "fork" not in error


@BOTH
def test_a_tool_pip_cannot_install_fails_the_install_alone(
    path: Path, origin: Path, tmp_path: Path
) -> None:
    """The export step (``if: always()``) ran after it and added "benchmark-agent: command not
    found"; it now runs only where the install succeeded."""
    missing = tmp_path / "no" / "pytest_benchmark_agent-0-py3-none-any.whl"
    env = {**job_env(workflow(path)), "BENCH_TOOL": str(missing)}
    pr = Runner(tmp_path, origin, "broken", pull_request(origin, 6, ("README.md", "x\n")), tmp_path)
    statuses = pr.run_job(_pull_request_job(path), env)
    assert statuses == [("Install", 1)], pr.log
    (error,) = _errors(pr.log)
    assert "pip could not install BENCH_TOOL" in error and str(missing) in error
    assert "command not found" not in pr.log


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
