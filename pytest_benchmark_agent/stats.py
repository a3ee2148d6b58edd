"""Descriptive statistics of a run's samples (the inferential analysis lives in analysis.py)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any


def describe(values: Sequence[float]) -> dict[str, Any]:
    """n, median, mean, stdev, cv (stdev / |mean|), min and max of one treatment's samples."""
    n = len(values)
    if n == 0:
        return {"n": 0}
    mean = statistics.fmean(values)
    stdev = statistics.stdev(values) if n > 1 else 0.0
    return {"n": n, "median": _round(statistics.median(values)), "mean": _round(mean),
            "stdev": _round(stdev), "cv": _round(stdev / abs(mean)) if mean else None,
            "min": _round(min(values)), "max": _round(max(values))}


def median_ratio(treatment: dict[str, Any], control: dict[str, Any]) -> float | None:
    """Treatment median over control median (None when either side is empty or zero)."""
    if not treatment.get("n") or not control.get("n") or not control["median"]:
        return None
    return _round(treatment["median"] / control["median"])


def _round(value: float) -> float:
    return float(f"{value:.6g}")
