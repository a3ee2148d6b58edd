"""Counted trials of one block run at once (issue 44, point 3; engine/counted.py).

Real sessions under valgrind's cachegrind (this machine has no hardware PMU): the counted
trials of a block overlap in time, as their recorded ``started``/``ended`` show, while the
records, the per-trial hooks and the order of results are those of one trial at a time; timed
trials never overlap anything. Nothing here bounds a duration: only counts of overlapping
intervals. The machine's CPUs are the process's affinity, at least 2 where these run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
import pytest
from benchhelpers import BenchProject

from pytest_benchmark_agent.engine import counters
from pytest_benchmark_agent.engine.counted import cpus

pytestmark = [
    pytest.mark.skipif(
        counters.backend() is None, reason="no counting backend (.ci/run installs valgrind)"
    ),
    pytest.mark.skipif(cpus() < 2, reason="one CPU: a block's trials run one at a time"),
]

PYTHON = os.path.realpath(sys.executable)
LOOP = f"{PYTHON} -S -c 'import sys; sum(range(int(sys.argv[1])))' {{work}}"
#: Each trial's stage start and the trial's end, as a plugin sees them, in order.
HOOKS = """
def pytest_bench_stage_started(run, stage, trial_id):
    with open("hooks.txt", "a") as f:
        f.write(f"started {trial_id}\\n")

def pytest_bench_trial_finished(trial, run):
    with open("hooks.txt", "a") as f:
        f.write(f"finished {trial.id} {trial.status}\\n")
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> BenchProject:
    found = BenchProject(pytester)
    found.write("conftest.py", HOOKS)
    return found


def bench(treatments: list[str], replicates: int, *, timed: bool = False, **extra: Any) -> dict:
    stages: list[dict[str, Any]] = [
        {"name": "count", "kind": "measure", "cmd": LOOP, "counters": ["instructions"]}
    ]
    metrics: dict[str, Any] = {"instructions": {"primary": True}}
    if timed:  # wall time beside the counts, measured by a stage of its own
        stages.append(
            {
                "name": "time",
                "kind": "measure",
                "cmd": LOOP,
                "metrics_from": {"stdout": True, "fields": ["wall_s"]},
            }
        )
        metrics["wall_s"] = {}
    return {
        "name": "batched",
        "params": {"work": treatments[0]},
        "treatment_variable": "work",
        "treatments": treatments,
        "replicates": replicates,
        "stages": stages,
        "metrics": metrics,
        **extra,
    }


def interval(trial: dict) -> tuple[datetime, datetime]:
    return datetime.fromisoformat(trial["started"]), datetime.fromisoformat(trial["ended"])


def overlap(a: dict, b: dict) -> bool:
    (start_a, end_a), (start_b, end_b) = interval(a), interval(b)
    return start_a < end_b and start_b < end_a


def in_plan_order(trials: list[dict]) -> bool:
    return [t["id"] for t in trials] == [
        t["id"] for t in sorted(trials, key=lambda t: (t["replicate"], t["position"]))
    ]


def hook_lines(project: BenchProject) -> list[str]:
    return (project.path / "hooks.txt").read_text().splitlines()


def test_a_blocks_counted_trials_run_at_once_and_are_published_one_by_one(project):
    project.bench(bench(["20000", "20200"], replicates=3))
    result = project.run("bench.yaml")
    assert result.ret == 0, result.stdout.str()
    trials = project.results()["trials"]
    assert [t["status"] for t in trials] == ["passed"] * 6
    assert in_plan_order(trials)
    blocks = [[t for t in trials if t["replicate"] == k] for k in range(3)]
    assert sum(overlap(*block) for block in blocks) == 3  # each block's two ran side by side
    assert sum(overlap(a, b) for a in blocks[0] for b in blocks[1] + blocks[2]) == 0
    expected = []
    for trial in trials:  # the hooks as one trial at a time publishes them
        expected += [f"started {trial['id']}", f"finished {trial['id']} passed"]
    assert hook_lines(project) == expected
    assert all(t["metrics"]["instructions"] > 0 for t in trials)
    report = (project.runs()[0] / "report.md").read_text()
    assert "Measurement windows: 0 overlap(s) on a host" in report  # counted beside counted
    assert "Measurements overlapped" not in report


def test_timed_trials_run_alone_beside_a_counted_batch(project):
    """A block of a counted stage and a timed one (wall time beside the counts): the counted
    trials of the block overlap each other, a timed trial overlaps nothing."""
    project.bench(bench(["20000", "20200"], replicates=2, timed=True))
    result = project.run("bench.yaml")
    assert result.ret == 0, result.stdout.str()
    trials = project.results()["trials"]
    assert [t["status"] for t in trials] == ["passed"] * 8
    assert in_plan_order(trials)
    timed = [t for t in trials if t["stage"] == "time"]
    counted = [t for t in trials if t["stage"] == "count"]
    assert sum(overlap(a, b) for a in timed for b in trials if a is not b) == 0
    pairs = [[t for t in counted if t["replicate"] == k] for k in range(2)]
    assert sum(overlap(*pair) for pair in pairs) == 2
    assert all("wall_s" in t["metrics"] for t in timed)
    assert all("wall_s" not in t["metrics"] for t in counted)  # distorted by the backend


