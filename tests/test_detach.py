"""Detached runs as real process trees: they outlive a killed parent, a killed stage ends them
``.failed`` with the samples kept, a vanished process reads as died; and the heartbeat plugin's
progress lines reach the terminal and ``progress.log``."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from benchhelpers import BenchProject, simple_bench

from pytest_benchmark_agent.cli.main import main
from pytest_benchmark_agent.engine.detach import COMPLETE, FAILED, PID_FILE, process_alive
from pytest_benchmark_agent.records.record import load_run
from pytest_benchmark_agent.report.progress import HEARTBEAT, PROGRESS_LOG

QUIET = {
    **os.environ,
    "PYTEST_ADDOPTS": "-p no:hypothesispytest -p no:benchmark -p no:cacheprovider",
}
#: Upper bound on any wait below: a hung test fails instead of blocking the suite.
WAIT_S = 60


def agent(project: BenchProject, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["benchmark-agent", "--home", str(project.home), *args],
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=120,
        env=QUIET,
    )


def status(project: BenchProject, *args: str) -> tuple[int, str]:
    """``benchmark-agent status`` (in this process: it only reads the run folder)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--home", str(project.home), "status", *args])
    return code, out.getvalue()


def wait_for(predicate: Callable[[], object], unless_failed: BenchProject | None = None) -> object:
    """Poll ``predicate``; stop at once if a run of ``unless_failed`` ended ``.failed``."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        for run_dir in unless_failed.runs() if unless_failed else []:
            if (run_dir / FAILED).is_file():
                raise AssertionError(f"the run failed: {(run_dir / FAILED).read_text()}")
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {predicate}")


def bench_with_measure(cmd: str) -> dict:
    """The simple benchmark with its measure stage running ``cmd`` (which sees ``{mode}``)."""
    document = simple_bench()
    document["stages"][1].update(cmd=f": {{mode}}; {cmd}", timeout_s=60)
    return document


@pytest.fixture
def reaper(project: BenchProject) -> Iterator[list[int]]:
    """At teardown, kills the process groups listed, and every process of the project's runs:
    each supervisor, the pytest session naming its run id, and all their descendants."""
    groups: list[int] = []
    yield groups
    found: list[psutil.Process] = []
    for run_dir in project.runs():
        with contextlib.suppress(OSError, ValueError, psutil.Error):
            found.append(psutil.Process(int((run_dir / PID_FILE).read_text())))
        for process in psutil.process_iter(["cmdline"]):
            if run_dir.name in " ".join(process.info["cmdline"] or []):
                found.append(process)
    for process in list(found):
        with contextlib.suppress(psutil.Error):
            found += process.children(recursive=True)
    for process in found:
        with contextlib.suppress(psutil.Error):
            process.kill()
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def only_run(project: BenchProject) -> Path:
    runs = project.runs()
    assert len(runs) == 1
    return runs[0]


def test_detached_run_outlives_its_killed_parent(project: BenchProject, reaper) -> None:
    project.bench(bench_with_measure("while [ ! -e go ]; do sleep 0.05; done; echo score=1"))
    parent = subprocess.Popen(
        [
            "sh",
            "-c",
            f"benchmark-agent --home {project.home} run --detach bench.yaml; exec sleep 60",
        ],
        cwd=project.path,
        env=QUIET,
        start_new_session=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    reaper.append(parent.pid)
    assert "detached (pid" in parent.stdout.readline()  # benchmark-agent returned; sh sleeps
    run_dir = only_run(project)
    supervisor = int((run_dir / PID_FILE).read_text())
    assert os.getpgid(supervisor) != parent.pid  # its own session, not the parent's group

    os.killpg(parent.pid, signal.SIGKILL)
    parent.wait(timeout=10)
    assert process_alive(supervisor, time.time())
    assert not (run_dir / COMPLETE).exists()  # every trial still waits for "go"

    (project.path / "go").touch()
    wait_for(lambda: (run_dir / COMPLETE).is_file(), project)
    code, line = status(project, run_dir.name)
    assert code == 0 and line.startswith(f"{run_dir.name}: complete (4 trials recorded), passed 4")
    beat = json.loads((run_dir / HEARTBEAT).read_text())
    assert (beat["trials_done"], beat["trials_total"], beat["state"]) == (4, 4, "complete")
    assert "4 passed" in (run_dir / "session.log").read_text()
    wait_for(lambda: not process_alive(supervisor, time.time()))


COUNTING_STAGE = (
    "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; "
    "if [ $n -eq 2 ]; then echo $$ > stage.pid; sleep 30; fi; echo score=$n"
)


def test_killed_stage_ends_failed_with_the_samples_kept(project: BenchProject, reaper) -> None:
    project.bench(bench_with_measure(COUNTING_STAGE))
    started = agent(project, "run", "--detach", "bench.yaml")
    assert started.returncode == 0, started.stderr
    stage_pid_file = project.path / "stage.pid"
    wait_for(lambda: stage_pid_file.is_file() and stage_pid_file.read_text().strip(), project)
    stage = int(stage_pid_file.read_text())
    reaper.append(stage)
    run_dir = only_run(project)
    # The heartbeat may lag a trial's end by up to a second (heartbeat.BEAT_INTERVAL_S).
    wait_for(lambda: status(project)[1].startswith(f"{run_dir.name}: running (1 of 4 trials done)"))

    os.kill(stage, signal.SIGKILL)
    wait_for(lambda: (run_dir / FAILED).is_file())
    reason = (run_dir / FAILED).read_text().splitlines()[0]
    assert reason.startswith(
        "1 of 4 trial(s) did not pass: measure[mode=b-rep0] failed: "
        "stage 'measure' exited with code"
    )
    code, line = status(project)
    assert code == 1 and line.startswith(f"{run_dir.name}: failed: 1 of 4 trial(s) did not pass")
    trials = load_run(run_dir).trials
    assert [(t.id, t.status, t.metrics.get("score")) for t in trials] == [
        ("measure[mode=a-rep0]", "passed", 1.0),
        ("measure[mode=b-rep0]", "failed", None),
        ("measure[mode=b-rep1]", "passed", 3.0),  # the second block runs B A
        ("measure[mode=a-rep1]", "passed", 4.0),
    ]


def test_status_of_a_run_whose_processes_vanished_finalizes_it_interrupted(
    project: BenchProject, reaper
) -> None:
    """Every verb finalizes an ownerless run before it reads (records/recover.py), so
    ``status`` itself finds the killed run and shows it ``interrupted``. (It said ``died``
    while the killed pytest was a zombie not yet reaped, which the claim check took for alive,
    and ``interrupted`` once it was reaped: a race. A zombie counts as gone now.)"""
    project.bench(bench_with_measure("echo $$ > stage.pid; sleep 30; echo score=1"))
    assert agent(project, "run", "--detach", "bench.yaml").returncode == 0
    stage_pid_file = project.path / "stage.pid"
    wait_for(lambda: stage_pid_file.is_file() and stage_pid_file.read_text().strip(), project)
    reaper.append(int(stage_pid_file.read_text()))
    run_dir = only_run(project)
    supervisor = int((run_dir / PID_FILE).read_text())
    pytest_pid = json.loads((run_dir / HEARTBEAT).read_text())["pid"]

    os.killpg(supervisor, signal.SIGKILL)  # the supervisor first: it would write .failed
    os.killpg(pytest_pid, signal.SIGKILL)
    os.killpg(int(stage_pid_file.read_text()), signal.SIGKILL)
    for pid in (supervisor, pytest_pid):
        wait_for(lambda pid=pid: not process_alive(pid, time.time()))
    code, line = status(project, run_dir.name[:24])
    assert code == 1
    assert line.startswith(f"{run_dir.name}: interrupted ("), line
    assert "not_run" in line and "tag UNRELIABLE" in line
    assert (
        "finalized as interrupted by benchmark-agent status"
        in (run_dir / "results.yaml").read_text()
    )
    assert not (run_dir / FAILED).exists() and not (run_dir / COMPLETE).exists()


def test_gate_error_of_a_detached_run_is_a_failed_marker_with_the_reason(
    project: BenchProject, reaper
) -> None:
    project.bench(simple_bench(treatment_variable="nope"))
    assert agent(project, "run", "--detach", "bench.yaml").returncode == 0
    run_dir = only_run(project)
    wait_for(lambda: (run_dir / FAILED).is_file())
    marker = (run_dir / FAILED).read_text()
    assert marker.startswith(
        "pytest exited with code 2 before the run started (a configuration or fairness error"
    )
    assert "'nope' is not a declared param" in marker
    code, line = status(project)
    assert code == 1 and line.startswith(f"{run_dir.name}: failed: pytest exited")


def test_detach_takes_one_file(project: BenchProject) -> None:
    project.bench(simple_bench())
    project.bench(simple_bench(name="other"), name="bench_other.yaml")
    result = agent(project, "run", "bench.yaml", "bench_other.yaml", "--detach")
    assert result.returncode != 0 and "give exactly one benchmark file" in result.stderr
    assert not project.home.exists()


PROGRESS_CONFTEST = """
import psutil
import pytest

