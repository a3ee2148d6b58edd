"""A trial item's runtest protocol: pytest's phases and reports, without per-phase capture."""

from __future__ import annotations

import pytest
from benchhelpers import BenchProject, simple_bench

from pytest_benchmark_agent.engine.protocol import TrialProtocol

HOOK_LOG_CONFTEST = """
import pytest

def _log(item, when):
    with open({log!r}, "a") as handle:
        handle.write(f"{{when}} {{item.nodeid}}\\n")

def pytest_runtest_setup(item):
    _log(item, "setup")

def pytest_runtest_call(item):
    _log(item, "call")

def pytest_runtest_teardown(item):
    _log(item, "teardown")
"""


def test_a_running_stage_prints_its_progress_on_the_terminal_not_in_a_capture(
    project: BenchProject,
) -> None:
    document = simple_bench(replicates=1)
    document["stages"][1]["cmd"] = "if [ {mode} = a ]; then sleep 0.6; fi; echo score=1"
    project.bench(document)
    result = project.run("--bench-progress-every", "0.2", subprocess=True)
    assert result.ret == 0
    live = [
        line
        for line in result.outlines
        if line.startswith("[benchmark] simple: stage measure (measure[mode=a-rep0]) running for")
    ]
    assert live, result.stdout.str()
    assert "Captured" not in result.stdout.str()


def test_ordinary_tests_in_a_bench_session_keep_their_capture(project: BenchProject) -> None:
    project.bench(simple_bench(replicates=1))
    project.write(
        "test_plain.py",
        """
        def test_prints_and_fails():
            print("said by the test")
            assert False
    """,
    )
    result = project.run("bench.yaml", "test_plain.py")
    assert result.ret == 1
    result.assert_outcomes(passed=2, failed=1)
    text = result.stdout.str()
    assert "Captured stdout call" in text and "said by the test" in text


def test_conftest_phase_hooks_run_for_trials_where_their_folder_applies(
    project: BenchProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = []  # a conftest that does not apply makes pytest build a hook proxy per access
    original = TrialProtocol._phase_callers
    monkeypatch.setattr(
        TrialProtocol,
        "_phase_callers",
        lambda self, ihook: built.append(ihook) or original(self, ihook),
    )
    inside, outside = project.path / "inside.log", project.path / "outside.log"
    project.bench(simple_bench(replicates=1), name="suite/bench.yaml")
    project.write("suite/conftest.py", HOOK_LOG_CONFTEST.format(log=str(inside)))
    project.write("other/conftest.py", HOOK_LOG_CONFTEST.format(log=str(outside)))
    project.write("other/test_other.py", "def test_other():\n    pass\n")
    result = project.run("suite/bench.yaml", "other/test_other.py")
    assert result.ret == 0
    seen = inside.read_text().splitlines()
    assert seen == [
        f"{when} suite/bench.yaml::measure[mode={mode}-rep0]"
        for mode in "ab"
        for when in ("setup", "call", "teardown")
    ]
    assert outside.read_text().splitlines() == [
        f"{when} other/test_other.py::test_other" for when in ("setup", "call", "teardown")
    ]
    assert len(built) == 1  # once for the benchmark file, not once per trial


def test_exitfirst_stops_after_the_first_failed_trial_and_records_the_rest(
    project: BenchProject,
) -> None:
    document = simple_bench()
    document["stages"][1]["cmd"] = "echo {mode}; exit 3"
    project.bench(document)
    result = project.run("-x")
    assert result.ret == 1
    result.assert_outcomes(failed=1)
    statuses = [t["status"] for t in project.results()["trials"]]
    assert statuses == ["failed", "not_run", "not_run", "not_run"]


def test_setup_show_shows_each_trial_between_its_setup_and_teardown(project: BenchProject) -> None:
    project.bench(simple_bench(replicates=1))
    result = project.run("--setup-show")
    assert result.ret == 0
    text = result.stdout.str()
    assert text.count("bench.yaml::measure[mode=a-rep0] (fixtures used: bench_prep_build_") == 1
    assert text.count("SETUP    S bench_prep_build_") == 1
