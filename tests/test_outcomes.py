"""The CI gate, the reproduction, the sequential looks and the summary rows are held on a run's
record as typed values, read from ``results.yaml``'s mappings once and written back unchanged
(docs/benchmark/FORMAT.md keeps its keys)."""

from __future__ import annotations

import pickle
from typing import Any

from pytest_benchmark_agent.records.outcomes import (
    GateRecord,
    ReproductionRecord,
)
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.records.summary import SummaryRow

GATE = {"outcome": "regressed", "reasons": ["`t` [b] regressed; judged within one session"]}
REPRODUCES = {
    "run_id": "r1",
    "kind": "reproduction",
    "ok": True,
    "lines": ["`t` [b]: reproduced"],
    "problems": [],
    "tag": "QUALIFIED",
    "caveats": [],
    "benign_differences": ["env.hostname"],
    "limits": [],
    "skipped": ["r0: another config"],
}
SEQUENTIAL = {
    "min": 4,
    "max": 12,
    "blocks_used": 8,
    "stopped": True,
    "reason": "every primary verdict decided after 8 blocks",
    "looks": [{"blocks": 4, "stop": False}, {"blocks": 8, "stop": True}],
    "late_trials": 1,
}
SUMMARY = {
    "t": {
        "a": {"n": 3, "median": 1.0, "mean": 1.0, "stdev": 0.0, "cv": 0.0, "min": 1, "max": 1},
        "b": {"n": 3, "median": 2.0, "cv": 0.1, "ratio_to_control": 2.0},
    },
    "h": {"a": {"n": 2, "distinct": 1, "values": [{"value": "3f2a", "count": 2}]}},
}


def results(**fields: Any) -> dict[str, Any]:
    return {"run_id": "r2", "name": "demo", "state": "complete", **fields}


def test_the_three_outcomes_are_read_as_themselves_and_written_back_unchanged() -> None:
    record = RunRecord.from_dict(
        results(
            ci_gate=GATE,
            reproduces=REPRODUCES,
            sequential=SEQUENTIAL,
            baseline={"run_id": "r1", "gate": GATE},
        )
    )
    assert record.ci_gate == GateRecord("regressed", tuple(GATE["reasons"]))
    assert record.ci_gate.word == "REGRESSED" and record.ci_gate.fails(["regression"])
    assert not record.ci_gate.fails(["unjudged"])
    assert record.reproduces is not None and record.reproduces.reproduced
    assert record.reproduces.benign_differences == ("env.hostname",)
    assert record.sequential is not None and record.sequential.blocks_used == 8
    assert record.sequential.looks[1]["stop"]
    assert record.baseline is not None and record.baseline.gate == record.ci_gate
    out = record.to_dict()
    assert out["ci_gate"] == GATE and out["reproduces"] == REPRODUCES
    assert out["sequential"] == SEQUENTIAL and out["baseline"]["gate"] == GATE


def test_absent_outcomes_stay_absent_and_a_search_that_found_no_rerun_keeps_its_shape() -> None:
    skipped = {"run_id": None, "skipped": ["r0: other code"]}
    record = RunRecord.from_dict(results(reproduces=skipped, baseline={"run_id": None}))
    assert record.ci_gate is None and record.sequential is None
    assert record.reproduces == ReproductionRecord(None, skipped=("r0: other code",))
    assert not record.reproduces.reproduced
    assert record.baseline is not None and record.baseline.gate is None
    out = record.to_dict()
    assert out["ci_gate"] is None and out["sequential"] is None
    assert out["reproduces"] == skipped and out["baseline"]["gate"] == {}


def test_a_newer_writers_fields_are_kept_as_read() -> None:
    gate = {**GATE, "by": "a newer writer"}
    looks = {key: value for key, value in SEQUENTIAL.items() if key != "late_trials"}
    record = RunRecord.from_dict(results(ci_gate=gate, sequential=looks))
    assert record.ci_gate is not None and record.ci_gate.extra == {"by": "a newer writer"}
    assert record.sequential is not None and record.sequential.late_trials is None
    assert record.to_dict()["ci_gate"] == gate and record.to_dict()["sequential"] == looks


def test_a_summary_row_says_its_kind_and_reads_and_writes_as_recorded() -> None:
    record = RunRecord.from_dict(results(summary=SUMMARY))
    number, exact = record.stats("t")["b"], record.stats("h")["a"]
    assert isinstance(number, SummaryRow) and not number.exact and number["median"] == 2.0
    assert isinstance(exact, SummaryRow) and exact.exact and exact["n"] == 2
    assert record.to_dict()["summary"] == SUMMARY
    assert pickle.loads(pickle.dumps(exact)).exact  # a record crosses processes as it is
    assert not SummaryRow().exact
