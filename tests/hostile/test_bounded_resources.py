"""Class 10 of issue 19: what a stage prints and how long it runs cannot grow the harness.

200 MB of stage output (100 MB of it one line with no end) must not raise the harness's own
memory by more than 50 MB: metrics are parsed as a stream, and output stays on disk. The bound
is on memory, measured as the pytest process's peak RSS over its RSS at session start (psutil,
``ru_maxrss``), against the same session printing almost nothing; never on time. And
``budget.wall_clock_s`` stops a trial still running at the deadline, not after it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from benchhelpers import BenchProject
from hostilehelpers import assert_clean_exit, tiny_bench

from pytest_benchmark_agent.engine.untimed import BUDGET_STOP

GROWTH_LIMIT_MB = 50
#: Runs pytest in this process and prints its RSS growth: peak (``ru_maxrss``) over the RSS
#: psutil reads when the session starts.
PROBE = textwrap.dedent(
    """
    import json, resource, sys
    import psutil, pytest

    class Probe:
        def pytest_sessionstart(self, session):
            self.start = psutil.Process().memory_info().rss

    probe = Probe()
    code = pytest.main(sys.argv[1:], plugins=[probe])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print("PROBE " + json.dumps({"code": int(code), "growth": peak - probe.start}))
    """
)


def growth_mb(project: BenchProject, command: str) -> float:
    """The harness's RSS growth over one session whose measure stage runs ``command``."""
    document = tiny_bench()
    document["stages"][1]["cmd"] = command
    project.bench(document)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "--bench", "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert_clean_exit(done, {0})
    [line] = [line for line in done.stdout.splitlines() if line.startswith("PROBE ")]
    probe = json.loads(line[len("PROBE ") :])
    assert probe["code"] == 0, done.stdout[-3000:]
    return probe["growth"] / (1 << 20)


def test_200_mb_of_stage_output_leaves_the_harness_memory_bounded(project: BenchProject) -> None:
    quiet = growth_mb(project, "echo score=1; echo mode={mode}")
    chatty = growth_mb(
        project,
        "if [ {mode} = a ]; then "
        "head -c 100000000 /dev/zero | tr '\\0' x; echo; "
        "yes 'noise=1 and a line of padding to make it longer' | head -c 100000000; echo; "
        "fi; echo score=1; echo mode={mode}",
    )
    assert chatty - quiet < GROWTH_LIMIT_MB, (quiet, chatty)
    [run_dir, *_] = sorted((project.home / "runs").iterdir())[-1:]
    logs = list(run_dir.glob("trials/*a-rep0*/stdout.txt"))
    assert logs and logs[0].stat().st_size > 200_000_000  # the output is kept, on disk


@pytest.mark.parametrize("timeout_s", [None, 600])
def test_the_wall_clock_budget_stops_a_running_trial_at_its_deadline(
    project: BenchProject, timeout_s: int | None
) -> None:
    document = tiny_bench(budget={"wall_clock_s": 2})
    document["stages"][1]["cmd"] = "sleep 600; echo score=1; echo mode={mode}"
    if timeout_s is not None:
        document["stages"][1]["timeout_s"] = timeout_s
    project.bench(document)
    result = project.run()
    assert_clean_exit(result, {0})
    results = project.results()
    assert results["state"] == "halted"
    assert results["stop_reason"].startswith("budget.wall_clock_s spent")
    first, second = results["trials"]
    assert first["status"] == "interrupted" and first["reason"].startswith(BUDGET_STOP)
    assert first["exit_code"] == -9  # killed at the deadline, not left to sleep on
    assert second["status"] == "not_run"


def test_a_warmup_beyond_the_cap_is_refused_by_gate_1(project: BenchProject) -> None:
    """Issue 45: ``warmup: 1000000`` passed gate 1 (replicates were capped, warm-ups not)."""
    document = tiny_bench()
    document["stages"][1]["warmup"] = 1_000_000
    project.bench(document)
    text = assert_clean_exit(project.run(), {2})
    assert "stages[1] (measure).warmup: Input should be less than or equal to 1000" in text
    assert not project.runs()
    option = assert_clean_exit(project.run("--bench-warmup", "1000000"), {4})
    assert "give a whole number of warm-up rounds, 0 to 1000" in option


def test_the_wall_clock_budget_ends_the_warmup_rounds(project: BenchProject) -> None:
    """Issue 45: the budget did not stop warm-ups (``warmup: 1000000`` ran on at 90 s of a 5 s
    budget). Each round takes at least a second, so at most six fit a 5 s budget (the last cut
    short), of 30 asked for; no trial is measured after it (however loaded the machine, the
    budget may be spent before the first round or the first trial: the bounds still hold)."""
    document = tiny_bench(budget={"wall_clock_s": 5})
    document["stages"][1]["warmup"] = 30
    document["stages"][1]["cmd"] = "sleep 1; echo score=1; echo mode={mode}"
    project.bench(document)
    assert_clean_exit(project.run(), {0})
    results = project.results()
    assert results["state"] == "halted"
    warmups = results["warmups"]
    assert len(warmups) <= 6
    assert all(w["status"] == "passed" or w["reason"].startswith(BUDGET_STOP) for w in warmups)
    assert_stopped_by_budget(results["trials"])


def test_the_wall_clock_budget_stops_a_setup_as_it_stops_a_trial(project: BenchProject) -> None:
    """A ``setup:`` the budget stops interrupts its trial (the run is halted), where it failed
    the trial as ``its setup: command timed out``."""
    document = tiny_bench(budget={"wall_clock_s": 2})
    document["stages"][1]["setup"] = "sleep 600"
    project.bench(document)
    assert_clean_exit(project.run(), {0})
    results = project.results()
    assert results["state"] == "halted"
    assert_stopped_by_budget(results["trials"])
    first = results["trials"][0]
    assert first["status"] == "not_run" or first["reason"].endswith("during its setup: command")


def assert_stopped_by_budget(trials: list[dict]) -> None:
    """Assert no trial passed or failed: each was interrupted by the budget or not run."""
    for trial in trials:
        assert trial["status"] in {"interrupted", "not_run"}, trial
        if trial["status"] == "interrupted":
            assert trial["reason"].startswith(BUDGET_STOP), trial


def test_a_failure_reason_quotes_a_few_kb_of_a_long_line(project: BenchProject) -> None:
    """Issue 45: a stage's last line of 300 KB was quoted whole in the failure reason, so in
    every record, export and terminal. The reason quotes a few KB, the line cut and its length
    given: stdout's in full, stderr's as read from its last 64 KiB (so "over")."""
    document = tiny_bench()
    document["stages"][1]["cmd"] = (
        "if [ {mode} = a ]; then head -c 300000 /dev/zero | tr '\\0' x; echo; "
        "else head -c 300000 /dev/zero | tr '\\0' y >&2; exit 3; fi"
    )
    project.bench(document)
    text = assert_clean_exit(project.run(), {1})
    first, second = project.results()["trials"]
    assert "metric 'score' was not reported on stdout" in first["reason"]
    assert "[cut: the line is 300,000 characters long]" in first["reason"]
    assert "exited with code 3" in second["reason"]
    assert "[cut: the line is over 65,536 characters long]" in second["reason"]
    for trial in (first, second):
        assert len(trial["reason"]) < 8192
    assert max(len(line) for line in text.splitlines()) < 8192
