"""The unpaired fallback of gate 2, for incomplete blocks: Mann-Whitney U with an independent
bootstrap of the ratio of medians (drift between blocks does not cancel).
"""

from __future__ import annotations

import math

import numpy as np

from pytest_benchmark_agent.stats.comparison import CI_LEVEL, Comparison, relative
from pytest_benchmark_agent.stats.distributions import ndtri

BOOTSTRAP_RESAMPLES = 4000  # the unpaired fallback's bootstrap of the ratio of medians


def unpaired_test(
    n: tuple[int, int],
    c: np.ndarray,
    t: np.ndarray,
    log_scale: bool,
    rng: np.random.Generator,
    median_ratio: float | None,
    note: str,
) -> Comparison:
    """Fallback without blocks: Mann-Whitney U and an independent bootstrap of median ratio."""
    from scipy import stats  # only this fallback needs scipy.stats, the slowest import here

    p = float(stats.mannwhitneyu(t, c, alternative="two-sided").pvalue)
    effect = float(np.median(t) - np.median(c))
    t_boot = np.median(t[rng.integers(0, len(t), (BOOTSTRAP_RESAMPLES, len(t)))], axis=1)
    c_boot = np.median(c[rng.integers(0, len(c), (BOOTSTRAP_RESAMPLES, len(c)))], axis=1)
    boot = t_boot - c_boot
    lo, hi = np.quantile(boot, [(1 - CI_LEVEL) / 2, (1 + CI_LEVEL) / 2])
    return Comparison(
        n,
        effect=relative(effect, log_scale),
        ci=(1 + relative(float(lo), log_scale), 1 + relative(float(hi), log_scale)),
        p=p,
        half_width=float(hi - lo) / 2,
        se=float(hi - lo) / 2 / ndtri(1 - (1 - CI_LEVEL) / 2),
        smallest_p=2 / math.comb(len(c) + len(t), len(c)),
        log_scale=log_scale,
        test="Mann-Whitney U",
        design="unpaired",
        units=min(n),
        median_ratio=median_ratio,
        note=note,
    )
