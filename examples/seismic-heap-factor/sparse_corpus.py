"""Shared helpers of the SEISMIC example: corpus file names, readers, and quiet native output.

A corpus folder holds `documents.jsonl` and `queries.jsonl` in the JSONL format
SEISMIC reads (one `{"id": int, "content": str, "vector": {token: weight}}` per
line) and `groundtruth.npy`, the exact top-10 document ids of every query (one
row per query, best first).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

DOCUMENTS = "documents.jsonl"
QUERIES = "queries.jsonl"
GROUND_TRUTH = "groundtruth.npy"
INDEX_NAME = "index"  # SEISMIC saves `<name>.index.seismic`
INDEX_FILE = INDEX_NAME + ".index.seismic"


def read_queries(path: Path, string_dtype: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Read a queries JSONL file as `(query_id, components, weights)` arrays SEISMIC accepts."""
    queries = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            vector: dict[str, float] = record["vector"]
            queries.append(
                (
                    str(record["id"]),
                    np.array(list(vector), dtype=string_dtype),
                    np.array(list(vector.values()), dtype=np.float32),
                )
            )
    return queries


@contextlib.contextmanager
def native_stdout_to_stderr() -> Iterator[None]:
    """Send what native code prints on file descriptor 1 to stderr while the block runs.

    SEISMIC's Rust core prints progress lines ("Number of rows: 2000") on stdout,
    where the benchmark engine reads metrics; they belong on stderr.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
