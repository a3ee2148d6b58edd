"""The paired tests of gate 2: the block-swap rank test on paired units (blocks or seeds),
exact up to :data:`EXACT_BLOCKS` units, with its interval; and the counters' paired t rule on
log ratios, its sd floored at the backend's noise. Both compare within units, so drift and a
position effect balanced by the plan cancel.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pytest_benchmark_agent.stats.comparability import (
    Refusal,
    Refused,
)
from pytest_benchmark_agent.stats.comparison import CI_LEVEL, Comparison, relative
from pytest_benchmark_agent.stats.distributions import stdtr, stdtrit

#: Blocks on each side of a block whose values set its local level (drift removal).
WINDOW = 2


#: Up to this many units every label swap is enumerated (an exact p); beyond, random swaps.
EXACT_BLOCKS = 12


RANDOM_SWAPS = 4000


_BISECTIONS = 26


@dataclass(frozen=True, eq=False)
class PairedUnits:
    """One comparison's paired units (blocks or seeds) on the test's scale, one value per unit
    on each side, with what its :class:`Comparison` reports beside the test: the trials counted
    per side (``n``), the ``design``, the ratio of medians and the caveat ``note``."""

    n: tuple[int, int]
    c: np.ndarray
    t: np.ndarray
    design: str
    median_ratio: float | None
    note: str | None


def min_blocks_to_decide(level: float) -> int:
    """The fewest blocks at which an exact test that respects the blocks can reach ``level``:
    with n blocks it has at most 2^n equally likely label patterns, so its smallest two-sided p
    is 2 / 2^n, and it needs 2 / 2^n <= level."""
    if not 0 < level < 1:
        raise ValueError(f"level={level} must lie strictly between 0 and 1")
    return max(1, math.ceil(math.log2(2 / level) - 1e-12))


def _levels(c: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Each block's local level: the median of both sides' values in the ``2 WINDOW + 1``
    blocks around it (moved inward at the ends). Symmetric in the two labels, so swapping labels
    inside a block leaves it unchanged, and slow drift is removed before ranking."""
    size = len(c)
    width = min(size, 2 * WINDOW + 1)
    starts = np.clip(np.arange(size) - WINDOW, 0, size - width)
    both = np.stack([c, t], axis=1)
    windows = both[starts[:, None] + np.arange(width)]
    return np.median(windows.reshape(size, -1), axis=1)


