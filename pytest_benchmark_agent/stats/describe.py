"""Descriptive statistics of a run's samples (the inferential analysis lives in analysis.py).

A ``direction: equal`` metric (a checksum, a hash) is described by its distinct values and how
often each occurred, never by a mean, a median or a CV: its values are identities, not numbers.

A recorded number is any finite float: a trial refuses one beyond :data:`MAX_MAGNITUDE`, but an
older record or an import may hold ``1e308``. The summaries here cannot overflow on it: a value
that does not fit a float (the stdev of ``-1e308`` and ``1e308``, a ratio of ``1e150`` to
``1e-300``) is recorded as none, never raised and never ``inf``.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

#: An integer as written in canonical form (no sign but ``-``, no leading zero): kept as an
#: ``int``; ``007`` or ``+7`` stay text, so the value reads back exactly as it was written.
INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
#: The largest magnitude a trial records: its square, summed over any sample count the engine
#: runs, is still a finite float, so every variance, test statistic and ratio of two recorded
#: values computes (engine/metrics refuses a value beyond it, naming the metric).
MAX_MAGNITUDE = 1e150


def show_value(value: Any) -> str:
    """A recorded value as the stage wrote it: an int's every digit, a str verbatim (quoted
    when it reads as an integer, so a JSON ``"7"`` is not taken for the int 7), a float in the
    shortest spelling that reads back as it (``4242`` for 4242.0)."""
    if isinstance(value, str):
        return json.dumps(value) if INTEGER.fullmatch(value) else value
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    return str(value)


def describe(values: Sequence[Any]) -> dict[str, Any]:
    """n, median, mean, stdev, cv (stdev / |mean|), min and max of one treatment's samples;
    values that are text (an exact metric's hashes) get :func:`describe_exact` instead."""
    n = len(values)
    if n == 0:
        return {"n": 0}
    if any(isinstance(value, str) for value in values):
        return describe_exact(values)
    mean, stdev = _mean_stdev(values)
    return {
        "n": n,
        "median": _round(median(values)),
        "mean": _round(mean),
        "stdev": _round(stdev),
        "cv": _finite_round(stdev / abs(mean)) if mean and stdev is not None else None,
        "min": _round(min(values)),
        "max": _round(max(values)),
    }


def _mean_stdev(values: Sequence[float]) -> tuple[float, float | None]:
    """The mean and sample stdev of ``values``; where their sum overflows a float they are
    computed on the values scaled down by a power of two (exact), and a stdev that does not fit
    a float even so is None."""
    try:
        mean = statistics.fmean(values)
        return mean, statistics.stdev(values) if len(values) > 1 else 0.0
    except OverflowError:
        exponent = math.frexp(max(abs(value) for value in values))[1]
        scaled = [math.ldexp(value, -exponent) for value in values]
        mean = math.ldexp(statistics.fmean(scaled), exponent)  # at most the largest value
        try:
            return mean, math.ldexp(statistics.stdev(scaled), exponent)
        except OverflowError:
            return mean, None


def median(values: Sequence[float]) -> float:
    """The median of ``values``, the middle two halved before they are added (the same float
    as their sum halved, which overflows for two values near the float limit)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return ordered[middle - 1] / 2 + ordered[middle] / 2


def describe_exact(values: Sequence[Any]) -> dict[str, Any]:
    """n, the number of distinct values, and each value as recorded with its count (the most
    common first, ties in the order they first occurred)."""
    counts = Counter(values)
    return {
        "n": len(values),
        "distinct": len(counts),
        "values": [{"value": value, "count": count} for value, count in counts.most_common()],
    }


def values_text(row: Mapping[str, Any], quote: str = "") -> str:
    """A :func:`describe_exact` row as text, each value verbatim: ``3f2a x4, 9c01 x1``
    (``quote`` wraps each value, e.g. a backtick for markdown)."""
    return (
        ", ".join(
            f"{quote}{show_value(item['value'])}{quote} x{item['count']}"
            for item in row.get("values") or []
        )
        or "-"
    )


def median_ratio(treatment: Mapping[str, Any], control: Mapping[str, Any]) -> float | None:
    """Treatment median over control median (None when either side is empty or zero)."""
    if not treatment.get("n") or not control.get("n") or not control["median"]:
        return None
    return _finite_round(treatment["median"] / control["median"])


def _round(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.6g}")


def _finite_round(value: float) -> float | None:
    """``value`` rounded, or None when a quotient overflowed to ``inf``."""
    return _round(value) if math.isfinite(value) else None


def median_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """A distribution-free interval for the median of ``values``: the order statistics
    ``(k, n+1-k)`` with the largest ``k`` whose coverage, from the binomial(n, 1/2), is at least
    ``level``; returns (low, high, its coverage). Below six values no pair reaches 95%: the
    range (min, max) is returned with the coverage it has."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("no values")
    k, coverage = 1, 1 - 2 * 0.5**n
    while k + 1 <= n // 2:
        wider = 1 - 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n
        if wider < level:
            break
        k, coverage = k + 1, wider
    return ordered[k - 1], ordered[n - k], coverage


#: Tukey's fences: a value beyond this many interquartile ranges outside the quartiles.
TUKEY_K = 1.5


def tukey_outliers(values: Sequence[float]) -> int:
    """How many of ``values`` lie outside Tukey's fences (``TUKEY_K`` interquartile ranges
    beyond the quartiles), as hyperfine and criterion count them; 0 for fewer than 4 values."""
    if len(values) < 4:
        return 0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    low, high = q1 - TUKEY_K * (q3 - q1), q3 + TUKEY_K * (q3 - q1)
    return sum(1 for value in values if value < low or value > high)
