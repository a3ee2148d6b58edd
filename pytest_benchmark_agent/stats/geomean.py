"""A suite in one number: the geometric mean of several ratios, with its interval.

pyperf and benchstat summarize many benchmarks by the geometric mean of their ratios (the only
mean under which x2 and x0.5 cancel). Here it combines ratios of one direction (metrics of one
run, or the primary metrics of a session's benchmark files). Its interval is the geometric mean
of the ratios' own interval ends: exact when the ratios' errors move together (wall time and
CPU time of the same trials), wider than needed when they are independent, so it never claims
more than the parts support (docs/benchmark/STATISTICS.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class GeoMean:
    """The geometric mean of ``n`` ratios and its interval (None when a part had none)."""

    ratio: float
    ci: tuple[float, float] | None
    n: int
    names: tuple[str, ...]

    def as_record(self) -> dict[str, object]:
        return {
            "ratio": _round(self.ratio),
            "ci": [_round(self.ci[0]), _round(self.ci[1])] if self.ci else None,
            "n": self.n,
            "of": list(self.names),
        }


def geometric_mean(
    parts: Iterable[tuple[str, float, Sequence[float] | None]],
) -> GeoMean | None:
    """The geometric mean of ``(name, ratio, interval)`` parts with a positive, finite ratio
    (one past a float's range says nothing a mean could use); None for fewer than two (one
    ratio is its own summary)."""
    kept = [(name, r, ci) for name, r, ci in parts if r is not None and 0 < r < math.inf]
    if len(kept) < 2:
        return None
    ratio = math.exp(sum(math.log(r) for _, r, _ in kept) / len(kept))
    bounded = all(
        ci is not None and len(ci) == 2 and 0 < min(ci) and max(ci) < math.inf for _, _, ci in kept
    )
    ci = None
    if bounded:
        low = math.exp(sum(math.log(c[0]) for _, _, c in kept) / len(kept))  # type: ignore[index]
        high = math.exp(sum(math.log(c[1]) for _, _, c in kept) / len(kept))  # type: ignore[index]
        ci = (low, high)
    return GeoMean(ratio, ci, len(kept), tuple(name for name, _, _ in kept))


def _round(value: float) -> float:
    return float(f"{value:.6g}")
