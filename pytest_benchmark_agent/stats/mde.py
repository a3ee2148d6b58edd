"""The minimum detectable effect a verdict reports: the smallest relative change the rule
detects with 80% power at the run's units, noise and level, from terms fitted by simulation.
"""

from __future__ import annotations

import math

from pytest_benchmark_agent.stats.comparison import CI_LEVEL, Comparison, relative
from pytest_benchmark_agent.stats.distributions import ndtri, stdtrit

MDE_POWER = 0.8


#: The paired MDE's terms by units n: ``(a, b)`` in ``log(1 + band) + a w + b se`` (``w`` the
#: interval's half-width, ``se`` the paired differences' standard error), fitted by simulation so
#: that the power at the reported MDE is 80% on three noise shapes alike (normal, a 10%
#: right-tail burst, 30% heavy bursts; 1,500 A/A runs of each per n):
#: ``benchmarks/stats_calibration.py --mde-table``; STATISTICS.md. A row for every n to 20 (the
#: best (a, b) move along a ridge from one n to the next), linear between the rows beyond;
#: below the first and past the last, the end rows.
MDE_TERMS = (
    (6, 1.46, 0.40),
    (7, 0.02, 4.00),
    (8, 0.04, 3.55),
    (9, 0.72, 1.70),
    (10, 0.86, 1.30),
    (11, 0.96, 1.05),
    (12, 1.08, 0.70),
    (13, 1.14, 0.60),
    (14, 1.18, 0.50),
    (15, 1.36, 0.20),
    (16, 1.24, 0.40),
    (17, 1.30, 0.25),
    (18, 1.34, 0.20),
    (19, 1.38, 0.15),
    (20, 1.38, 0.15),
    (25, 1.38, 0.10),
    (30, 1.40, 0.10),
)


def min_detectable_effect(c: Comparison, level: float, threshold: float) -> float:
    """The smallest relative effect the rule detects with 80% power at this n, noise and level
    (inf when the units can never reach the level).

    The rule needs the interval to clear the noise band and the test to pass at ``level``. By
    shift equivariance the interval's lower edge at a true effect d is d less its edge at none,
    so the MDE is the band plus the 80th percentile of that null edge: ``a w + b se`` with
    :func:`mde_terms` (no closed form holds for the inverted rank test at small n); the test's
    term scales ``w`` from the 95% interval to ``level``.
    """
    if c.smallest_p > level:
        return math.inf
    if c.half_width == 0 and c.se == 0:
        return threshold
    if c.df is not None:  # the counters' t rule: a closed form
        band = math.log1p(threshold)
        need = max(
            band + stdtrit(c.df, 1 - (1 - CI_LEVEL) / 2) * c.se, -stdtrit(c.df, level / 2) * c.se
        )
        return max(threshold, relative(need + stdtrit(c.df, MDE_POWER) * c.se, True))
    a, b = mde_terms(c.units) if c.design != "unpaired" else (1.0, ndtri(MDE_POWER))
    widen = ndtri(1 - level / 2) / ndtri(1 - (1 - CI_LEVEL) / 2)
    band = math.log1p(threshold) if c.log_scale else threshold
    k = max(band + a * c.half_width + b * c.se, a * widen * c.half_width + b * c.se)
    return max(threshold, relative(k, c.log_scale))


def mde_terms(units: int) -> tuple[float, float]:
    """The MDE's ``(a, b)`` at ``units`` paired units, from :data:`MDE_TERMS`."""
    rows = MDE_TERMS
    if units <= rows[0][0]:
        return rows[0][1], rows[0][2]
    for (n0, a0, b0), (n1, a1, b1) in zip(rows, rows[1:], strict=False):
        if units <= n1:
            f = (units - n0) / (n1 - n0)
            return a0 + f * (a1 - a0), b0 + f * (b1 - b0)
    return rows[-1][1], rows[-1][2]