CONFIG = []

def pytest_configure(config):
    CONFIG.append(config)

@pytest.hookimpl(trylast=True)
def pytest_bench_trial_finished(trial, run):
    # What the engine does for a stage running over a minute, here after every trial.
    CONFIG[0].hook.pytest_bench_stage_progress(
        run=run, stage="measure", trial_id=trial.id, elapsed_s=61.5, peak_rss_mb=12.5)
"""


def test_stage_progress_reaches_the_terminal_and_progress_log(project: BenchProject) -> None:
    project.bench(simple_bench())
    project.write("conftest.py", PROGRESS_CONFTEST)
    result = project.run()
    assert result.ret == 0
    lines = [line for line in result.outlines if line.startswith("[benchmark] simple:")]
    assert lines[0].startswith(  # then the ETA from the pace of the finished trial
        "[benchmark] simple: stage measure (measure[mode=a-rep0]) running for "
        "1m01s, peak 12.5 MB, trials 1/4, ETA "
    )
    assert len(lines) == 4
    logged = (project.runs()[0] / PROGRESS_LOG).read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in logged] == lines
    beat = json.loads((project.runs()[0] / HEARTBEAT).read_text())
    assert beat["state"] == "complete" and beat["peak_rss_mb"] >= 12.5


#: Treatment b's trial waits (up to WAIT_S) until the heartbeat counts trial a as done, then
#: prints what it saw: with beats held back after a short trial, only the flusher writes it.
WATCH_HEARTBEAT = (
    'if [ {mode} = b ]; then python -c "import json, sys, time\n'
    "path = sys.argv[1]\nend = time.monotonic() + " + str(WAIT_S) + "\n"
    "while json.load(open(path))['trials_done'] < 1 and time.monotonic() < end:\n"
    "    time.sleep(0.05)\nprint('seen=' + str(json.load(open(path))['trials_done']))\" "
    "{out}/../../../heartbeat.json; else echo seen=0; fi"
)


def test_a_held_back_heartbeat_is_written_while_the_next_stage_runs(project: BenchProject) -> None:
    document = simple_bench(
        replicates=1,
        stages=[
            {
                "name": "measure",
                "kind": "measure",
                "cmd": WATCH_HEARTBEAT,
                "metrics_from": {"stdout": True, "fields": ["seen"]},
            }
        ],
        metrics={"seen": {"direction": "higher", "primary": True}},
    )
    project.bench(document)
    assert project.run().ret == 0
    trials = {trial.treatment: trial for trial in load_run(project.runs()[-1]).trials}
    assert trials["b"].metrics["seen"] == 1
    beat = json.loads((project.runs()[0] / HEARTBEAT).read_text())
    assert (beat["state"], beat["trials_done"]) == ("complete", 2)
