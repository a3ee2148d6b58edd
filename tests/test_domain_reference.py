"""The SQLite FTS5 and SEISMIC reference domains against the real systems, through the `bench`
fixture (real sessions, real indexes, tiny inputs)."""

from __future__ import annotations

import pytest

from pytest_benchmark_agent.domains.api import domain_class

FTS5_PARAMS = {
    "corpus.n_docs": 400,
    "corpus.seed": 1,
    "fts.docs_per_commit": 20,
    "fts.automerge": 0,
    "fts.crisismerge": 1999,
    "fts.merge": "none",
    "n_queries": 60,
    "query.seed": 1,
}


@pytest.mark.happy
def test_fts5_domain_merges_to_one_segment_at_identical_results(bench) -> None:
    result = bench.run_domain(
        "sqlite_fts5",
        params=FTS5_PARAMS,
        treatment_variable="fts.merge",
        treatments=["none", "optimize"],
        replicates=2,
    )
    assert result.counts == {"passed": 4}, result.session
    assert result.samples("segments") == {"none": [20.0, 20.0], "optimize": [1.0, 1.0]}
    hashes = result.samples("results_hash")
    assert set(hashes["none"]) == set(hashes["optimize"]) and len(set(hashes["none"])) == 1
    assert result.trials[0].get("effective")["fts.automerge"] == "0"


@pytest.mark.happy
def test_seismic_domain_measures_recall_against_exact_truth(bench) -> None:
    pytest.importorskip(
        "seismic", reason="pyseismic-lsr is not installed (pip install pyseismic-lsr)"
    )
    params = {
        name: entry.default
        for name, entry in domain_class("seismic", bench.base / "x.yaml").manifest_entries().items()
    }
    params.update({"corpus.n_docs": 1500, "corpus.n_queries": 40, "seismic.n_postings": 600})
    result = bench.run_domain(
        "seismic",
        params=params,
        treatment_variable="heap_factor",
        treatments=[0.6, 0.9],
        replicates=1,
    )
    assert result.counts == {"passed": 2}, result.session
    recall = result.samples("recall@10")
    assert all(0.5 < values[0] <= 1.0 for values in recall.values())
    assert result.trials[1].get("effective") == {"heap_factor": "0.9", "query_cut": "20"}
