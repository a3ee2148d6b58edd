"""Run every query against a SEISMIC index and report latency and recall (the measure stage).

After a warm-up pass over all queries, each query is timed on its own
(`time.perf_counter_ns` around one `SeismicIndex.search` call). Recall@k is the
mean, over queries, of the fraction of the exact top k (the corpus ground
truth) that SEISMIC returned. Prints `p50_ms=`, `p95_ms=`, `recall@<k>=` and
`BENCH_EFFECTIVE heap_factor=<x>` (with `query_cut`).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import seismic
from sparse_corpus import GROUND_TRUTH, INDEX_FILE, QUERIES, native_stdout_to_stderr, read_queries


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    return sorted_values[max(1, math.ceil(fraction * len(sorted_values))) - 1]


def measure(
    index: seismic.SeismicIndex,
    queries: list[tuple[str, np.ndarray, np.ndarray]],
    truth: np.ndarray,
    **options: float,
) -> dict[str, float]:
    """Warm up, then time each query alone; `options` are `k`, `query_cut`, `heap_factor`."""
    for query_id, components, weights in queries:
        index.search(
            query_id=query_id, query_components=components, query_values=weights, **options
        )
    times_ms: list[float] = []
    recalls: list[float] = []
    for (query_id, components, weights), exact in zip(queries, truth, strict=True):
        start = time.perf_counter_ns()
        found = index.search(
            query_id=query_id, query_components=components, query_values=weights, **options
        )
        times_ms.append((time.perf_counter_ns() - start) / 1e6)
        expected = {int(doc) for doc in exact[: options["k"]]}
        recalls.append(len(expected & {int(doc_id) for _, _, doc_id in found}) / len(expected))
    times_ms.sort()
    return {
        "p50_ms": percentile(times_ms, 0.50),
        "p95_ms": percentile(times_ms, 0.95),
        f"recall@{options['k']}": sum(recalls) / len(recalls),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True, help="index folder from build.py")
    parser.add_argument("--corpus", type=Path, required=True, help="folder from gen_corpus.py")
    parser.add_argument(
        "--heap-factor",
        type=float,
        required=True,
        help="SEISMIC block-skipping factor: higher skips more blocks",
    )
    parser.add_argument(
        "--query-cut", type=int, required=True, help="largest query components kept per query"
    )
    parser.add_argument("--k", type=int, default=10, help="results per query (default 10)")
    args = parser.parse_args()
    if args.heap_factor <= 0 or args.query_cut < 1:
        parser.error("--heap-factor must be > 0 and --query-cut at least 1")
    for needed in (args.index / INDEX_FILE, args.corpus / QUERIES, args.corpus / GROUND_TRUTH):
        if not needed.is_file():
            parser.error(f"{needed} is missing; run gen_corpus.py and build.py first")
    truth = np.load(args.corpus / GROUND_TRUTH)
    if not 1 <= args.k <= truth.shape[1]:
        parser.error(f"--k must be between 1 and {truth.shape[1]}, the ground truth's depth")
    queries = read_queries(args.corpus / QUERIES, seismic.get_seismic_string())
    if len(queries) != truth.shape[0]:
        parser.error(
            f"{QUERIES} has {len(queries)} queries but {GROUND_TRUTH} "
            f"{truth.shape[0]} rows; regenerate the corpus"
        )
    with native_stdout_to_stderr():
        index = seismic.SeismicIndex.load(str(args.index / INDEX_FILE))
        metrics = measure(
            index, queries, truth, k=args.k, query_cut=args.query_cut, heap_factor=args.heap_factor
        )
    print(f"BENCH_EFFECTIVE heap_factor={args.heap_factor}")
    print(f"BENCH_EFFECTIVE query_cut={args.query_cut}")
    for name, value in metrics.items():
        print(f"{name}={value}")


if __name__ == "__main__":
    main()
