"""Time a fixed set of MATCH queries against an FTS5 index (the measure stage).

The query set depends only on `--seed` and the documents, which every treatment
shares, so both treatments answer exactly the same queries: each is 1-3 words
picked from one document chosen at random (so it matches at least that
document). After a warm-up pass over all queries, each query is timed on its
own, fetching the top 10 by bm25 rank. Prints `p50_ms=`, `p95_ms=`,
`results_hash=` (a digest of every result list, identical when the treatments
return identical results) and `segments=`. The database is opened read-only:
it is a cached artifact and must not change.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
import sqlite3
import time
from pathlib import Path

from corpus import TABLE, count_segments

QUERY = f"SELECT rowid FROM {TABLE} WHERE {TABLE} MATCH ? ORDER BY rank LIMIT 10"


def query_set(conn: sqlite3.Connection, n_queries: int, seed: int) -> list[str]:
    """Return `n_queries` MATCH expressions of 1-3 quoted words, deterministic in `seed`."""
    rng = random.Random(seed)
    (n_docs,) = conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
    if n_docs == 0:
        raise SystemExit("search.py: the index holds no documents; rebuild it with build.py")
    queries = []
    for _ in range(n_queries):
        (body,) = conn.execute(
            f"SELECT body FROM {TABLE} WHERE rowid = ?", (rng.randint(1, n_docs),)
        ).fetchone()
        words = body.split()
        picked = rng.sample(words, rng.randint(1, min(3, len(words))))
        queries.append(" ".join(f'"{word}"' for word in picked))
    return queries


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    return sorted_values[max(1, math.ceil(fraction * len(sorted_values))) - 1]


def results_hash(results: list[list[int]]) -> int:
    """First 13 hex digits of a SHA-256 of all result lists: an int a float holds exactly."""
    digest = hashlib.sha256(repr(results).encode()).hexdigest()
    return int(digest[:13], 16)


def run(index: Path, n_queries: int, seed: int) -> dict[str, float]:
    """Run the warm-up and timed passes; return the metrics."""
    conn = sqlite3.connect(index.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        queries = query_set(conn, n_queries, seed)
        for query in queries:
            conn.execute(QUERY, (query,)).fetchall()
        times_ms: list[float] = []
        results: list[list[int]] = []
        for query in queries:
            start = time.perf_counter_ns()
            rows = conn.execute(QUERY, (query,)).fetchall()
            times_ms.append((time.perf_counter_ns() - start) / 1e6)
            results.append([rowid for (rowid,) in rows])
        times_ms.sort()
        return {
            "p50_ms": percentile(times_ms, 0.50),
            "p95_ms": percentile(times_ms, 0.95),
            "results_hash": results_hash(results),
            "segments": count_segments(conn),
        }
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True, help="database from merge.py")
    parser.add_argument("--queries", type=int, required=True, help="number of queries")
    parser.add_argument("--seed", type=int, required=True, help="query-set RNG seed")
    args = parser.parse_args()
    if args.queries < 1:
        parser.error("--queries must be at least 1")
    if not args.index.is_file():
        parser.error(f"--index {args.index} is not a file; run merge.py first")
    for name, value in run(args.index, args.queries, args.seed).items():
        print(f"{name}={value}")


if __name__ == "__main__":
    main()
