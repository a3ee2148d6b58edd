"""The trial record as a type: what a reader accepts back, and the field it names when not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_benchmark_agent.records.reader import (
    UnreadableRecord,
    UnreadableRecordWarning,
    load_results,
    read_journal,
)
from pytest_benchmark_agent.records.schema import PrepEvent, RecordShapeError, TrialRecord

TRIAL = {
    "id": "measure[mode=a-rep0]",
    "treatment": "a",
    "replicate": 0,
    "seed": None,
    "position": 0,
    "status": "passed",
    "metrics": {"score": 6},
    "started": "2026-12-04T10:00:00.000Z",
    "ended": "2026-12-04T10:00:01.000Z",
    "peak_rss_mb": 3.5,
    "stage": "measure",
    "host": "h",
    "command": "echo score=6",
    "effective": {"mode": "a"},
}


def test_a_record_reads_back_as_written_unknown_fields_kept() -> None:
    written = {**TRIAL, "plugin_note": "kept"}
    record = TrialRecord.from_dict(written)
    assert record.metrics == {"score": 6} and record.position == 0
    assert record.command == "echo score=6" and record.effective == {"mode": "a"}
    assert record.extra == {"plugin_note": "kept"}
    assert record.to_dict() == written and list(record.to_dict()) == list(written)
    assert list(record.to_dict())[:6] == [
        "id",
        "treatment",
        "replicate",
        "seed",
        "position",
        "status",
    ]


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        ({"id": None}, "id", "missing"),
        ({"replicate": "0"}, "replicate", "is not an integer"),
        ({"replicate": True}, "replicate", "is not an integer"),
        ({"status": "great"}, "status", "is none of"),
        ({"metrics": [1, 2]}, "metrics", "is not a mapping"),
        ({"peak_rss_mb": "big"}, "peak_rss_mb", "is not a number"),
    ],
)
def test_a_record_of_the_wrong_shape_names_its_field(change, field, problem) -> None:
    with pytest.raises(RecordShapeError, match=problem) as caught:
        TrialRecord.from_dict({**TRIAL, **change})
    assert caught.value.field == field
    assert "FORMAT.md" in str(caught.value)


def test_a_journal_line_of_the_wrong_shape_is_left_out_naming_the_field(tmp_path: Path) -> None:
    bad = {**TRIAL, "id": "measure[mode=b-rep0]", "replicate": "zero"}
    lines = [json.dumps(TRIAL), json.dumps(bad), json.dumps({**TRIAL, "id": "x", "position": 1})]
    (tmp_path / "trials.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.warns(
        UnreadableRecordWarning, match=r"line 2 is not a trial record \(trial field `replicate`"
    ):
        trials = read_journal(tmp_path)
    assert [t["id"] for t in trials] == ["measure[mode=a-rep0]", "x"]


def test_a_snapshot_holding_a_trial_of_the_wrong_shape_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / "results.yaml").write_text(
        "schema_version: 1\ntrials:\n- id: t\n  treatment: a\n  replicate: 0\n  status: passed\n"
    )
    with pytest.raises(UnreadableRecord, match=r"trial 1 \('t'\): trial field `stage`: missing"):
        load_results(tmp_path)


PREP = {
    "stage": "build",
    "signature": "ab" * 32,
    "binding": "build(size=3)",
    "action": "built",
    "folder": "/home/cache/abab",
    "wall_s": 0.5,
}


def test_a_prep_event_reads_back_as_written() -> None:
    event = PrepEvent.from_dict(PREP)
    assert event.action == "built" and event.extra == {"wall_s": 0.5}
    assert event.to_dict() == PREP


def test_a_snapshot_holding_a_prep_event_of_the_wrong_shape_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / "results.yaml").write_text(
        "schema_version: 1\ntrials: []\npreps:\n- stage: build\n  signature: ab\n  action: cooked\n"
    )
    with pytest.raises(UnreadableRecord, match=r"prep event 1: prep field `action`: 'cooked'"):
        load_results(tmp_path)


VERDICT = {
    "verdict": "regressed",
    "ratio": 1.2,
    "ci": [1.1, 1.3],
    "p": 0.0156,
    "p_holm": 0.0156,
    "mde": 0.05,
    "reason": None,
    "n": [7, 7],
    "refused": None,
}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"verdict": "faster"}, "verdict field `verdict`: 'faster' is none of improved"),
        ({"verdict": None}, "verdict field `verdict`: missing"),
        ({"ci": [1.1]}, r"verdict field `ci`: \[1.1\] is not a pair of numbers"),
        ({"ratio": "1.2"}, "verdict field `ratio`: '1.2' is not a number"),
        ({"refused": "tired"}, "verdict field `refused`: 'tired' is none of too_small"),
    ],
)
def test_a_snapshot_holding_a_verdict_of_the_wrong_shape_is_unreadable(
    tmp_path: Path, change: dict, problem: str
) -> None:
    document = {"schema_version": 1, "trials": [], "verdicts": {"t": {"b": VERDICT}}}
    (tmp_path / "results.yaml").write_text(json.dumps(document))  # JSON is YAML
    assert load_results(tmp_path)["verdicts"]["t"]["b"] == VERDICT
    document["verdicts"]["t"]["b"] = {**VERDICT, **change}
    (tmp_path / "results.yaml").write_text(json.dumps(document))
    with pytest.raises(UnreadableRecord, match=rf"verdict of t \[b\]: {problem}"):
        load_results(tmp_path)
