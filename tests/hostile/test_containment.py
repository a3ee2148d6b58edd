"""Class 4 of issue 19: every process a stage starts ends with its trial, and with its session.

Real sessions, real ``setsid`` and double-forked children, real cgroups (where this machine lets
a child cgroup be made) and a real ``kill -9`` of pytest. Each stage's stray processes carry a
marker in their command line (an odd ``sleep`` length), so the test finds exactly them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
from benchhelpers import BenchProject
from hostilehelpers import assert_clean_exit, tiny_bench

from pytest_benchmark_agent.engine.isolation import Containment
from pytest_benchmark_agent.guards.cgroup import CgroupMemory, child_cgroup_unavailable
from pytest_benchmark_agent.records.recover import start_ticks

NO_CGROUP = child_cgroup_unavailable()
needs_cgroup = pytest.mark.skipif(NO_CGROUP is not None, reason=f"no child cgroup: {NO_CGROUP}")
#: How long a stray process may take to be gone after its trial or session ended (a bound on
#: waiting, never a measured duration).
GONE_WITHIN_S = 60.0


@pytest.fixture
def marker() -> str:
    """A ``sleep`` argument no other process uses: ``3000.<random digits>``."""
    return f"3000.{uuid.uuid4().int % 10**9:09d}"


def strays(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if any(marker in part for part in cmdline) and process.pid != os.getpid():
            found.append(process)
    return found


def wait_gone(marker: str) -> list[psutil.Process]:
    """The marked processes still alive once they had time to go (killed by the test then)."""
    deadline = time.monotonic() + GONE_WITHIN_S
    while (left := strays(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for process in left:
        process.kill()
    return left


@pytest.fixture
def no_strays(marker: str):
    """Whatever the test's outcome, no marked process outlives it."""
    yield
    for process in strays(marker):
        process.kill()


def escaping(marker: str, then: str = "") -> str:
    """A measure command whose children leave its process group two ways: ``setsid`` and a
    double fork (its parent exits, so it is reparented)."""
    return f"setsid sleep {marker} & (sleep {marker} &) ; {then}echo score=1; echo mode={{mode}}"


def bench_with(project: BenchProject, command: str) -> None:
    document = tiny_bench()
    document["stages"][1]["cmd"] = command
    project.bench(document)


def expected_kind() -> str:
    return "cgroup" if NO_CGROUP is None else "subreaper"


@pytest.mark.usefixtures("no_strays")
def test_setsid_and_double_forked_children_end_with_their_trial(
    project: BenchProject, marker: str
) -> None:
    bench_with(project, escaping(marker))
    result = project.run()
    assert_clean_exit(result, {0})
    left = wait_gone(marker)
    assert not left, f"a stage's children outlived their trial: {[p.pid for p in left]}"
    trials = project.results()["trials"]
    assert {t["containment"] for t in trials} == {expected_kind()}


