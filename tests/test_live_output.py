"""What a person sees while a session runs (issue 22, part A): a stage's own lines with ``-s``,
its output files written as it runs, the live progress line on a terminal (a real pty) that
leaves pytest's dot line whole, the off-terminal line's interval, and a failed prep's output
shown once. Real sessions throughout; no test bounds a duration: a stage waits for a file the
test creates once it has seen what it looks for (or for ``WAIT_S``, so nothing hangs)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from benchhelpers import BenchProject, simple_bench

import pytest_benchmark_agent.stats.analysis  # noqa: F401  (numpy, loaded before any pytester)
from pytest_benchmark_agent.report.progress import HEARTBEAT, PROGRESS_LOG

#: Upper bound on any wait: a missing feature fails the test instead of hanging it.
WAIT_S = 90


def one_trial(**overrides) -> dict:
    """simple_bench as one configuration run once: its trial is ``measure[default-rep0]``."""
    document = simple_bench(replicates=1, **overrides)
    del document["treatment_variable"], document["treatments"]
    document["hypothesis"] = "mode a scores 6"
    return document


def waiting_bench(go: Path) -> dict:
    """One trial whose stage prints a line, then waits for the file ``go``."""
    wait = f"i=0; while [ ! -e {go} ] && [ $i -lt {WAIT_S * 10} ]; do sleep 0.1; i=$((i+1)); done"
    return one_trial(
        params={"mode": "a"},
        stages=[
            {
                "name": "measure",
                "kind": "measure",
                "cmd": f"echo first line {{mode}}; echo to stderr >&2; {wait}; echo score=1",
                "metrics_from": {"stdout": True, "fields": ["score"]},
            }
        ],
    )


def test_dash_s_streams_a_stages_lines_prefixed_with_the_trial_id(project: BenchProject) -> None:
    project.bench(one_trial())
    result = project.run("-s", subprocess=True)
    assert result.ret == 0
    out = result.stdout.str()
    assert "[measure[default-rep0]] score=6" in out
    assert "[measure[default-rep0]] mode=a" in out
    # Without -s the stage's lines stay in its files (pytest's capture is not bypassed).
    quiet = project.run(subprocess=True)
    assert "[measure[default-rep0]]" not in quiet.stdout.str()


def _read_until(fd: int, out: bytearray, wanted: bytes) -> bool:
    """Read the pty into ``out`` until ``wanted`` appears (True) or it closes or WAIT_S ends."""
    end = time.monotonic() + WAIT_S
    while wanted not in out and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the session ended: the pty's other side is closed
                return wanted in out
            if not chunk:
                return wanted in out
            out += chunk
    return wanted in out


def test_a_running_stage_is_live_on_a_terminal_on_disk_and_in_the_heartbeat(
    project: BenchProject,
) -> None:
    go = project.path / "go"
    project.bench(waiting_bench(go))
    env = {**os.environ, "COLUMNS": "200", "PYTEST_ADDOPTS": "-p no:cacheprovider"}
    pid, fd = pty.fork()
    if pid == 0:  # the child: a real session on a terminal
        os.chdir(project.path)
        os.execvpe(sys.executable, [sys.executable, "-m", "pytest", "--bench", "bench.yaml"], env)
    out = bytearray()
    try:
        # The live line: drawn after the file's name, in place (cursor saved and restored).
        assert _read_until(fd, out, b"trial 1/1 measure[default-rep0]"), out.decode()
        runs = project.home / "runs"
        (run,) = runs.iterdir()
        stdout = next(run.glob("trials/*/stdout.txt"))
        assert "first line a" in stdout.read_text()  # on disk while the stage runs
        beat = json.loads((run / HEARTBEAT).read_text())
        assert beat["state"] == "running" and beat["trial_id"] == "measure[default-rep0]"
        assert beat["stage"] == "measure" and beat["stage_elapsed_s"] is not None
    finally:
        go.write_text("")
        _read_until(fd, out, b"benchmark summary")
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, out.decode()
    line = out[out.index(b"bench.yaml ") : out.index(b"[100%]")]
    # The dot line stays one line: the live text is erased (cursor restored, line cleared)
    # before pytest's dot, and no newline breaks it.
    assert b"\n" not in line and b"\x1b7" in line
    assert re.search(rb"\x1b8\x1b\[K(\x1b\[[0-9;]*m)?\.", line), line


PROGRESS_AT = """
import pytest

CONFIG = []

def pytest_configure(config):
    CONFIG.append(config)

@pytest.hookimpl(trylast=True)
def pytest_bench_stage_started(run, stage, trial_id):
    # What the engine does about once a second for a long stage, here at chosen elapsed times.
    for elapsed in (1.0, 10.0, 29.0, 31.0, 45.0, 61.0, 125.0) if trial_id else ():
        CONFIG[0].hook.pytest_bench_stage_progress(
            run=run, stage=stage, trial_id=trial_id, elapsed_s=elapsed, peak_rss_mb=3.0)
