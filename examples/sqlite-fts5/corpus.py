"""Shared helpers of the FTS5 example: the synthetic corpus and the segment count.

The corpus is generated, never downloaded: a vocabulary of made-up words whose
frequencies follow a Zipf law (like real text), and documents of 50-150 tokens,
all drawn from one seeded RNG so the same seed always gives the same bytes.
"""

from __future__ import annotations

import itertools
import random
import sqlite3
from collections.abc import Iterator

TABLE = "docs"
VOCABULARY_SIZE = 30_000
ZIPF_EXPONENT = 1.07
DOC_TOKENS = (50, 150)

_ONSETS = "b c d f g h j k l m n p r s t v w z br ch dr fl gr kr pl sh st tr".split()
_VOWELS = "a e i o u ai ea ou".split()
_STRUCTURE_ROWID = 10  # FTS5 keeps its index structure record at this %_data rowid
_STRUCTURE_V2_MAGIC = b"\xff\x00\x00\x01"  # newer layout (secure-delete era)


def vocabulary(rng: random.Random, size: int = VOCABULARY_SIZE) -> list[str]:
    """Return `size` distinct pronounceable words in rank order (index 0 is the most frequent)."""
    syllables = [onset + vowel for onset, vowel in itertools.product(_ONSETS, _VOWELS)]
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        word = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def zipf_cum_weights(size: int, exponent: float = ZIPF_EXPONENT) -> list[float]:
    """Cumulative weights of a Zipf law over ranks 1..size, for `random.choices`."""
    return list(itertools.accumulate(1.0 / rank**exponent for rank in range(1, size + 1)))


def documents(n_docs: int, seed: int) -> Iterator[tuple[int, str]]:
    """Yield `(rowid, text)` for `n_docs` documents, deterministic in `seed`."""
    rng = random.Random(seed)
    words = vocabulary(rng)
    cum_weights = zipf_cum_weights(len(words))
    for rowid in range(1, n_docs + 1):
        length = rng.randint(*DOC_TOKENS)
        yield rowid, " ".join(rng.choices(words, cum_weights=cum_weights, k=length))


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """Decode one SQLite varint (big-endian, 7 bits a byte, 9th byte whole) at `pos`."""
    value = 0
    for i in range(8):
        byte = data[pos + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, pos + i + 1
    return (value << 8) | data[pos + 8], pos + 9


def count_segments(conn: sqlite3.Connection, table: str = TABLE) -> int:
    """Number of segments in the FTS5 index of `table`, read from its structure record.

    The record is a 4-byte cookie (then, in the newer layout, a 4-byte magic)
    followed by varints: number of levels, then the total number of segments.
    """
    row = conn.execute(
        f'SELECT block FROM "{table}_data" WHERE id = ?', (_STRUCTURE_ROWID,)
    ).fetchone()
    if row is None:
        return 0
    block: bytes = row[0]
    pos = 8 if block[4:8] == _STRUCTURE_V2_MAGIC else 4
    _levels, pos = _varint(block, pos)
    segments, _pos = _varint(block, pos)
    return segments
