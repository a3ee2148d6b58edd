"""Hooks receive frozen values (a RunRecord, a TrialRecord, a read-only warm-up): no
implementation can change what another, or gate 2, reads; a plugin adds caveats through
pytest_bench_run_caveats only; and what a third-party hook sees is the record the writer
writes."""

from __future__ import annotations

import dataclasses
import json

import pytest
from benchhelpers import simple_bench

from pytest_benchmark_agent.records.frozen import FrozenDict, freeze, thaw
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.records.schema import TrialRecord

TRIAL = {
    "id": "t[a]",
    "treatment": "a",
    "replicate": 0,
    "status": "passed",
    "stage": "measure",
    "metrics": {"t": 1.5},
    "command": ["run", "it"],
}


def test_a_record_refuses_every_write_and_names_the_one_way_in() -> None:
    trial = TrialRecord.from_dict(TRIAL)
    run = RunRecord.from_dict({"run_id": "r", "name": "n", "state": "running", "trials": [TRIAL]})
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.caveats = ("sneaked in",)  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        trial.status = "failed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        trial.metrics["t"] = 0.1  # type: ignore[index]
    with pytest.raises(AttributeError):
        run.caveats.append("sneaked in")  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        trial.get("command")[0] = "rm"
    with pytest.raises(dataclasses.FrozenInstanceError, match="pytest_bench_run_caveats"):
        run.summary._data = {}  # type: ignore[attr-defined]
    assert run.trials[0] == trial and thaw(trial)["command"] == ["run", "it"]  # as written


def test_a_warmup_is_a_read_only_mapping() -> None:
    warmup = freeze({"kind": "warmup", "metrics": {"wall_s": 0.1}})
    assert isinstance(warmup, FrozenDict) and warmup["metrics"]["wall_s"] == 0.1
    with pytest.raises(TypeError):
        warmup["kind"] = "trial"  # type: ignore[index]


CONFTEST = """
import json
import pathlib

seen = []


def pytest_bench_trial_finished(trial, run):
    assert run.trials[-1] == trial  # the run already holds the trial it announces
    try:
        trial.metrics["t"] = -1.0
    except TypeError as exc:
        seen.append(type(exc).__name__)
    try:
        run.verdicts = {}
    except AttributeError as exc:
        seen.append(type(exc).__name__)


def pytest_bench_run_caveats(run):
    return ["exported elsewhere: the export is partial"]


def pytest_bench_run_finished(run):
    try:
        run.caveats.append("sneaked in")
    except AttributeError as exc:
        seen.append(type(exc).__name__)
    pathlib.Path("seen.json").write_text(json.dumps(seen))
    pathlib.Path("finished.json").write_text(json.dumps({
        "run_id": run.run_id,
        "tag": run.tag,
        "caveats": list(run.caveats),
        "trials": [[t.id, t.status, dict(t.metrics)] for t in run.trials],
        "verdicts": {
            m: {label: [v.verdict, v.ratio] for label, v in per.items()}
            for m, per in run.verdicts.items()
        },
    }))
"""


def test_a_plugin_cannot_change_the_run_and_sees_the_record_written(project) -> None:
    project.bench(simple_bench())
    project.pytester.makeconftest(CONFTEST)
    result = project.run("bench.yaml", subprocess=True)
    assert result.ret == 0, result.stdout.str()
    seen = json.loads((project.path / "seen.json").read_text())
    assert set(seen) == {"TypeError", "FrozenInstanceError", "AttributeError"}, seen
    record = project.results()
    assert "exported elsewhere: the export is partial" in record["caveats"]
    assert "sneaked in" not in record["caveats"]
    assert all(t["metrics"]["score"] == 6 for t in record["trials"])
    assert record["verdicts"]  # the verdicts stand
    finished = json.loads((project.path / "finished.json").read_text())
    assert finished == {
        "run_id": record["run_id"],
        "tag": record["tag"],
        "caveats": record["caveats"],
        "trials": [[t["id"], t["status"], t["metrics"]] for t in record["trials"]],
        "verdicts": {
            m: {label: [v["verdict"], v["ratio"]] for label, v in per.items()}
            for m, per in record["verdicts"].items()
        },
    }
