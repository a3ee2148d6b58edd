"""The outcome of one metric x treatment comparison, as a test leaves it before Holm's
correction and the guards make it a verdict (stats/analysis.py), and the scales it is on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pytest_benchmark_agent.stats.comparability import Refused

#: The level of every verdict's interval of the ratio.
CI_LEVEL = 0.95

Key = tuple[int, "int | None"]  # (replicate, seed): the block a sample belongs to


@dataclass
class Comparison:
    """Test outcome of one metric x treatment, before Holm and guards turn it into a verdict."""

    n: tuple[int, int]
    refusal: Refused | None = None
    effect: float = 0.0  # relative change (treatment - control) / |control|
    ci: tuple[float, float] | None = None
    p: float | None = None
    half_width: float = 0.0  # half the interval's width on the test's scale
    se: float = 0.0  # the estimate's standard error on the test's scale (the MDE's noise term)
    smallest_p: float = 0.0  # the smallest p the test can give with these units
    log_scale: bool = True
    test: str | None = None
    design: str | None = None
    units: int = 0
    median_ratio: float | None = None
    mismatch: str | None = None  # direction "equal": what differs from the control
    note: str | None = None  # a caveat about the design actually used
    df: int | None = None  # the counters' t rule: its degrees of freedom (None: the rank test)


def relative(x: float, log_scale: bool) -> float:
    """A test-scale effect as a relative change (inf past a float's range: an MDE at a tiny
    sequential level can be thousands of standard errors)."""
    if not log_scale:
        return x
    try:
        return math.expm1(x)
    except OverflowError:
        return math.inf
