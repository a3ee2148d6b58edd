"""The example workloads' scripts, run as real subprocesses on tiny inputs.

These are the stage commands the engine runs for `examples/sqlite-fts5` and
`examples/seismic-heap-factor`; here they run alone, so a broken example shows up
as a failing script rather than as a confusing benchmark failure.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FTS5 = EXAMPLES / "sqlite-fts5"
SEISMIC = EXAMPLES / "seismic-heap-factor"

seismic_only = pytest.mark.skipif(
    importlib.util.find_spec("seismic") is None,
    reason="pyseismic-lsr is not installed (pip install pyseismic-lsr)",
)


def run_script(folder: Path, script: str, *args: object) -> subprocess.CompletedProcess[str]:
    """Run one example script from its own folder, as the engine does."""
    return subprocess.run(
        [sys.executable, script, *map(str, args)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def metrics_of(result: subprocess.CompletedProcess[str]) -> dict[str, float | str]:
    """Parse a successful script's stdout, where every line must be `name=value`.

    Values of metric lines must be floats; `BENCH_EFFECTIVE name=value` lines are
    returned under the key `effective:<name>`.
    """
    assert result.returncode == 0, result.stderr
    parsed: dict[str, float | str] = {}
    for line in result.stdout.splitlines():
        effective = line.startswith("BENCH_EFFECTIVE ")
        name, sep, value = line.removeprefix("BENCH_EFFECTIVE ").partition("=")
        assert sep and name and " " not in name, f"not a name=value line: {line!r}"
        if effective:
            parsed[f"effective:{name}"] = value
        else:
            parsed[name] = float(value)
    return parsed


# --- sqlite-fts5 -------------------------------------------------------------------------

FTS5_DOCS = 300  # 15 segments at build.py's 20 documents per transaction
FTS5_QUERIES = 40


@pytest.fixture(scope="module")
def fts5(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A built index and its two treatments: left as built, and optimized."""
    folder = tmp_path_factory.mktemp("fts5")
    paths = {
        "index": folder / "index.db",
        "none": folder / "none.db",
        "optimize": folder / "optimize.db",
    }
    metrics_of(
        run_script(FTS5, "build.py", "--docs", FTS5_DOCS, "--seed", 7, "--out", paths["index"])
    )
    for mode in ("none", "optimize"):
        metrics_of(
            run_script(
                FTS5, "merge.py", "--index", paths["index"], "--mode", mode, "--out", paths[mode]
            )
        )
    return paths


def fts5_search(index: Path, seed: int = 3) -> dict[str, float | str]:
    return metrics_of(
        run_script(FTS5, "search.py", "--index", index, "--queries", FTS5_QUERIES, "--seed", seed)
    )


def test_fts5_build_reports_the_segments_the_index_really_has(tmp_path: Path) -> None:
    out = tmp_path / "index.db"
    printed = metrics_of(
        run_script(FTS5, "build.py", "--docs", FTS5_DOCS, "--seed", 1, "--out", out)
    )
    with sqlite3.connect(out) as conn:
        # A second, independent count: leaf pages of segment s have rowids s << 37 + ...
        (distinct_segment_ids,) = conn.execute(
            "SELECT count(DISTINCT id >> 37) FROM docs_data WHERE id >> 37 > 0"
        ).fetchone()
        (n_docs,) = conn.execute("SELECT count(*) FROM docs").fetchone()
    assert printed["segments"] == distinct_segment_ids == FTS5_DOCS / 20
    assert n_docs == FTS5_DOCS


def test_fts5_same_seed_gives_same_corpus_and_results(
    tmp_path: Path, fts5: dict[str, Path]
) -> None:
    again = tmp_path / "again.db"
    metrics_of(run_script(FTS5, "build.py", "--docs", FTS5_DOCS, "--seed", 7, "--out", again))
    with sqlite3.connect(again) as a, sqlite3.connect(fts5["index"]) as b:
        query = "SELECT rowid, body FROM docs ORDER BY rowid"
        assert a.execute(query).fetchall() == b.execute(query).fetchall()
    assert fts5_search(again)["results_hash"] == fts5_search(fts5["none"])["results_hash"]


def test_fts5_other_query_seed_gives_other_results(fts5: dict[str, Path]) -> None:
    assert (
        fts5_search(fts5["none"], seed=3)["results_hash"]
        != fts5_search(fts5["none"], seed=4)["results_hash"]
    )


def test_fts5_optimize_leaves_one_segment_and_identical_results(
    tmp_path: Path, fts5: dict[str, Path]
) -> None:
    out = tmp_path / "optimized.db"
    merged = metrics_of(
        run_script(FTS5, "merge.py", "--index", fts5["index"], "--mode", "optimize", "--out", out)
    )
    assert merged == {"effective:fts.merge": "optimize", "segments": 1.0}
    left, optimized = fts5_search(fts5["none"]), fts5_search(out)
    assert left["segments"] == FTS5_DOCS / 20
    assert optimized["segments"] == 1
    assert left["results_hash"] == optimized["results_hash"]
    assert set(left) == {"p50_ms", "p95_ms", "results_hash", "segments"}
    assert 0 < left["p50_ms"] <= left["p95_ms"]
    assert left["results_hash"] == int(left["results_hash"])