@pytest.mark.usefixtures("no_strays")
def test_the_subreaper_contains_stages_where_no_cgroup_is_used(
    project: BenchProject, marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``BENCH_CONTAINMENT=subreaper`` (a session in its own process: the flag is for life)."""
    monkeypatch.setenv("BENCH_CONTAINMENT", "subreaper")
    bench_with(project, escaping(marker))
    result = project.run(subprocess=True)
    assert_clean_exit(result, {0})
    assert not wait_gone(marker)
    assert {t["containment"] for t in project.results()["trials"]} == {"subreaper"}


@pytest.mark.usefixtures("no_strays")
@pytest.mark.parametrize(
    "kind",
    [pytest.param("cgroup", marks=needs_cgroup), "subreaper"],
)
def test_kill_9_of_pytest_takes_the_running_stage_down(
    project: BenchProject, marker: str, kind: str
) -> None:
    started = project.path / "started"
    bench_with(project, escaping(marker, then=f"touch {started}; sleep {marker}; "))
    session = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--bench", "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=project.path,
        env={**os.environ, "BENCH_CONTAINMENT": kind},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while not started.exists() and session.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists(), "the stage never started"
        assert len(strays(marker)) >= 3  # the setsid child, the double-forked one, the stage's
        os.kill(session.pid, signal.SIGKILL)
    finally:
        session.kill()
        session.wait()
    left = wait_gone(marker)
    assert not left, f"the stage outlived its SIGKILLed session: {[p.pid for p in left]}"
    own = CgroupMemory.of_self()
    if own is not None:
        deadline = time.monotonic() + GONE_WITHIN_S
        while (kept := list(own.path.glob(f"pba-session-{session.pid}-*"))) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.1)
        assert not kept, "its session cgroup was left behind"


@needs_cgroup
def test_a_later_session_sweeps_the_cgroup_of_a_session_that_is_gone(marker: str) -> None:
    """A session cgroup whose owner (pid and start time) is gone is emptied and removed by
    the next session, even where that session's watchdog died with it.

    The owner is a process of its own, alive until the stray has joined its cgroup: a session
    of another xdist worker sweeps the same parent cgroup, and must not find the folder gone
    before the stray is in it. Whichever session sweeps it, the stray is killed and the folder
    removed."""
    own = CgroupMemory.of_self()
    assert own is not None
    owner = subprocess.Popen(["sleep", marker])
    folder = own.path / f"pba-session-{owner.pid}-{start_ticks(owner.pid)}"
    stage = folder / "stage-1"
    stage.mkdir(parents=True)
    stray = subprocess.Popen(
        ["sh", "-c", f'echo $$ > "{stage}/cgroup.procs"; exec sleep {marker}'],
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + GONE_WITHIN_S
        while not (stage / "cgroup.procs").read_text().split() and time.monotonic() < deadline:
            time.sleep(0.05)  # until it joined its cgroup (its command line shows earlier)
        owner.kill()
        owner.wait()  # the owner is gone: any session sweeps the folder from now on
        containment = Containment()
        scope = containment.stage()
        scope.end()
        containment.close()
        assert stray.wait(timeout=GONE_WITHIN_S) == -signal.SIGKILL
        while folder.exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # another worker's session may be removing it as this one returns
        assert not folder.exists()
    finally:
        for process in (owner, stray):
            process.kill()
            process.wait()
        for child in (stage, folder):
            with contextlib.suppress(FileNotFoundError):  # a session of another worker swept it
                child.rmdir()


def test_a_stage_run_without_a_session_says_its_group_alone_held_it(tmp_path: Path) -> None:
    from pytest_benchmark_agent.engine.invocation import StageInvocation
    from pytest_benchmark_agent.engine.stages import run_stage

    result = run_stage(
        StageInvocation("m", "true", cwd=tmp_path, env=dict(os.environ), log_dir=tmp_path / "l")
    )
    assert result.as_record()["containment"] == "process-group"


@needs_cgroup
def test_an_emptied_stage_cgroup_is_reused_and_removed_at_the_end(
    marker: str, no_strays, tmp_path: Path
) -> None:
    """A stage's cgroup, emptied when the stage ends (a stray killed), serves the next stage;
    the session's close removes it and the session's folder."""
    from pytest_benchmark_agent.engine.invocation import StageInvocation
    from pytest_benchmark_agent.engine.stages import run_stage

    containment = Containment()
    try:
        first = containment.stage()
        assert first.cgroup is not None
        stray = subprocess.Popen(
            ["sh", "-c", f'echo $$ > "{first.join}"; exec sleep {marker}'],
            start_new_session=True,
        )
        deadline = time.monotonic() + GONE_WITHIN_S
        while not (first.cgroup.path / "cgroup.procs").read_text().split():
            assert time.monotonic() < deadline, "the stray never joined the stage's cgroup"
            time.sleep(0.05)
        first.end()
        assert stray.wait(timeout=GONE_WITHIN_S) == -signal.SIGKILL
        second = containment.stage()
        assert second.cgroup is not None and second.cgroup.path == first.cgroup.path
        second.end()
        session_folder = first.cgroup.path.parent
        result = run_stage(
            StageInvocation(
                "m",
                "true",
                cwd=tmp_path,
                env=dict(os.environ),
                log_dir=tmp_path / "log",
                containment=containment,
            )
        )
        assert result.as_record()["containment"] == "cgroup"
        stage_folders = [p.name for p in session_folder.iterdir() if p.is_dir()]
        assert stage_folders == [first.cgroup.path.name]
    finally:
        containment.close()
    assert not session_folder.exists(), "the session's cgroup folder outlived its close"
