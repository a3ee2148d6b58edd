"""``domain: seismic``: SEISMIC's query-time knobs against latency and recall@10.

`SEISMIC <https://github.com/TusKANNy/seismic>`_ (``pip install pyseismic-lsr``) indexes learned
sparse vectors (SPLADE-style): at query time it walks the posting lists of the query's
``query_cut`` largest components block by block and skips a block whose summary promises too
little against the current top k, more eagerly the higher ``heap_factor``. The corpus is
generated (a Zipf vocabulary, weights exact in float16, SEISMIC's own precision) with the exact
top 10 of every query by brute force, so recall@10 is measured against exact ground truth. Every
build parameter of the index is a manifest param: two indexes built differently are different
systems, and the cache keys on each.
"""

from __future__ import annotations

import time

from pytest_benchmark_agent.domains.api import Domain, StageCall, measure, prep
from pytest_benchmark_agent.domains.timing import percentile

DIMENSION = 30_000
DOC_NONZEROS = 100
QUERY_NONZEROS = 30
TOP_K = 10
INDEX_NAME = "index"  # SEISMIC saves <name>.index.seismic


def sparse_rows(rng, count: int, nonzeros: int):
    """``count`` CSR rows of about ``nonzeros`` distinct Zipf-drawn components each, with
    positive weights rounded to float16 (so SEISMIC's stored values are the exact ones)."""
    import numpy as np
    import scipy.sparse as sp

    probabilities = 1.0 / np.arange(1, DIMENSION + 1)
    probabilities /= probabilities.sum()
    rows, lengths = [], []
    for _ in range(count):
        wanted = max(1, int(rng.normal(nonzeros, nonzeros / 5)))
        components = np.unique(rng.choice(DIMENSION, size=2 * wanted, p=probabilities))
        rows.append(np.sort(rng.permutation(components)[:wanted]))
        lengths.append(len(rows[-1]))
    weights = rng.lognormal(0.0, 0.6, sum(lengths)).astype(np.float16).astype(np.float32)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    return sp.csr_matrix((weights, np.concatenate(rows), indptr), shape=(count, DIMENSION))


def exact_top_k(documents, queries, k: int):
    """Brute-force top-k document rows of every query by inner product (ties: lower row)."""
    import numpy as np

    scores = (queries.astype(np.float64) @ documents.astype(np.float64).T).toarray()
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def as_query(matrix, row: int):
    """One CSR row as SEISMIC's ``(components, values)`` arrays."""
    import numpy as np
    import seismic

    start, end = matrix.indptr[row], matrix.indptr[row + 1]
    components = np.array(
        [str(c) for c in matrix.indices[start:end]], dtype=seismic.get_seismic_string()
    )
    return components, matrix.data[start:end].astype(np.float32)


