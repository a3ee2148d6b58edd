"""Build a SEISMIC index over a generated corpus and save it into a folder (prep).

Every build parameter of `SeismicIndex.build` that shapes the index is a flag,
so the benchmark file declares each one as a param and the cache keys on it.
SEISMIC's own progress output goes to stderr; stdout carries `name=value` lines.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import seismic
from sparse_corpus import DOCUMENTS, INDEX_NAME, native_stdout_to_stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True, help="folder from gen_corpus.py")
    parser.add_argument("--out", type=Path, required=True, help="index folder to create")
    parser.add_argument(
        "--n-postings",
        type=int,
        default=3500,
        help="average postings kept per component (default 3500)",
    )
    parser.add_argument(
        "--centroid-fraction",
        type=float,
        default=0.1,
        help="fraction of each posting list used as cluster centroids",
    )
    parser.add_argument("--min-cluster-size", type=int, default=2, help="smallest block")
    parser.add_argument(
        "--summary-energy",
        type=float,
        default=0.4,
        help="fraction of a block's L1 mass kept in its summary",
    )
    parser.add_argument(
        "--max-fraction",
        type=float,
        default=1.5,
        help="longest posting list, as a multiple of --n-postings",
    )
    parser.add_argument(
        "--doc-cut", type=int, default=15, help="components of a document used when clustering"
    )
    args = parser.parse_args()
    documents = args.corpus / DOCUMENTS
    if not documents.is_file():
        parser.error(f"--corpus {args.corpus} has no {DOCUMENTS}; run gen_corpus.py first")
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with native_stdout_to_stderr():
        index = seismic.SeismicIndex.build(
            str(documents),
            n_postings=args.n_postings,
            centroid_fraction=args.centroid_fraction,
            min_cluster_size=args.min_cluster_size,
            summary_energy=args.summary_energy,
            max_fraction=args.max_fraction,
            doc_cut=args.doc_cut,
            load_content=False,
        )
        build_s = time.perf_counter() - start
        index.save(str(args.out / INDEX_NAME))
    print(f"build_s={build_s}")
    print(f"docs={index.len}")
    print(f"nnz={index.nnz}")


if __name__ == "__main__":
    main()
