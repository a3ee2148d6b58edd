"""The embedded default, end to end on a small corpus: SQLite FTS5, no server, no downloads."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from benchhelpers import BenchProject

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "sqlite-fts5"


@pytest.mark.happy
def test_fts5_example_runs_end_to_end_and_reuses_its_preps(project: BenchProject) -> None:
    folder = project.path / "sqlite-fts5"
    shutil.copytree(EXAMPLE, folder)
    small = ["--bench-set", "corpus.n_docs=600", "--bench-set", "n_queries=40"]
    result = project.run(str(folder / "bench.yaml"), *small)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    record = project.results()
    assert record["counts"] == {"passed": 14}  # 2 treatments x 7 replicates
    summary = record["summary"]
    assert summary["segments"]["optimize"]["max"] == 1
    assert summary["segments"]["none"]["min"] > 1
    hashes = {t["metrics"]["results_hash"] for t in record["trials"]}
    assert len(hashes) == 1  # identical results for every treatment and replicate
    assert {t["effective"]["fts.merge"] for t in record["trials"]} == {"none", "optimize"}
    report = (project.runs()[-1] / "report.md").read_text()
    assert "### `p50_ms` (primary, lower is better)" in report and "## What Went Wrong" in report
    assert [p["action"] for p in record["preps"]] == ["built"] * 3  # build, merge x2

    again = project.run(str(folder / "bench.yaml"), *small)
    assert again.ret == pytest.ExitCode.OK
    assert {p["action"] for p in project.results()["preps"]} == {"reused"}