def _rank_diffs(c: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per block, the treatment's rank minus the control's among all 2n drift-removed values
    (midranks for ties): the block's share of the rank-sum statistic."""
    level = _levels(c, t)
    pooled = np.concatenate([c - level, t - level])
    values, inverse, counts = np.unique(pooled, return_inverse=True, return_counts=True)
    midranks = np.cumsum(counts) - (counts - 1) / 2
    ranks = midranks[inverse]
    return ranks[len(c) :] - ranks[: len(c)]


def _swap_signs(size: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """Label swaps over ``size`` blocks as signs (-1: swapped): all 2^size when few (exact),
    else :data:`RANDOM_SWAPS` random ones; and whether the set is exhaustive."""
    if size <= EXACT_BLOCKS:
        codes = np.arange(2**size)[:, None]
        bits = (codes >> np.arange(size)) & 1
        return 1.0 - 2.0 * bits, True
    return np.where(rng.random((RANDOM_SWAPS, size)) < 0.5, -1.0, 1.0), False


def _swap_p(diffs: np.ndarray, signs: np.ndarray, exhaustive: bool) -> float:
    """Two-sided p of the rank-sum statistic over the label swaps (never 0: the observed
    labelling is one of the exhaustive patterns, and a random set counts it once more)."""
    observed = abs(float(diffs.sum()))
    sims = np.abs(signs @ diffs)
    extreme = int(np.count_nonzero(sims >= observed - 1e-9 * max(1.0, observed)))
    if exhaustive:
        return extreme / len(signs)
    return (1 + extreme) / (1 + len(signs))


def rank_test(
    units: PairedUnits,
    log_scale: bool,
    rng: np.random.Generator,
    ci_level: float = CI_LEVEL,
) -> Comparison:
    """The block-swap rank test on paired units (blocks or seeds) and its interval.

    ``units.c`` and ``units.t`` are the two sides on the test's scale. The test ranks
    all 2n drift-removed values together (as Mann-Whitney would) but draws its reference
    distribution only from swaps of the labels inside units, so it is exact at any n and drift
    or a position effect balanced by the plan cannot become a treatment effect. The effect is
    the shift at which the statistic is zero; the interval (at ``ci_level``, 95% unless a
    sequential look asks for its own level) inverts the test where it can reach that level
    (2 / 2^n <= 1 - ci_level), else it is Student's t interval on the mean paired difference.
    """
    c, t = units.c, units.t
    size = len(c)
    if size < 2:
        return _too_few(units.n, units.design)
    swaps, exhaustive = _swap_signs(size, rng)
    d = t - c
    p = _swap_p(_rank_diffs(c, t), swaps, exhaustive)
    smallest = 2.0 / 2**size if exhaustive else 1.0 / (1 + len(swaps))
    effect, lo, hi, interval = _shift_interval(c, t, swaps, exhaustive, smallest, ci_level)
    return Comparison(
        units.n,
        effect=relative(effect, log_scale),
        ci=(1 + relative(lo, log_scale), 1 + relative(hi, log_scale)),
        p=p,
        half_width=(hi - lo) / 2,
        se=float(d.std(ddof=1)) / math.sqrt(size),
        smallest_p=smallest,
        log_scale=log_scale,
        test=f"block-swap rank test ({'exact' if exhaustive else f'{RANDOM_SWAPS} swaps'}; "
        f"{interval})",
        design=units.design,
        note=units.note,
        units=size,
        median_ratio=units.median_ratio,
    )


def _too_few(n: tuple[int, int], design: str) -> Comparison:
    """The refusal of a paired test given fewer than 2 units."""
    return Comparison(
        n,
        refusal=Refused(Refusal.TOO_SMALL, f"a paired test needs at least 2 {design.split()[1]}"),
    )


def _shift_interval(
    c: np.ndarray,
    t: np.ndarray,
    swaps: np.ndarray,
    exhaustive: bool,
    smallest: float,
    ci_level: float = CI_LEVEL,
) -> tuple[float, float, float, str]:
    """The rank test's effect (the shift at which its statistic is zero) and interval on the
    test's scale, with how the interval was made: the inverted test where it can reach
    ``ci_level`` (its ``smallest`` p allows), else Student's t interval on the mean paired
    difference."""
    d = t - c

    def stat(shift: float) -> float:
        return float(_rank_diffs(c, t - shift).sum())

    span = float(d.max() - d.min()) or max(abs(float(d.max())), 1e-12)
    lo_edge, hi_edge = float(d.min()) - span, float(d.max()) + span
    effect = _root(stat, lo_edge, hi_edge)
    alpha_ci = 1 - ci_level
    if smallest <= alpha_ci:

        def accepted(shift: float) -> bool:
            return _swap_p(_rank_diffs(c, t - shift), swaps, exhaustive) > alpha_ci

        lo = _edge_of(accepted, effect, lo_edge)
        hi = _edge_of(accepted, effect, hi_edge)
        return effect, lo, hi, "inverted test"
    size = len(c)
    mean = float(d.mean())
    half = stdtrit(size - 1, 1 - alpha_ci / 2) * float(d.std(ddof=1)) / math.sqrt(size)
    return effect, min(mean - half, effect), max(mean + half, effect), "t interval"


def counted_t_test(units: PairedUnits, floor: float, ci_level: float = CI_LEVEL) -> Comparison:
    """The counters' rule: Student's paired t on the log ratios, its sd floored at ``floor``.

    Counts of instructions hardly vary between the two runs of a block (the same program, the
    same hash seed), so the exact rank test's 2 / 2^n floor, not the noise, is what stops a
    decision at 3-5 blocks. A parametric rule has no such floor; flooring the sd at the
    backend's calibrated noise keeps a run whose blocks agree by chance (or exactly) from
    claiming an interval narrower than the backend can measure. Calibrated under load in
    docs/benchmark/STATISTICS.md ("Counters decide at three blocks").
    """
    size = len(units.c)
    if size < 2:
        return _too_few(units.n, units.design)
    d = units.t - units.c
    mean = float(d.mean())
    sd = max(float(d.std(ddof=1)), floor)
    se = sd / math.sqrt(size)
    df = size - 1
    p = min(1.0, 2 * stdtr(df, -abs(mean) / se))
    half = stdtrit(df, 1 - (1 - ci_level) / 2) * se
    return Comparison(
        units.n,
        effect=math.expm1(mean),
        ci=(math.exp(mean - half), math.exp(mean + half)),
        p=p,
        half_width=half,
        se=se,
        smallest_p=0.0,
        log_scale=True,
        test=f"paired t on log ratios (sd floored at the counter's noise {floor:.3%})",
        design=units.design,
        note=units.note,
        units=size,
        df=df,
        median_ratio=units.median_ratio,
    )


def _root(stat: Callable[[float], float], lo: float, hi: float) -> float:
    """The middle of the shifts where the (non-increasing) ``stat`` crosses zero."""

    def crossing(strict: bool) -> float:
        a, b = lo, hi
        for _ in range(_BISECTIONS):
            mid = (a + b) / 2
            value = stat(mid)
            if value > 0 or (not strict and value == 0):
                a = mid
            else:
                b = mid
        return (a + b) / 2

    return (crossing(True) + crossing(False)) / 2


def _edge_of(accepted: Callable[[float], bool], inside: float, outside: float) -> float:
    """The boundary between the accepted shift ``inside`` and the rejected ``outside``."""
    if accepted(outside):
        return outside
    a, b = inside, outside
    for _ in range(_BISECTIONS):
        mid = (a + b) / 2
        if accepted(mid):
            a = mid
        else:
            b = mid
    return (a + b) / 2
