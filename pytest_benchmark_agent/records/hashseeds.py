"""The Python hash seeds of counted trials: which seed each block runs under, per run.

A run draws its offset from its run id, so a rerun counts under other seeds (its reproduction
can fail, as a rerun of timings can), while the offset is recorded and replayable. Kept with the
records (below the engine) because the run record names the offset and the engine applies it.
"""

from __future__ import annotations

import hashlib

#: Hash seeds of counted trials cycle through 1..HASH_SEEDS (PYTHONHASHSEED's range is 0..2^32-1).
HASH_SEEDS = 4_294_967_295


def hash_seed_base(run_id: str) -> int:
    """A run's offset into the hash seeds, drawn from its run id: another run draws other seeds
    (so a rerun's reproduction of the counts can fail, as a rerun of timings can), while every
    xdist worker of the run draws the same. Recorded as the run's ``hash_seed_base``;
    ``--bench-hash-seeds BASE`` replays it."""
    digest = hashlib.sha256(run_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % HASH_SEEDS


def hash_seed(base: int, block: int) -> int:
    """The ``PYTHONHASHSEED`` of ``block`` in a run whose offset is ``base``: 1..HASH_SEEDS."""
    return 1 + (base + block) % HASH_SEEDS
