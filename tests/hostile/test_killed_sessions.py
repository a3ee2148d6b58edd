"""Class 8 of issue 19: a run whose session was killed is finalized ``interrupted``, never left
``running``.

A real ``pytest --bench`` is started, its first trial finishes, the second is held in a stage
until the test kills the session with SIGKILL; then a verb or a later session must find the
ownerless run and finish it: state ``interrupted``, a report with What Went Wrong, an index
entry, ``results_index.md`` listing it, every journalled trial kept, and ``compare`` refusing
it as unfinished.
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
from benchhelpers import BenchProject
from hostilehelpers import agent, assert_clean_exit, assert_trials_on_disk, tiny_bench

from pytest_benchmark_agent.engine import recovery
from pytest_benchmark_agent.records import recover
from pytest_benchmark_agent.records.reader import load_results
from pytest_benchmark_agent.report.progress import read_heartbeat

WAIT_S = 300.0  # a bound on waiting for the session to reach its second trial, not a timing


def held_bench(project: BenchProject) -> Path:
    """A benchmark whose second trial waits (``sleep``) until the session is killed."""
    document = tiny_bench()
    document["stages"][1]["cmd"] = (
        "if [ -f first.done ]; then touch second.started; sleep 600; fi; "
        "touch first.done; echo score=1; echo mode={mode}"
    )
    return project.bench(document)


def start_and_kill(project: BenchProject) -> Path:
    """Run the held benchmark, SIGKILL the session in its second trial; its run folder."""
    held_bench(project)
    session = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--bench", "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=project.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + WAIT_S
        started = project.path / "second.started"
        while not started.exists() and session.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists(), "the session never reached its second trial"
        # The heartbeat names the trial in flight within a second (BEAT_INTERVAL_S).
        while not (read_heartbeat(project.runs()[0]) or {}).get("trial_id") and (
            time.monotonic() < deadline
        ):
            time.sleep(0.1)
        os.kill(session.pid, signal.SIGKILL)
    finally:
        session.kill()
        session.wait()
    [run_dir] = project.runs()
    assert not (run_dir / "index.json").exists()
    assert load_results(run_dir)["state"] == "running"
    return run_dir


def assert_finalized(project: BenchProject, run_dir: Path) -> dict:
    results = load_results(run_dir)
    assert results["state"] == "interrupted"
    statuses = sorted(t["status"] for t in results["trials"])
    assert statuses == ["interrupted", "passed"], statuses
    journalled = assert_trials_on_disk(run_dir)
    assert [t["status"] for t in journalled] == ["passed"]
    report = (run_dir / "report.md").read_text()
    wrong = report.split("## What Went Wrong", 1)[1]
    assert "ended without finishing it" in wrong
    entry = json.loads((run_dir / "index.json").read_text())
    assert entry["state"] == "interrupted"
    assert run_dir.name in (project.home / "results_index.md").read_text()
    return results


def test_a_verb_finalizes_a_run_whose_session_was_killed(project: BenchProject) -> None:
    run_dir = start_and_kill(project)
    history = agent(project, "history")
    text = assert_clean_exit(history, {0})
    assert f"{run_dir.name}  interrupted" in text
    results = assert_finalized(project, run_dir)
    by = "finalized as interrupted by benchmark-agent history"
    assert any(by in caveat for caveat in results["caveats"])
    compared = agent(project, "compare", run_dir.name, run_dir.name)
    text = assert_clean_exit(compared, {1})
    assert f"{run_dir.name} (A) is interrupted, not finished" in text
    again = agent(project, "history")  # finalized once: a second verb changes nothing
    assert_clean_exit(again, {0})
    assert load_results(run_dir)["caveats"] == results["caveats"]


def test_a_later_session_finalizes_it_before_it_measures(project: BenchProject) -> None:
    run_dir = start_and_kill(project)
    other = tiny_bench(name="other")
    project.bench(other, name="other.bench.yaml")
    result = project.run("other.bench.yaml")
    assert_clean_exit(result, {0})
    results = assert_finalized(project, run_dir)
    assert any("by a later session" in c for c in results["caveats"])


def test_a_run_whose_owner_is_alive_is_left_running(project: BenchProject) -> None:
    """This process claims a run: it is alive, so no verb touches the run."""
    project.bench(tiny_bench())
    run_dir = project.home / "runs" / "2026-01-01T00-00-00-simple-beef"
    recover.claim(run_dir)
    assert not recover.orphaned(run_dir)
    assert recovery.recover_orphans(project.home, by="a test") == []
    assert not (run_dir / "index.json").exists()


def test_a_reused_pid_is_not_taken_for_the_owner(project: BenchProject) -> None:
    """An owner is its pid *and* its start time: a live process with that pid but another
    start time is someone else, and the run is ownerless."""
    run_dir = project.home / "runs" / "x"
    claim = recover.claim(run_dir)
    owner = json.loads(claim.read_text())
    owner["start_ticks"] += 1
    claim.write_text(json.dumps(owner))
    assert recover.orphaned(run_dir)


def test_a_run_claimed_from_another_host_is_left_alone(project: BenchProject) -> None:
    run_dir = project.home / "runs" / "x"
    claim = recover.claim(run_dir)
    owner = json.loads(claim.read_text())
    claim.write_text(json.dumps({**owner, "host": "elsewhere", "pid": 1, "start_ticks": 0}))
    assert not recover.orphaned(run_dir)


def test_a_run_that_cannot_be_finalized_is_named_and_skipped(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    """An ownerless run with a corrupted frozen config: a warning naming it, no traceback."""
    run_dir = project.home / "runs" / "broken"
    claim = recover.claim(run_dir)
    owner = json.loads(claim.read_text())
    claim.write_text(json.dumps({**owner, "start_ticks": owner["start_ticks"] + 1}))
    (run_dir / "config.yaml").write_text("config: [not, a, benchmark]\n")
    assert recovery.recover_orphans(project.home, by="a test") == []
    err = capsys.readouterr().err
    assert "run broken was left running by a session that is gone" in err
    assert "trials.jsonl" in err


SEEING_PLUGIN = """
import json


