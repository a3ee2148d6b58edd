"""What the reference domains' measure stages share: percentiles of per-query timings."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in (0, 1]) of ``values``, which need not be sorted."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]