def test_fts5_search_leaves_the_index_unchanged(fts5: dict[str, Path]) -> None:
    before = fts5["optimize"].read_bytes()
    fts5_search(fts5["optimize"])
    assert fts5["optimize"].read_bytes() == before


def test_fts5_unknown_merge_mode_is_rejected(tmp_path: Path, fts5: dict[str, Path]) -> None:
    out = tmp_path / "merged.db"
    result = run_script(
        FTS5, "merge.py", "--index", fts5["index"], "--mode", "vacuum", "--out", out
    )
    assert result.returncode == 2
    assert "unknown --mode 'vacuum'; use one of: none, optimize" in result.stderr
    assert result.stdout == ""
    assert not out.exists()


# --- seismic-heap-factor -----------------------------------------------------------------

SEISMIC_DOCS = 400
SEISMIC_QUERIES = 25


def generate(out: Path, seed: int = 5) -> dict[str, float | str]:
    return metrics_of(
        run_script(
            SEISMIC,
            "gen_corpus.py",
            "--docs",
            SEISMIC_DOCS,
            "--queries",
            SEISMIC_QUERIES,
            "--seed",
            seed,
            "--out",
            out,
        )
    )


@pytest.fixture(scope="module")
def sparse_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sparse") / "corpus"
    generate(out)
    return out


def read_vectors(path: Path) -> list[dict[str, float]]:
    return [json.loads(line)["vector"] for line in path.read_text().splitlines()]


@pytest.mark.happy
@seismic_only
def test_sparse_corpus_is_deterministic_and_shaped(tmp_path: Path, sparse_corpus: Path) -> None:
    printed = generate(tmp_path / "again")
    for name in ("documents.jsonl", "queries.jsonl", "groundtruth.npy"):
        assert (tmp_path / "again" / name).read_bytes() == (sparse_corpus / name).read_bytes()
    generate(tmp_path / "other", seed=6)
    assert (tmp_path / "other" / "documents.jsonl").read_bytes() != (
        sparse_corpus / "documents.jsonl"
    ).read_bytes()
    assert printed["docs"] == SEISMIC_DOCS and printed["queries"] == SEISMIC_QUERIES
    assert 80 <= printed["doc_nonzeros_mean"] <= 120
    assert 24 <= printed["query_nonzeros_mean"] <= 36
    documents = read_vectors(sparse_corpus / "documents.jsonl")
    assert all(weight > 0 for doc in documents for weight in doc.values())


@pytest.mark.happy
@seismic_only
def test_sparse_ground_truth_is_the_exact_top_10(sparse_corpus: Path) -> None:
    documents = read_vectors(sparse_corpus / "documents.jsonl")
    queries = read_vectors(sparse_corpus / "queries.jsonl")
    truth = np.load(sparse_corpus / "groundtruth.npy")
    assert truth.shape == (SEISMIC_QUERIES, 10)
    for query, expected in zip(queries, truth, strict=True):
        scores = [sum(w * doc.get(c, 0.0) for c, w in query.items()) for doc in documents]
        best = sorted(range(len(documents)), key=lambda d: (-scores[d], d))[:10]
        assert expected.tolist() == best


@pytest.mark.happy
@seismic_only
def test_seismic_exhaustive_search_finds_the_ground_truth(
    tmp_path: Path, sparse_corpus: Path
) -> None:
    index = tmp_path / "index"
    built = metrics_of(run_script(SEISMIC, "build.py", "--corpus", sparse_corpus, "--out", index))
    assert built["docs"] == SEISMIC_DOCS
    # Query cut above any query's length and a tiny heap factor: no block is skipped.
    searched = metrics_of(
        run_script(
            SEISMIC,
            "search.py",
            "--index",
            index,
            "--corpus",
            sparse_corpus,
            "--heap-factor",
            0.05,
            "--query-cut",
            200,
            "--k",
            10,
        )
    )
    assert searched["recall@10"] == 1.0
    assert searched["effective:heap_factor"] == "0.05"
    assert searched["effective:query_cut"] == "200"
    assert 0 < searched["p50_ms"] <= searched["p95_ms"]


@pytest.mark.happy
@seismic_only
def test_seismic_scripts_reject_a_missing_corpus(tmp_path: Path) -> None:
    result = run_script(SEISMIC, "build.py", "--corpus", tmp_path, "--out", tmp_path / "ix")
    assert result.returncode == 2
    assert "has no documents.jsonl; run gen_corpus.py first" in result.stderr
