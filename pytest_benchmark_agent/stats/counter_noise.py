"""Each counting backend's noise: the floor under the counters' verdict rule.

Counts of instructions are nearly deterministic, so a run's own blocks can agree more closely
than the backend can promise; the rule for counted metrics (``stats/paired.py``) never takes
an sd of a block's log ratio below the floor of the backend that counted it. Kept apart from the
backends themselves (``engine/counters.py``) so that the judge, which sits below the engine,
can read it.
"""

from __future__ import annotations

#: Each backend's noise: the floor of the sd of a block's log ratio that the counters' verdict
#: rule (stats/paired.py, ``counted_t_test``) assumes, however closely a run's blocks agree.
#: cachegrind counted the A/A pair of every block identically to 161 instructions of 85M (2e-6,
#: quiet and loaded: docs/benchmark/STATISTICS.md); 0.05% is far above that, and low enough that
#: an A/A run of 3 blocks shows an interval inside the 0.2% default band (half-width 0.12%).
#: perf counts interrupts' and page faults' user-space instructions too: no PMU here to measure
#: it, so twice cachegrind's floor (an A/A run needs 4 blocks to show inside the band).
NOISE_FLOORS = {"cachegrind": 0.0005, "perf": 0.001}


def noise_floor(label: str | None) -> float | None:
    """:data:`NOISE_FLOORS` of the backend a trial record names (``counted_by``: ``cachegrind
    3.19.0``); None for a label of no known backend (its counts are judged as timings are)."""
    name = (label or "").split(" ", 1)[0]
    return NOISE_FLOORS.get(name)
