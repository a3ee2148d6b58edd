"""Embed the evaluation corpus and queries with --model and score retrieval (the measure).

Each query has exactly one relevant description; recall@10 is the share of queries whose
relevant description is among the 10 nearest by cosine similarity, MRR@10 the mean of
1/rank (0 beyond 10). Prints recall@10= and mrr@10=.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from aliases import read
from model import autocast, embed, load

SUITES = ("retrieval-recall@10",)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--suite", required=True, help="one of: " + ", ".join(SUITES))
    parser.add_argument("--precision", required=True)
    args = parser.parse_args()
    if args.suite not in SUITES:
        parser.error(f"unknown --suite {args.suite!r}")
    model = load(str(args.model))
    model.eval()
    corpus, queries = read(args.data, "corpus"), read(args.data, "queries")
    with torch.no_grad(), autocast(args.precision):
        documents = embed(model, corpus)
        asked = embed(model, [q for q, _ in queries])
    top = (asked @ documents.T).topk(10, dim=1).indices.tolist()
    ranks = [
        row.index(relevant) + 1 if relevant in row else None
        for row, (_, relevant) in zip(top, queries, strict=True)
    ]
    print(f"recall@10={sum(r is not None for r in ranks) / len(ranks)}")
    print(f"mrr@10={sum(1 / r for r in ranks if r) / len(ranks)}")
    print(f"BENCH_EFFECTIVE eval_suite={args.suite}")


if __name__ == "__main__":
    main()
