"""Issue 45, point 4: worktrees have owners.

A ``--bench-against`` session killed with SIGKILL never reaches its cleanup, so REV's worktree
stayed under the data home and registered in the repository forever, and a plain ``pytest`` of
the project then collected the old revision's copy of its tests and stopped with "import file
mismatch". Here a real session in a real git repository is held in its first trial and killed;
a plain ``pytest`` must not collect the worktree, and the next verb (``clean``) or the next
session must remove it, git's record of it too, while a live session's worktree is left alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from benchhelpers import git

from pytest_benchmark_agent.engine import worktrees
from pytest_benchmark_agent.records import recover

WAIT_S = 300.0  # a bound on waiting for the session to reach its first trial, not a timing
UNIT_TEST = "def test_one():\n    assert True\n"


def _bench_document() -> dict:
    """One stage reporting ``cost=1``; with ``$HOLD_DIR`` set it writes its pid there and waits
    for the test to kill the session."""
    hold = 'if [ -n "$HOLD_DIR" ]; then echo $$ > "$HOLD_DIR/pid.tmp"; '
    hold += 'mv "$HOLD_DIR/pid.tmp" "$HOLD_DIR/pid"; exec sleep 600; fi; echo cost=1'
    return {
        "name": "owners",
        "hypothesis": "this commit costs no more than the one compared with",
        "replicates": 2,
        "stages": [
            {
                "name": "measure",
                "kind": "measure",
                "cmd": hold,
                "metrics_from": {"stdout": True, "fields": ["cost"]},
            }
        ],
        "metrics": {"cost": {"direction": "lower", "primary": True}},
    }


class Project:
    """A git repository with a unit test and a benchmark; the data home is the default one,
    ``benchmark_data/`` inside it."""

    def __init__(self, root: Path) -> None:
        self.path = root / "repo"
        self.hold = root / "hold"
        self.path.mkdir()
        self.hold.mkdir()
        self.home = self.path / "benchmark_data"
        self.env = {k: v for k, v in os.environ.items() if k != "BENCHMARK_HOME"}
        git(self.path, "init", "-q", "-b", "main")
        self.commit(
            "a project",
            **{
                "tests/test_unit.py": UNIT_TEST,
                "bench.yaml": yaml.safe_dump(_bench_document(), sort_keys=False),
                "README.md": "a demo\n",
            },
        )
        self.commit("docs only", **{"README.md": "a demo, better explained\n"})

    def commit(self, message: str, **files: str) -> None:
        for name, text in files.items():
            (self.path / name).parent.mkdir(parents=True, exist_ok=True)
            (self.path / name).write_text(text)
        git(self.path, "add", *files)
        git(self.path, "commit", "-q", "-m", message)

    def command(self, *args: str) -> list[str]:
        quiet = ["-p", "no:cacheprovider", "-p", "no:randomly"]
        return [sys.executable, "-m", "pytest", *quiet, *args]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, cwd=self.path, env=self.env, capture_output=True, text=True, timeout=300
        )

    def bench(self) -> subprocess.CompletedProcess[str]:
        return self.run(*self.command("--bench", "bench.yaml", "--bench-against", "HEAD~1"))

    def plain_pytest(self) -> subprocess.CompletedProcess[str]:
        """The project's own tests, as a developer runs them: ``pytest`` from its root."""
        return self.run(*self.command())

    def agent(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run("benchmark-agent", "--home", str(self.home), *args)

    def worktrees(self) -> list[str]:
        """The paths git records as this repository's worktrees, its own first."""
        listed = git(self.path, "worktree", "list", "--porcelain")
        return [line[len("worktree ") :] for line in listed.splitlines() if line[:9] == "worktree "]

    def checkouts(self) -> list[Path]:
        return sorted((self.home / "against").glob("*/*-*"))


def _start_and_hold(project: Project) -> subprocess.Popen:
    """A ``--bench-against`` session held in its first trial (its stage waiting)."""
    session = subprocess.Popen(
        project.command("--bench", "bench.yaml", "--bench-against", "HEAD~1"),
        cwd=project.path,
        env={**project.env, "HOLD_DIR": str(project.hold)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + WAIT_S
    held = project.hold / "pid"
    while not held.exists() and session.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if not held.exists():
        session.kill()
        session.wait()
        pytest.fail("the session never reached its first trial")
    return session


def _kill(project: Project, session: subprocess.Popen) -> None:
    """SIGKILL the session, then its held stage (a session of its own, so not killed with it)."""
    os.kill(session.pid, signal.SIGKILL)
    session.wait()
    stage = int((project.hold / "pid").read_text())
    try:
        os.killpg(stage, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _assert_collects_only_its_own_tests(project: Project) -> None:
    done = project.plain_pytest()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout and "import file mismatch" not in done.stdout


def _assert_removed(project: Project) -> None:
    assert project.checkouts() == []
    assert project.worktrees() == [str(project.path)]
    assert list((project.home / "against").iterdir()) == []


@pytest.fixture
def killed(tmp_path: Path) -> Project:
    """A project whose ``--bench-against`` session was killed with SIGKILL mid-trial; a live
    session's worktree is checked to be left alone by a verb on the way."""
    project = Project(tmp_path)
    session = _start_and_hold(project)
    try:
        (checkout,) = project.checkouts()
        alive = project.agent("clean")
        assert alive.returncode == 0, alive.stdout + alive.stderr
        assert checkout.is_dir() and str(checkout) in project.worktrees()
    finally:
        _kill(project, session)
    assert checkout.is_dir() and len(project.worktrees()) == 2
    return project


def test_a_plain_pytest_never_collects_the_worktree_of_a_killed_session(killed: Project) -> None:
    assert killed.checkouts()
    _assert_collects_only_its_own_tests(killed)


def test_clean_removes_the_worktree_of_a_killed_session(killed: Project) -> None:
    done = killed.agent("clean")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "worktree folder of" in done.stderr and "session that is gone" in done.stderr
    _assert_removed(killed)
    _assert_collects_only_its_own_tests(killed)


def test_a_later_session_removes_the_worktree_of_a_killed_session(killed: Project) -> None:
    done = killed.bench()
    assert done.returncode == 0, done.stdout + done.stderr
    _assert_removed(killed)
    # the killed session's run was finalized too, and the later one finished
    states = sorted(
        json.loads((run / "index.json").read_text())["state"]
        for run in (killed.home / "runs").iterdir()
    )
    assert states == ["complete", "interrupted"]


# -- hostile: what a swept folder may hold -------------------------------------------------------


def _gone_claim(folder: Path) -> None:
    """Claim ``folder`` for a process that has ended (this one's pid, another start time)."""
    path = recover.claim(folder)
    owner = json.loads(path.read_text())
    path.write_text(json.dumps({**owner, "start_ticks": owner["start_ticks"] + 1}))


def test_a_folder_naming_no_repository_is_still_removed(tmp_path: Path) -> None:
    """A damaged ``repository.json`` (or a repository deleted since): the folder still goes,
    and nothing outside it is touched."""
    home = tmp_path / "home"
    folder = home / "against" / "tok"
    (folder / "abc-123" / "tests").mkdir(parents=True)
    (folder / worktrees.REPOSITORY).write_text("{not json")
    outside = tmp_path / "outside"
    outside.mkdir()
    (folder / "abc-123" / "link").symlink_to(outside)
    _gone_claim(folder)
    assert worktrees.sweep(home) == [folder]
    assert not folder.exists() and outside.is_dir()


def test_a_folder_without_claims_or_with_a_live_owner_is_left_alone(tmp_path: Path) -> None:
    """No claim and no finished run of its session (or a name that is no token), or a live
    owner: the session may still be using its worktree."""
    home = tmp_path / "home"
    running = home / "runs" / "2026-01-02T03-04-05-owners-ab12"
    running.mkdir(parents=True)
    unclaimed = [home / "against" / name for name in ("old", "2026-01-02T03-04-05-ab12")]
    for folder in unclaimed:
        (folder / "abc-123").mkdir(parents=True)
    live = home / "against" / "live"
    recover.claim(live)
    (home / "against" / "a-file").write_text("not a folder")
    assert worktrees.sweep(home) == []
    assert all((folder / "abc-123").is_dir() for folder in unclaimed) and live.is_dir()
    assert (home / worktrees.GUARD).read_text() == worktrees.GUARD_TEXT


def test_an_unclaimed_worktree_of_a_finished_session_is_removed(tmp_path: Path) -> None:
    """A worktree left before claims existed: its repository read from its ``.git`` file, once
    its session's run has finished (here finalized after a kill)."""
    project = Project(tmp_path)
    home = project.home
    folder = home / "against" / "2026-01-02T03-04-05-ab12"
    folder.mkdir(parents=True)
    git(project.path, "worktree", "add", "-q", "--detach", str(folder / "abc-123"), "HEAD~1")
    run = home / "runs" / "2026-01-02T03-04-05-owners-ab12"
    run.mkdir(parents=True)
    (run / "index.json").write_text("{}")
    assert worktrees.sweep(home) == [folder]
    _assert_removed(project)
    _assert_collects_only_its_own_tests(project)


def test_the_guard_is_rewritten_when_it_was_changed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / worktrees.GUARD).write_text("collect_ignore_glob = []\n")
    worktrees.guard(home)
    assert (home / worktrees.GUARD).read_text() == worktrees.GUARD_TEXT