"""


def test_off_a_terminal_a_stage_prints_a_line_each_interval(project: BenchProject) -> None:
    project.bench(one_trial())
    project.write("conftest.py", PROGRESS_AT)
    result = project.run()  # default interval: 30 s
    assert result.ret == 0
    assert "\x1b" not in result.stdout.str()  # no cursor codes off a terminal
    lines = [line for line in result.outlines if line.startswith("[benchmark] simple:")]
    assert [line.split("running for ")[1].split(",")[0] for line in lines] == [
        "31s",
        "1m01s",
        "2m05s",
    ]
    logged = (project.runs()[0] / PROGRESS_LOG).read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in logged] == lines
    # The interval is an option (and an ini option): every 60 s here.
    project.write("pytest.ini", "[pytest]\nbench_progress_every = 60\n")
    again = project.run()
    shown = [line for line in again.outlines if line.startswith("[benchmark] simple:")]
    assert [line.split("running for ")[1].split(",")[0] for line in shown] == ["1m01s", "2m05s"]


def test_a_dumb_terminal_gets_no_cursor_codes_but_the_interval_lines(
    project: BenchProject,
) -> None:
    """``TERM=dumb`` (an editor's shell, a CI log viewer on a pty) takes no escape codes: the
    progress is printed as off a terminal, a line each interval, and nothing is drawn in place."""
    project.bench(one_trial())
    project.write("conftest.py", PROGRESS_AT)
    env = {**os.environ, "TERM": "dumb", "COLUMNS": "200", "PYTEST_ADDOPTS": "-p no:cacheprovider"}
    pid, fd = pty.fork()
    if pid == 0:  # the child: a real session on a terminal that says it is dumb
        os.chdir(project.path)
        os.execvpe(sys.executable, [sys.executable, "-m", "pytest", "--bench", "bench.yaml"], env)
    out = bytearray()
    try:
        _read_until(fd, out, b"no such text: read until the session closes the pty")
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, out.decode()
    assert b"running for 31s" in out and b"running for 2m05s" in out, out.decode()
    assert b"\x1b" not in out, out.decode()


def test_a_failed_prep_shows_its_output_once(
    project: BenchProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On CI (``CI`` or ``BUILD_NUMBER`` set) pytest's short summary repeats each failure's whole
    # message; the count below is of the failure sections, as a terminal shows them.
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BUILD_NUMBER", raising=False)
    document = simple_bench(replicates=2)
    document["stages"][0]["cmd"] = "echo the prep broke here >&2; exit 3"
    project.bench(document)
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert out.count("stderr (last lines):\nthe prep broke here") == 1
    # The other dependents name the trial that shows it.
    assert out.count("(its output is shown once, under measure[mode=") == 3
    record = project.results()
    assert [t["status"] for t in record["trials"]] == ["failed"] * 4


def test_a_detached_run_logs_its_stages_output(project: BenchProject) -> None:
    project.bench(one_trial())
    started = subprocess.run(
        ["benchmark-agent", "--home", str(project.home), "run", "bench.yaml", "--detach"],
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTEST_ADDOPTS": "-p no:cacheprovider -p no:randomly"},
    )
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.split(":")[0]
    folder = project.home / "runs" / run_id
    end = time.monotonic() + WAIT_S
    while not (folder / ".complete").exists() and not (folder / ".failed").exists():
        assert time.monotonic() < end, "the detached run did not end"
        time.sleep(0.2)
    assert "[measure[default-rep0]] score=6" in (folder / "session.log").read_text()


def test_a_stage_still_running_writes_its_output_as_it_comes(tmp_path: Path) -> None:
    from pytest_benchmark_agent.engine.invocation import StageInvocation
    from pytest_benchmark_agent.engine.stages import run_stage

    go = tmp_path / "go"
    seen: list[str] = []

    def progress(elapsed_s: float, peak_rss_mb: float) -> None:
        log = tmp_path / "logs" / "stdout.txt"
        if log.exists() and "waiting" in log.read_text():
            seen.append(log.read_text())
            go.write_text("")

    result = run_stage(
        StageInvocation(
            "s",
            f"echo waiting; i=0; while [ ! -e {go} ] && [ $i -lt {WAIT_S * 10} ]; do sleep 0.1; "
            "i=$((i+1)); done; echo done",
            cwd=tmp_path,
            env=dict(os.environ),
            log_dir=tmp_path / "logs",
            progress=progress,
            progress_every_s=0.2,
        )
    )
    assert result.exit_code == 0 and seen and seen[0] == "waiting\n"
    assert result.stdout() == "waiting\ndone\n"