class Seismic(Domain):
    """SEISMIC query-time knobs (``heap_factor``, ``query_cut``) and build parameters."""

    manifest = {
        "corpus.n_docs": {
            "default": 10000,
            "why": "posting-list lengths, and so latency, grow with the collection",
        },
        "corpus.n_queries": {
            "default": 300,
            "why": "the number of timed queries behind each percentile and the recall mean",
        },
        "corpus.seed": {"default": 1, "why": "it fixes the documents, queries and ground truth"},
        "seismic.n_postings": {
            "default": 3500,
            "why": "postings kept per component: the index's pruning, which bounds recall",
        },
        "seismic.centroid_fraction": {
            "default": 0.1,
            "why": "blocks per posting list, which set how finely a search can skip",
        },
        "seismic.min_cluster_size": {"default": 2, "why": "the smallest block"},
        "seismic.summary_energy": {
            "default": 0.4,
            "why": "the share of a block's mass its "
            "summary keeps, which decides what a search skips",
        },
        "seismic.max_fraction": {
            "default": 1.5,
            "why": "the longest posting list, as a multiple of n_postings",
        },
        "seismic.doc_cut": {"default": 15, "why": "document components used when clustering"},
        "query_cut": {
            "default": 20,
            "why": "query components searched: fewer is faster and loses recall",
        },
        "heap_factor": {
            "default": 0.6,
            "why": "block-skipping eagerness: higher is faster and loses recall",
        },
    }
    metrics = {
        "p50_ms": {"direction": "lower", "primary": True, "noise_threshold": 0.02},
        "p95_ms": {"direction": "lower"},
        "recall@10": {"direction": "higher", "guard": True, "noise_threshold": 0.005},
    }
    resources = {"mem_mb": 2048}

    @prep(produces=["corpus"], params=["corpus.n_docs", "corpus.n_queries", "corpus.seed"])
    def gen(self, call: StageCall) -> dict[str, float]:
        """Documents, queries and the exact top 10 of every query, as .npz/.npy files."""
        import numpy as np
        import scipy.sparse as sp

        p = call.params
        rng = np.random.default_rng(p["corpus.seed"])
        documents = sparse_rows(rng, p["corpus.n_docs"], DOC_NONZEROS)
        queries = sparse_rows(rng, p["corpus.n_queries"], QUERY_NONZEROS)
        folder = call.artifacts["corpus"]
        folder.mkdir(parents=True)
        sp.save_npz(folder / "documents.npz", documents)
        sp.save_npz(folder / "queries.npz", queries)
        np.save(folder / "truth.npy", exact_top_k(documents, queries, TOP_K))
        return {"doc_nonzeros_mean": documents.nnz / documents.shape[0]}

    @prep(
        produces=["index"],
        needs=["gen"],
        params=[
            "seismic.n_postings",
            "seismic.centroid_fraction",
            "seismic.min_cluster_size",
            "seismic.summary_energy",
            "seismic.max_fraction",
            "seismic.doc_cut",
        ],
    )
    def build(self, call: StageCall) -> dict[str, float]:
        """``SeismicIndex.build_from_dataset`` with every build parameter from the params."""
        import scipy.sparse as sp
        import seismic

        p = call.params
        documents = sp.load_npz(call.artifacts["corpus"] / "documents.npz")
        dataset = seismic.SeismicDataset()
        for row in range(documents.shape[0]):
            dataset.add_document(str(row), *as_query(documents, row))
        start = time.perf_counter()
        index = seismic.SeismicIndex.build_from_dataset(
            dataset,
            n_postings=p["seismic.n_postings"],
            centroid_fraction=p["seismic.centroid_fraction"],
            min_cluster_size=p["seismic.min_cluster_size"],
            summary_energy=p["seismic.summary_energy"],
            max_fraction=p["seismic.max_fraction"],
            doc_cut=p["seismic.doc_cut"],
        )
        build_s = time.perf_counter() - start
        call.artifacts["index"].mkdir(parents=True)
        index.save(str(call.artifacts["index"] / INDEX_NAME))
        return {"build_s": build_s, "docs": float(index.len)}

    @measure(
        needs=["gen", "build"],
        params=["heap_factor", "query_cut"],
        metrics=["p50_ms", "p95_ms", "recall@10"],
    )
    def search(self, call: StageCall) -> dict[str, float]:
        """One warm-up pass, then every query timed alone; recall@10 against exact truth."""
        import numpy as np
        import scipy.sparse as sp
        import seismic

        index = seismic.SeismicIndex.load(
            str(call.artifacts["index"] / f"{INDEX_NAME}.index.seismic")
        )
        matrix = sp.load_npz(call.artifacts["corpus"] / "queries.npz")
        truth = np.load(call.artifacts["corpus"] / "truth.npy")
        options = {
            "k": TOP_K,
            "query_cut": call.params["query_cut"],
            "heap_factor": call.params["heap_factor"],
        }
        queries = [as_query(matrix, row) for row in range(matrix.shape[0])]
        for row, (components, values) in enumerate(queries):
            index.search(str(row), components, values, **options)
        times, recalls = [], []
        for row, (components, values) in enumerate(queries):
            start = time.perf_counter_ns()
            found = index.search(str(row), components, values, **options)
            times.append((time.perf_counter_ns() - start) / 1e6)
            exact = {int(doc) for doc in truth[row]}
            recalls.append(len(exact & {int(doc) for _, _, doc in found}) / len(exact))
        call.effective.update(heap_factor=options["heap_factor"], query_cut=options["query_cut"])
        return {
            "p50_ms": percentile(times, 0.5),
            "p95_ms": percentile(times, 0.95),
            "recall@10": sum(recalls) / len(recalls),
        }
