"""Hooks see read-only views: no implementation can change what another, or gate 2, reads; a
plugin adds caveats through pytest_bench_run_caveats only."""

from __future__ import annotations

import json

import pytest
from benchhelpers import simple_bench

from pytest_benchmark_agent.records.views import (
    FrozenMapping,
    FrozenSequence,
    ReadOnlyError,
    frozen,
    thaw,
)


def test_a_frozen_record_reads_like_the_record_and_refuses_every_write() -> None:
    record = {"id": "t[a]", "metrics": {"t": 1.5}, "tags": ["x"]}
    view = frozen(record)
    assert view["metrics"]["t"] == 1.5 and view["tags"][0] == "x"
    assert dict(view).keys() == record.keys() and view.get("missing") is None
    with pytest.raises(ReadOnlyError, match="pytest_bench_run_caveats"):
        view["status"] = "passed"
    with pytest.raises(ReadOnlyError):
        view["metrics"]["t"] = 0.1
    with pytest.raises(ReadOnlyError):
        view["tags"].append("y")
    with pytest.raises(AttributeError):
        view.update({"status": "x"})  # a Mapping has no update
    assert record == {"id": "t[a]", "metrics": {"t": 1.5}, "tags": ["x"]}


def test_thaw_gives_a_plain_copy_to_serialize() -> None:
    record = {"metrics": {"t": 1.5}, "tags": ["x"]}
    plain = thaw(FrozenMapping(record))
    assert json.loads(json.dumps(plain)) == record
    plain["metrics"]["t"] = 9.0
    assert record["metrics"]["t"] == 1.5
    assert FrozenSequence([1, 2]) == [1, 2]


CONFTEST = """
import json
import pathlib

seen = []


def pytest_bench_trial_finished(trial, run):
    try:
        trial["metrics"]["t"] = -1.0
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
    except TypeError as exc:
        seen.append(type(exc).__name__)
    pathlib.Path("seen.json").write_text(json.dumps(seen))
"""


def test_a_plugin_cannot_change_the_run_and_adds_caveats_through_the_hook(project) -> None:
    project.bench(simple_bench())
    project.pytester.makeconftest(CONFTEST)
    result = project.run("bench.yaml", subprocess=True)
    assert result.ret == 0, result.stdout.str()
    seen = json.loads((project.path / "seen.json").read_text())
    assert seen.count("ReadOnlyError") == len(seen) and len(seen) >= 3
    record = project.results()
    assert "exported elsewhere: the export is partial" in record["caveats"]
    assert "sneaked in" not in record["caveats"]
    assert all(t["metrics"]["score"] == 6 for t in record["trials"])
    assert record["verdicts"]  # the verdicts stand
