"""Generate a deterministic learned-sparse-like corpus with exact top-10 ground truth (prep).

Components are drawn from a power-law (Zipf) vocabulary, as in SPLADE-style
vectors where a few tokens occur almost everywhere and most are rare; documents
have about 100 non-zeros and queries about 30, each with a positive weight.
Weights are rounded to float16 because SEISMIC stores values in half precision:
the exact scores of the ground truth are then the scores SEISMIC computes, and
an exhaustive search finds exactly the ground-truth top 10.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sparse_corpus import DOCUMENTS, GROUND_TRUTH, QUERIES

DIMENSION = 30_000
ZIPF_EXPONENT = 1.0
DOC_NONZEROS = 100
QUERY_NONZEROS = 30
TOP_K = 10
_GROUND_TRUTH_BATCH = 256  # queries scored at once, to bound the dense score block


def zipf_cdf(dimension: int, exponent: float) -> np.ndarray:
    """Cumulative probabilities of components 0..dimension-1 under a Zipf law."""
    weights = 1.0 / np.arange(1, dimension + 1) ** exponent
    return np.cumsum(weights / weights.sum())


def sparse_vectors(
    rng: np.random.Generator, count: int, nonzeros: int, cdf: np.ndarray
) -> sp.csr_matrix:
    """`count` rows of about `nonzeros` distinct components each, with float16-exact weights."""
    indices: list[np.ndarray] = []
    for _ in range(count):
        target = max(1, round(rng.normal(nonzeros, nonzeros * 0.2)))
        drawn = np.searchsorted(cdf, rng.random(2 * target), side="right")
        distinct = np.unique(np.minimum(drawn, len(cdf) - 1))
        indices.append(np.sort(rng.permutation(distinct)[:target]))
    lengths = np.array([len(row) for row in indices])
    values = rng.lognormal(0.0, 0.6, int(lengths.sum())).astype(np.float16).astype(np.float64)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    return sp.csr_matrix((values, np.concatenate(indices), indptr), shape=(count, len(cdf)))


def write_jsonl(matrix: sp.csr_matrix, path: Path) -> None:
    """Write each row as one SEISMIC JSONL record whose id is the row number."""
    with path.open("w", encoding="utf-8") as out:
        for row in range(matrix.shape[0]):
            start, end = matrix.indptr[row], matrix.indptr[row + 1]
            vector = {
                str(c): float(v)
                for c, v in zip(matrix.indices[start:end], matrix.data[start:end], strict=True)
            }
            out.write(json.dumps({"id": row, "content": "", "vector": vector}) + "\n")


def exact_top_k(documents: sp.csr_matrix, queries: sp.csr_matrix, k: int) -> np.ndarray:
    """Brute-force top-k document ids by inner product, best first (ties: lower id first)."""
    k = min(k, documents.shape[0])
    rows = []
    doc_t = documents.T.tocsc()
    for start in range(0, queries.shape[0], _GROUND_TRUTH_BATCH):
        scores = (queries[start : start + _GROUND_TRUTH_BATCH] @ doc_t).toarray()
        rows.append(np.argsort(-scores, axis=1, kind="stable")[:, :k])
    return np.concatenate(rows).astype(np.int64)


def generate(n_docs: int, n_queries: int, seed: int, out: Path) -> None:
    """Write documents, queries and ground truth for one seed into the folder `out`."""
    rng = np.random.default_rng(seed)
    cdf = zipf_cdf(DIMENSION, ZIPF_EXPONENT)
    documents = sparse_vectors(rng, n_docs, DOC_NONZEROS, cdf)
    queries = sparse_vectors(rng, n_queries, QUERY_NONZEROS, cdf)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(documents, out / DOCUMENTS)
    write_jsonl(queries, out / QUERIES)
    np.save(out / GROUND_TRUTH, exact_top_k(documents, queries, TOP_K))
    print(f"docs={n_docs}")
    print(f"queries={n_queries}")
    print(f"doc_nonzeros_mean={documents.nnz / n_docs}")
    print(f"query_nonzeros_mean={queries.nnz / n_queries}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, required=True, help="number of documents")
    parser.add_argument("--queries", type=int, required=True, help="number of queries")
    parser.add_argument("--seed", type=int, required=True, help="RNG seed")
    parser.add_argument("--out", type=Path, required=True, help="folder to create")
    args = parser.parse_args()
    if args.docs < 1 or args.queries < 1:
        parser.error("--docs and --queries must be at least 1")
    generate(args.docs, args.queries, args.seed, args.out)


if __name__ == "__main__":
    main()