def pytest_bench_run_caveats(run):
    return ["seen by the conftest plugin"] if run.name != "other" else None


def pytest_bench_run_finished(run):
    with open("finished.jsonl", "a") as seen:
        seen.write(json.dumps({
            "run_id": run.run_id,
            "state": run.state,
            "statuses": sorted(t.status for t in run.trials),
            "caveats": list(run.caveats),
        }) + "\\n")
"""


def test_a_recovered_run_is_published_to_the_sessions_plugins(project: BenchProject) -> None:
    """Recovery finishes a run as a session does, through the hooks: another plugin's
    ``pytest_bench_run_finished`` sees the recovered run, and its caveats are asked for."""
    run_dir = start_and_kill(project)
    (project.path / "finished.jsonl").unlink(missing_ok=True)  # the killed session's own writes
    (project.path / "conftest.py").write_text(SEEING_PLUGIN)
    project.bench(tiny_bench(name="other"), name="other.bench.yaml")
    assert_clean_exit(project.run("other.bench.yaml"), {0})
    results = assert_finalized(project, run_dir)
    seen = [json.loads(line) for line in (project.path / "finished.jsonl").read_text().splitlines()]
    recovered = [entry for entry in seen if entry["run_id"] == run_dir.name]
    assert len(recovered) == 1, seen
    assert recovered[0]["state"] == "interrupted"
    assert recovered[0]["statuses"] == ["interrupted", "passed"]
    assert "seen by the conftest plugin" in recovered[0]["caveats"]
    assert recovered[0]["caveats"] == results["caveats"]
    assert any(entry["run_id"] != run_dir.name for entry in seen)  # the session's own run


def test_a_verb_publishes_a_recovered_run_through_the_hook_specifications(
    project: BenchProject,
) -> None:
    """Outside pytest a plugin manager holding the hook specifications finishes it: the
    engine's writers are its plugins, so the record and the report are written alike."""
    run_dir = start_and_kill(project)
    assert recovery.recover_orphans(project.home, by="a test") == [run_dir.name]
    assert_finalized(project, run_dir)
