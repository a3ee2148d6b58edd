"""The run index entries a session's end reads twice: parsed once, re-read when rewritten."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_benchmark_agent.records.index import IndexEntry
from pytest_benchmark_agent.records.reader import UnreadableRecordWarning
from pytest_benchmark_agent.records.writer import (
    load_index,
    load_index_entry,
    regenerate_index,
)
from pytest_benchmark_agent.util.fsutil import atomic_write


def write_entry(home: Path, run_id: str, tag: str) -> Path:
    path = home / "runs" / run_id / "index.json"
    atomic_write(
        path,
        json.dumps(
            {
                "run_id": run_id,
                "name": "demo",
                "state": "complete",
                "tag": tag,
                "counts": {"passed": 1},
            }
        ),
    )
    return path


def test_entries_are_parsed_once_and_again_only_when_rewritten(tmp_path: Path) -> None:
    write_entry(tmp_path, "2026-01-01T00-00-00-demo-a", "RELIABLE")
    write_entry(tmp_path, "2026-01-02T00-00-00-demo-b", "QUALIFIED")
    (tmp_path / "runs" / "2026-01-03T00-00-00-demo-c").mkdir()
    (tmp_path / "runs" / "2026-01-03T00-00-00-demo-c" / "index.json").write_text("{torn")
    with pytest.warns(UnreadableRecordWarning):
        before = load_index(tmp_path)
    assert [(d.name[-1], e.tag) for d, e in before] == [("a", "RELIABLE"), ("b", "QUALIFIED")]
    again = load_index(tmp_path)
    assert all(a[1] is b[1] for a, b in zip(before, again, strict=True))  # not parsed again
    write_entry(tmp_path, "2026-01-01T00-00-00-demo-a", "FLAGGED!")  # same size, new file
    (tmp_path / "runs" / "2026-01-02T00-00-00-demo-b" / "index.json").unlink()
    assert [e.tag for _, e in load_index(tmp_path)] == ["FLAGGED!"]


def test_the_results_index_shows_a_rewritten_entry(tmp_path: Path) -> None:
    write_entry(tmp_path, "2026-01-01T00-00-00-demo-a", "RELIABLE")
    regenerate_index(tmp_path)
    write_entry(tmp_path, "2026-01-01T00-00-00-demo-a", "QUALIFIED")
    regenerate_index(tmp_path)
    text = (tmp_path / "results_index.md").read_text()
    assert "## QUALIFIED (1)" in text and "## RELIABLE (0)" in text


def test_the_typed_loader_reads_attributes_and_skips_a_malformed_entry(tmp_path: Path) -> None:
    write_entry(tmp_path, "2026-01-01T00-00-00-demo-a", "RELIABLE")
    bad = tmp_path / "runs" / "2026-01-02T00-00-00-demo-b" / "index.json"
    atomic_write(bad, json.dumps({"run_id": "b", "counts": {"passed": "many"}}))
    with pytest.warns(UnreadableRecordWarning, match="counts, primary or verdicts"):
        entries = load_index(tmp_path)
    assert [(e.run_id, e.tag, e.counts["passed"]) for _, e in entries] == [
        ("2026-01-01T00-00-00-demo-a", "RELIABLE", 1)
    ]
    with pytest.warns(UnreadableRecordWarning):
        assert load_index_entry(bad.parent) is None


def test_an_entry_written_back_keeps_every_key_of_its_format() -> None:
    entry = {
        "schema_version": 3,
        "run_id": "r",
        "name": "demo",
        "state": "complete",
        "tag": "QUALIFIED",
        "started": "s",
        "ended": "e",
        "counts": {"passed": 4, "failed": 1},
        "treatment_variable": None,
        "control": "default",
        "primary": {"wall_s": {"b": 1.5}},
        "verdicts": {"wall_s": {"b": "regressed"}},
        "config_hash": "h",
        "cites": ["q"],
        "flags": 2,
        "code": {"commit": "c" * 40, "short": "c", "branch": None, "dirty": True, "label": "x"},
        "ci_gate": "regressed",
        "comparison_key": "k",
    }
    typed = IndexEntry.from_dict(entry)
    assert typed.to_dict() == entry
    assert typed.one_configuration and typed.dirty and typed.commit == "c" * 40
