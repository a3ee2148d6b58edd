"""Build the example's FTS5 index so that it holds many segments (the prep stage).

FTS5 writes one new segment per committed transaction and normally merges them
in the background ("automerge") and in emergencies ("crisismerge"). Both are
turned off here and documents go in by small transactions, so the index ends up
in the fragmented state a write-heavy application leaves behind. Prints
`segments=<n>`.
"""

from __future__ import annotations

import argparse
import itertools
import sqlite3
from pathlib import Path

from corpus import TABLE, count_segments, documents

# The most segments FTS5 allows before it must merge (its FTS5_MAX_SEGMENT is 2000).
_CRISISMERGE_OFF = 1999


def build(n_docs: int, seed: int, out: Path, docs_per_commit: int) -> int:
    """Write the corpus into a fresh database at `out`; return its segment count."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    conn = sqlite3.connect(out, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = MEMORY")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute(f"CREATE VIRTUAL TABLE {TABLE} USING fts5(body)")
        conn.execute(f"INSERT INTO {TABLE}({TABLE}, rank) VALUES ('automerge', 0)")
        conn.execute(
            f"INSERT INTO {TABLE}({TABLE}, rank) VALUES ('crisismerge', ?)", (_CRISISMERGE_OFF,)
        )
        docs = documents(n_docs, seed)
        while batch := list(itertools.islice(docs, docs_per_commit)):
            conn.execute("BEGIN")
            conn.executemany(f"INSERT INTO {TABLE}(rowid, body) VALUES (?, ?)", batch)
            conn.execute("COMMIT")
        return count_segments(conn)
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, required=True, help="number of documents")
    parser.add_argument("--seed", type=int, required=True, help="corpus RNG seed")
    parser.add_argument("--out", type=Path, required=True, help="database file to create")
    parser.add_argument(
        "--docs-per-commit",
        type=int,
        default=20,
        help="documents per transaction, so one segment per this many (default 20)",
    )
    args = parser.parse_args()
    if args.docs < 1 or args.docs_per_commit < 1:
        parser.error("--docs and --docs-per-commit must be at least 1")
    print(f"segments={build(args.docs, args.seed, args.out, args.docs_per_commit)}")


if __name__ == "__main__":
    main()
