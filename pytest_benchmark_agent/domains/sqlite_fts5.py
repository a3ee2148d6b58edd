"""``domain: sqlite_fts5``: does merging an FTS5 index's segments make MATCH queries faster?

FTS5 writes one segment per committed transaction and normally merges them in the background
(``automerge``) and when a level overflows (``crisismerge``). The build turns both off (the
manifest requires their values, and the build reports what the table really holds) and inserts
small transactions, leaving the fragmented index a write-heavy application leaves behind. The
treatment ``fts.merge`` is applied to a copy (``none`` or ``optimize``); the search times the same
query set against each and hashes every result list, so a faster answer that differs is caught.
Python's own ``sqlite3``: no server, no downloads.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import shutil
import sqlite3
import time
from collections.abc import Iterator

from pytest_benchmark_agent.domains.api import Domain, StageCall, measure, prep
from pytest_benchmark_agent.domains.timing import percentile

TABLE = "docs"
MERGE_MODES = ("none", "optimize")
_VOCABULARY = 20_000
_DOC_WORDS = (40, 120)
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def corpus(n_docs: int, seed: int) -> Iterator[tuple[int, str]]:
    """``(rowid, text)`` of ``n_docs`` documents whose word frequencies follow a Zipf law."""
    rng = random.Random(seed)
    words = sorted(
        {"".join(rng.choices(_LETTERS, k=rng.randint(3, 9))) for _ in range(_VOCABULARY)}
    )
    rng.shuffle(words)
    weights = list(itertools.accumulate(1.0 / rank for rank in range(1, len(words) + 1)))
    for rowid in range(1, n_docs + 1):
        yield rowid, " ".join(rng.choices(words, cum_weights=weights, k=rng.randint(*_DOC_WORDS)))


def segments(conn: sqlite3.Connection) -> int:
    """Segments of the index: each one has at least one row in the ``%_idx`` table."""
    return conn.execute(f"SELECT count(DISTINCT segid) FROM {TABLE}_idx").fetchone()[0]


class SqliteFts5(Domain):
    """FTS5 segment merging against MATCH latency, at identical results."""

    manifest = {
        "corpus.n_docs": {
            "default": 5000,
            "why": "the index's size: posting lists grow with "
            "it, and with them what a merge saves per query",
        },
        "corpus.seed": {"default": 1, "why": "it fixes the documents every treatment indexes"},
        "fts.docs_per_commit": {
            "default": 20,
            "why": "FTS5 writes one segment per commit, so "
            "this sets how fragmented the unmerged index is",
        },
        "fts.automerge": {
            "default": 0,
            "why": "background merging while building changes the "
            "control's segment count (0 turns it off)",
        },
        "fts.crisismerge": {
            "default": 1999,
            "why": "a level with this many segments is merged "
            "at once, capping the control's fragmentation",
        },
        "fts.merge": {
            "default": "none",
            "why": "the merge applied after the build: none or optimize",
        },
        "n_queries": {"default": 200, "why": "the number of timed queries behind each percentile"},
        "query.seed": {"default": 1, "why": "it fixes the query set, the same for every treatment"},
    }
    metrics = {
        "p50_ms": {"direction": "lower", "primary": True, "noise_threshold": 0.01},
        "p95_ms": {"direction": "lower"},
        "results_hash": {"direction": "equal", "guard": True},
        "segments": {"direction": "lower"},
    }
    resources = {"mem_mb": 1024}

    @prep(
        produces=["index"],
        params=[
            "corpus.n_docs",
            "corpus.seed",
            "fts.docs_per_commit",
            "fts.automerge",
            "fts.crisismerge",
        ],
    )
    def build(self, call: StageCall) -> dict[str, float]:
        """Index the corpus in small transactions with FTS5's own merging as declared."""
        p = call.params
        conn = sqlite3.connect(call.artifacts["index"], isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = MEMORY")
            conn.execute(f"CREATE VIRTUAL TABLE {TABLE} USING fts5(body)")
            for key in ("automerge", "crisismerge"):
                conn.execute(
                    f"INSERT INTO {TABLE}({TABLE}, rank) VALUES (?, ?)", (key, p[f"fts.{key}"])
                )
            docs = corpus(p["corpus.n_docs"], p["corpus.seed"])
            while batch := list(itertools.islice(docs, p["fts.docs_per_commit"])):
                conn.execute("BEGIN")
                conn.executemany(f"INSERT INTO {TABLE}(rowid, body) VALUES (?, ?)", batch)
                conn.execute("COMMIT")
            stored = dict(conn.execute(f"SELECT k, v FROM {TABLE}_config"))
            call.effective.update({f"fts.{k}": stored[k] for k in ("automerge", "crisismerge")})
            return {"segments": segments(conn)}
        finally:
            conn.close()

    @prep(produces=["merged"], needs=["build"], params=["fts.merge"])
    def merge(self, call: StageCall) -> dict[str, float]:
        """Copy the built index and apply the treatment to the copy."""
        mode = call.params["fts.merge"]
        if mode not in MERGE_MODES:
            raise ValueError(f"fts.merge={mode!r}: use one of {', '.join(MERGE_MODES)}")
        shutil.copyfile(call.artifacts["index"], call.artifacts["merged"])
        conn = sqlite3.connect(call.artifacts["merged"], isolation_level=None)
        try:
            if mode == "optimize":
                conn.execute(f"INSERT INTO {TABLE}({TABLE}) VALUES ('optimize')")
            call.effective["fts.merge"] = mode
            return {"segments": segments(conn)}
        finally:
            conn.close()

    @measure(
        needs=["merge"],
        params=["n_queries", "query.seed"],
        metrics=["p50_ms", "p95_ms", "results_hash", "segments"],
    )
    def search(self, call: StageCall) -> dict[str, float]:
        """Warm up, then time each query alone (top 10 by bm25), read-only."""
        path = call.artifacts["merged"].resolve()
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            queries = self._queries(conn, call.params["n_queries"], call.params["query.seed"])
            sql = f"SELECT rowid FROM {TABLE} WHERE {TABLE} MATCH ? ORDER BY rank LIMIT 10"
            for query in queries:
                conn.execute(sql, (query,)).fetchall()
            times, digest = [], hashlib.sha256()
            for query in queries:
                start = time.perf_counter_ns()
                rows = conn.execute(sql, (query,)).fetchall()
                times.append((time.perf_counter_ns() - start) / 1e6)
                digest.update(repr(rows).encode())
            return {
                "p50_ms": percentile(times, 0.5),
                "p95_ms": percentile(times, 0.95),
                "results_hash": int(digest.hexdigest()[:13], 16),
                "segments": segments(conn),
            }
        finally:
            conn.close()

    @staticmethod
    def _queries(conn: sqlite3.Connection, count: int, seed: int) -> list[str]:
        """1-3 quoted words of a random document each: every query matches something."""
        rng = random.Random(seed)
        (n_docs,) = conn.execute(f"SELECT max(rowid) FROM {TABLE}").fetchone()
        queries = []
        for _ in range(count):
            (body,) = conn.execute(
                f"SELECT body FROM {TABLE} WHERE rowid = ?", (rng.randint(1, n_docs),)
            ).fetchone()
            words = body.split()
            queries.append(" ".join(f'"{w}"' for w in rng.sample(words, rng.randint(1, 3))))
        return queries