def test_a_counted_stage_that_reports_a_field_of_its_own_runs_alone(project):
    """Hostile: ``counters:`` and a field the stage prints itself (which may be a time): not
    every metric is a count, so its trials run one at a time."""
    document = bench(["20000", "20200"], replicates=2)
    stage = document["stages"][0]
    stage["cmd"] += " && echo extra=1"
    stage["metrics_from"] = {"stdout": True, "fields": ["instructions", "extra"]}
    document["metrics"]["extra"] = {}
    project.bench(document)
    result = project.run("bench.yaml")
    assert result.ret == 0, result.stdout.str()
    trials = project.results()["trials"]
    assert [t["status"] for t in trials] == ["passed"] * 4
    assert sum(overlap(a, b) for a in trials for b in trials if a is not b) == 0


def test_a_failing_trial_of_a_batch_fails_alone_and_the_budget_still_holds(project):
    """Hostile: one treatment's stage fails inside a batch, and ``budget.trials`` ends the run
    inside a block; the records are those of one trial at a time: the failure in its place
    with its reason, the others passed, the trials past the budget not run."""
    project.bench(bench(["20000", "bad"], replicates=3, budget={"trials": 3}))
    result = project.run("bench.yaml")
    assert result.ret == 1, result.stdout.str()
    trials = project.results()["trials"]
    ran = [t for t in trials if t["status"] != "not_run"]
    assert len(ran) == 3 and in_plan_order(ran)
    assert {t["replicate"] for t in ran} == {0, 1}
    for trial in ran:
        status = "failed" if trial["treatment"] == "bad" else "passed"
        assert trial["status"] == status, trial
        if status == "failed":
            assert "exited with code 1" in trial["reason"]
            assert "ValueError" in Path(trial["logs"], "stderr.txt").read_text()
    first = [t for t in ran if t["replicate"] == 0]
    assert len(first) == 2 and overlap(*first)
    assert len(trials) - len(ran) == 3  # the budget's rest, recorded as not run
    finished = [line for line in hook_lines(project) if line.startswith("finished")]
    assert finished == [f"finished {t['id']} {t['status']}" for t in ran]


def test_ctrl_c_during_a_batch_stops_every_stage_and_records_the_trial_in_flight(project):
    """Hostile: SIGINT while a block's counted trials run at once. Every stage of the batch is
    stopped (no process of theirs is left), the item in flight is recorded ``interrupted`` and
    the rest ``not_run``, as when one trial at a time is interrupted."""
    marker = "300000017"  # a loop far too long to end by itself; it names the stages' processes
    project.bench(bench([marker, f"0{marker}"], replicates=2))
    session = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--bench", "bench.yaml", "-p", "no:cacheprovider"]
        + ["-p", "no:randomly"],
        cwd=project.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        hooks = project.path / "hooks.txt"
        while not (hooks.exists() and "started" in hooks.read_text()):
            assert session.poll() is None, session.communicate()[0]
            time.sleep(0.2)
        while len(stages_of(marker)) < 2:  # both trials of the block are running
            assert session.poll() is None, session.communicate()[0]
            time.sleep(0.2)
        session.send_signal(signal.SIGINT)
        output = session.communicate(timeout=300)[0]
    finally:
        session.kill()
    assert session.returncode == 2, output
    assert stages_of(marker) == []
    trials = project.results()["trials"]
    assert [t["status"] for t in trials] == ["interrupted", "not_run", "not_run", "not_run"]
    assert trials[0]["reason"] == "the session was interrupted during this trial"


#: Ctrl-C while the batch is still starting: the first trial's stage runs (it has reported its
#: progress), the second trial is not submitted yet (where a count run under two busy loops once
#: sent its SIGINT).
CTRL_C_WHILE_STARTING = """
import time

import pytest_benchmark_agent.engine.counted as counted

_real, _made = counted._reporter, []


def _reporter(key, seen, cancel):
    _made.append(key)
    if len(_made) == 2:
        while not seen:
            time.sleep(0.05)
        raise KeyboardInterrupt
    return _real(key, seen, cancel)


counted._reporter = _reporter
"""


def test_ctrl_c_while_a_batch_starts_stops_its_stage_and_records_the_trial_in_flight(project):
    """Hostile: the interrupt reaches the session between two trials' submits. The first
    trial's stage (far too long to end by itself) is stopped and its trial recorded
    ``interrupted``; the one never submitted is ``not_run``. Before, the batch waited for the
    first stage to end by itself and recorded every trial ``not_run``."""
    marker = "300000019"
    project.write("conftest.py", HOOKS + CTRL_C_WHILE_STARTING)
    project.bench(bench([marker, f"0{marker}"], replicates=2))
    session = subprocess.run(
        [sys.executable, "-m", "pytest", "--bench", "bench.yaml", "-p", "no:cacheprovider"]
        + ["-p", "no:randomly"],
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert session.returncode == 2, session.stdout + session.stderr
    assert stages_of(marker) == []
    trials = project.results()["trials"]
    assert [t["status"] for t in trials] == ["interrupted", "not_run", "not_run", "not_run"]
    assert trials[0]["reason"] == "the session was interrupted during this trial"


def stages_of(marker: str) -> list[psutil.Process]:
    """The live processes whose command line holds ``marker``."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["status"] != psutil.STATUS_ZOMBIE and any(marker in a for a in cmdline):
            found.append(proc)
    return found
