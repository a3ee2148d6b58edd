"""When a comparison is refused or a guard fails, whatever the statistics would say.

These rules need no numpy, so :mod:`.judge` applies them to a run with nothing to compare (a
cached session measuring one treatment, a smoke run below ``min_replicates``) without importing
:mod:`.analysis`, whose numpy import costs more than such a session's whole budget; the
analysis applies the same functions, so both give the same records in the same words.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

DIRECTIONS = ("lower", "higher", "equal")


class MetricRule(Protocol):
    """The attributes of a metric's config that the analysis reads."""

    direction: str
    primary: bool
    guard: bool
    floor: float | None
    ceiling: float | None
    noise_threshold: float
    min_replicates: int


@dataclass(frozen=True)
class Verdict:
    """The verdict on one metric for one treatment against the control."""

    verdict: str
    ratio: float | None = None
    ci: tuple[float, float] | None = None
    p: float | None = None
    p_holm: float | None = None
    reason: str | None = None
    n: tuple[int, int] = (0, 0)
    mde: float | None = None
    test: str | None = None
    design: str | None = None
    units: int = 0
    level: float | None = None
    median_ratio: float | None = None

    def as_record(self) -> dict:
        """Plain-Python mapping for results.yaml (lists, floats, no numpy scalars)."""
        return {
            "verdict": self.verdict,
            "ratio": self.ratio,
            "ci": list(self.ci) if self.ci is not None else None,
            "p": self.p,
            "p_holm": self.p_holm,
            "reason": self.reason,
            "n": list(self.n),
            "mde": self.mde,
            "test": self.test,
            "design": self.design,
            "units": self.units,
            "level": self.level,
            "median_ratio": self.median_ratio,
        }


def refusal(spec: MetricRule, n: tuple[int, int]) -> str | None:
    """Why a comparison of ``n`` = (control, treatment) finite samples is refused before any
    test, or None: a side without samples, or (except for ``equal`` metrics, compared from one
    sample) fewer than ``min_replicates``."""
    if not min(n):
        return f"no samples for the {'control' if not n[0] else 'treatment'}"
    if spec.direction != "equal" and min(n) < spec.min_replicates:
        return f"too few replicates (n={min(n)}, needed {spec.min_replicates})"
    return None


def guard_failures(metric: str, spec: MetricRule, values: Sequence[float],
                   compared: Verdict | None) -> list[str]:
    """Why a treatment fails guard ``metric``: no samples, its median past the floor or ceiling,
    and, for a ``guard`` metric with its verdict against the control (``compared``; None for the
    control itself), a regression or a comparison that could not be made."""
    if not values:
        return [f"guard {metric} has no samples"]
    failures = []
    median = statistics.median(values)
    if spec.floor is not None and median < spec.floor:
        failures.append(f"guard {metric} median {median:g} is below its floor {spec.floor:g}")
    if spec.ceiling is not None and median > spec.ceiling:
        failures.append(f"guard {metric} median {median:g} is above its ceiling {spec.ceiling:g}")
    if compared is None or not spec.guard:
        return failures
    if compared.verdict == "regressed":
        detail = compared.reason or f"ratio {compared.ratio:.4g}"
        failures.append(f"guard {metric} regressed ({detail})")
    elif compared.verdict == "not_comparable":
        failures.append(f"guard {metric} could not be checked ({compared.reason})")
    return failures
