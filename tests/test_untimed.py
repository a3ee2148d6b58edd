"""What runs outside a trial's timing, in real sessions: warm-up rounds and per-trial setup."""

from __future__ import annotations

import pytest
from benchhelpers import BenchProject

#: The first run of a session (no marker yet in the session's folder) does three times the
#: work of every later one, and says so: a cold cache, a first import.
COLD_FIRST = (
    "if [ -e warm.marker ]; then echo units=1; else touch warm.marker; echo units=3; fi; "
    "echo mode={mode} > /dev/null"
)


def cold_first_bench(**stage: object) -> dict:
    return {
        "name": "coldfirst",
        "hypothesis": "mode b does the same work as mode a",
        "params": {"mode": "a"},
        "treatment_variable": "mode",
        "treatments": ["a", "b"],
        "replicates": 6,
        "stages": [
            {
                "name": "measure",
                "kind": "measure",
                "cmd": COLD_FIRST,
                "metrics_from": {"stdout": True, "fields": ["units"]},
                **stage,
            }
        ],
        "metrics": {"units": {"direction": "lower", "primary": True}},
    }


def units(record: dict) -> dict[str, list[float]]:
    per: dict[str, list[float]] = {}
    for trial in record["trials"]:
        per.setdefault(trial["treatment"], []).append(trial["metrics"]["units"])
    return per


def test_without_warmup_the_cold_first_run_is_a_sample(project: BenchProject) -> None:
    project.bench(cold_first_bench())
    assert project.run().ret == pytest.ExitCode.OK
    record = project.results()
    assert units(record)["a"][0] == 3.0  # the control's first trial measured cold
    assert record["warmups"] == []


def test_warmup_keeps_the_cold_run_out_of_every_sample(project: BenchProject) -> None:
    project.bench(cold_first_bench(warmup=1))
    assert project.run().ret == pytest.ExitCode.OK
    record = project.results()
    assert units(record) == {"a": [1.0] * 6, "b": [1.0] * 6}
    assert record["verdicts"]["units"]["b"]["verdict"] != "regressed"
    warmups = record["warmups"]
    assert [(w["kind"], w["id"], w["status"]) for w in warmups] == [
        ("warmup", "measure[mode=a-rep0]-warmup0", "passed"),
        ("warmup", "measure[mode=b-rep0]-warmup0", "passed"),
    ]
    assert record["counts"] == {"passed": 12}  # a warm-up round is never a trial
    journal = (project.runs()[-1] / "trials.jsonl").read_text()
    assert journal.count('"kind": "warmup"') == 2


def test_bench_warmup_option_warms_every_measure_stage(project: BenchProject) -> None:
    project.bench(cold_first_bench())
    assert project.run("--bench-warmup", "2").ret == pytest.ExitCode.OK
    record = project.results()
    assert units(record) == {"a": [1.0] * 6, "b": [1.0] * 6}
    assert len(record["warmups"]) == 4  # two rounds per configuration


def test_bench_warmup_option_refuses_a_negative_count(project: BenchProject) -> None:
    project.bench(cold_first_bench())
    result = project.run("--bench-warmup", "-1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--bench-warmup*whole number of warm-up rounds*"])


def test_a_warmup_on_a_prep_is_refused_naming_the_field(project: BenchProject) -> None:
    document = cold_first_bench()
    document["stages"].insert(0, {"name": "build", "kind": "prep", "cmd": "true", "warmup": 1})
    project.bench(document)
    result = project.run()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*stages*warmup: belongs to a measure stage only*"])


def test_setup_runs_before_every_trial_outside_its_timing(project: BenchProject) -> None:
    document = cold_first_bench(setup="sleep 0.2; echo {mode} >> setups.txt", cmd="true")
    document["stages"][0]["metrics_from"] = {"stdout": False, "fields": ["wall_s"]}
    document["metrics"] = {"wall_s": {"direction": "lower", "primary": True}}
    project.bench(document)
    assert project.run().ret == pytest.ExitCode.OK
    record = project.results()
    assert (project.path / "setups.txt").read_text().split() == [
        t["treatment"] for t in record["trials"]
    ]
    for trial in record["trials"]:
        setup = trial["setup"]
        assert setup["exit_code"] == 0 and setup["wall_s"] >= 0.2
        # the setup's own recorded time is not in the trial's: the measured `true` took less
        assert trial["metrics"]["wall_s"] < setup["wall_s"]
        assert trial["setup"]["ended"] <= trial["started"]


def test_a_failing_setup_fails_the_trial_by_name(project: BenchProject) -> None:
    document = cold_first_bench(setup="echo no table >&2; exit 3")
    document["replicates"] = 2
    project.bench(document)
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    record = project.results()
    assert {t["status"] for t in record["trials"]} == {"failed"}
    reason = record["trials"][0]["reason"]
    assert "setup: command exited with code 3" in reason and "no table" in reason
    assert not (project.path / "warm.marker").exists()  # the measured command never ran


def test_setup_quotes_every_substituted_value(project: BenchProject) -> None:
    hostile = "a; touch pwned #"
    document = cold_first_bench(setup="echo {mode} >> setups.txt")
    document["params"] = {"mode": hostile}
    document["treatments"] = [hostile, "b"]
    document["replicates"] = 2
    project.bench(document)
    assert project.run().ret == pytest.ExitCode.OK
    assert not (project.path / "pwned").exists()
    assert hostile in (project.path / "setups.txt").read_text().splitlines()


def test_setup_names_an_unknown_placeholder_at_collection(project: BenchProject) -> None:
    project.bench(cold_first_bench(setup="reset {table}"))
    result = project.run()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*setup*table*"])


def test_under_xdist_each_workers_warmup_rounds_reach_the_record(project: BenchProject) -> None:
    pytest.importorskip("xdist")
    project.bench(cold_first_bench(warmup=1))
    result = project.run("-n", "2", "-p", "no:benchmark", subprocess=True)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    record = project.results()
    assert record["counts"] == {"passed": 12}
    warmups = record["warmups"]
    # each worker warms each configuration it measures, once
    assert len(warmups) == len({(w["worker"], w["treatment"]) for w in warmups}) >= 2
    assert {w["status"] for w in warmups} == {"passed"}
    assert all(unit == 1.0 for values in units(record).values() for unit in values)


def test_a_failing_warmup_round_is_recorded_and_the_trials_still_run(
    project: BenchProject,
) -> None:
    document = cold_first_bench(warmup=1)
    document["stages"][0]["cmd"] = (
        "echo {mode} > /dev/null; "
        "if [ -e warm.marker ]; then echo units=1; else touch warm.marker; exit 4; fi"
    )
    project.bench(document)
    assert project.run().ret == pytest.ExitCode.OK
    record = project.results()
    first, second = record["warmups"]
    assert first["status"] == "failed" and first["reason"] == "the warm-up round exited with code 4"
    assert second["status"] == "passed" and record["counts"] == {"passed": 12}
