"""Sequential replication: group-sequential boundaries from the Lan-DeMets O'Brien-Fleming-like
spending function at geometrically spaced looks, combined with Holm as in Maurer & Bretz
(2013), so stopping on a verdict keeps the error rate at alpha.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from pytest_benchmark_agent.stats.analysis import (
    Judging,
    Observation,
    RunAnalysis,
    analyze,
    inside_band,
)
from pytest_benchmark_agent.stats.comparability import (
    MetricRule,
    Verdict,
)
from pytest_benchmark_agent.stats.comparison import CI_LEVEL
from pytest_benchmark_agent.stats.distributions import ndtr, ndtri

_BOUNDARY_PATHS = 100_000


_BOUNDARY_SEED = 20240917

#: How a sequential run spends its alpha over the looks: O'Brien-Fleming-like (a declared
#: ``replicates: {min, max}`` judged on its verdicts) or Pocock's constant level (the CI gate's
#: adaptive blocks, which must be able to decide at their first look).
OBRIEN_FLEMING, POCOCK = "obrien-fleming", "pocock"


@dataclass(frozen=True)
class SequentialDecision:
    """Whether the engine may stop adding blocks, why, and the analysis at this look."""

    stop: bool
    reason: str
    analysis: RunAnalysis
    look: int
    level: float


@dataclass(frozen=True)
class Looks:
    """A sequential run's design: at least ``min_blocks`` and at most ``max_blocks`` blocks (the
    file's ``replicates: {min, max}``), and how alpha is ``spending`` over the looks between
    (:data:`OBRIEN_FLEMING` or :data:`POCOCK`)."""

    min_blocks: int
    max_blocks: int
    spending: str = OBRIEN_FLEMING


def look_schedule(min_blocks: int, max_blocks: int) -> tuple[int, ...]:
    """Blocks at which sequential replication may stop: min, then each >= 25% more, then max.

    Fewer, geometrically spaced looks keep the final look's nominal level near alpha (0.038 for
    5..20 blocks at alpha 0.05, against 0.029 with a look after every block).
    """
    looks = [min_blocks]
    while True:
        nxt = max(looks[-1] + 1, math.ceil(looks[-1] * 1.25))
        if nxt >= max_blocks:
            break
        looks.append(nxt)
    if len(looks) > 1 and max_blocks < looks[-1] * 1.25:
        looks.pop()
    if looks[-1] != max_blocks:
        looks.append(max_blocks)
    return tuple(looks)


def sequential_decision(
    observations: Mapping[str, Sequence[Observation]],
    specs: Mapping[str, MetricRule],
    treatments: Sequence[str],
    control: str,
    *,
    blocks_done: int,
    looks: Looks,
    judging: Judging | None = None,
) -> SequentialDecision:
    """Analyse after ``blocks_done`` complete blocks and say whether to stop adding blocks.

    Stopping is possible only at the looks of :func:`look_schedule`; there, verdicts use the
    O'Brien-Fleming-like nominal level of the look, so stopping on a verdict keeps the run's
    false-positive rate at ``alpha``. It stops when every primary verdict is decided (improved,
    regressed, blocked by a guard, or a CI inside the noise band) and always at ``max_blocks``.
    Between looks the analysis is still valid as a final one (a look taken there, for a run
    that must end early, spends its own share of alpha), but ``stop`` stays False.
    ``looks.spending`` :data:`POCOCK`: :func:`pocock_level` at every look, intervals at that level.
    ``judging`` defaults to alpha 0.05, seed 0 and no counters.
    """
    min_blocks, max_blocks = looks.min_blocks, looks.max_blocks
    judging = judging or Judging()
    if not 1 <= min_blocks <= max_blocks:
        raise ValueError(
            f"replicates: min={min_blocks}, max={max_blocks}: need 1 <= min <= max; "
            "fix the replicates: {min, max} of the benchmark file"
        )
    if blocks_done < min_blocks:
        raise ValueError(
            f"sequential_decision: blocks_done={blocks_done} is below min_blocks={min_blocks}; "
            "call it only once min_blocks complete blocks have run"
        )
    look = min(blocks_done, max_blocks)
    schedule = look_schedule(min_blocks, max_blocks)
    taken = tuple(k for k in schedule if k < look) + (look,)

    level_fn, ci_level = _spent(looks.spending, judging.alpha, taken, schedule, max_blocks)
    analysis = analyze(observations, specs, treatments, control, judging, level_fn, ci_level)
    level = level_fn(judging.alpha)
    if look not in schedule:
        upcoming = min(k for k in schedule if k > look)
        reason = f"{look} of {max_blocks} blocks; next look at block {upcoming}"
        return SequentialDecision(False, reason, analysis, look, level)
    open_items = _undecided(analysis, specs)
    if not open_items:
        return SequentialDecision(
            True, f"every primary verdict decided after {look} blocks", analysis, look, level
        )
    if look >= max_blocks:
        reason = f"reached max {max_blocks} blocks; undecided: {', '.join(open_items)}"
        return SequentialDecision(True, reason, analysis, look, level)
    reason = f"{look} of {max_blocks} blocks; undecided: {', '.join(open_items)}"
    return SequentialDecision(False, reason, analysis, look, level)


def _spent(
    spending: str,
    alpha: float,
    looks: tuple[int, ...],
    schedule: tuple[int, ...],
    max_blocks: int,
) -> tuple[Callable[[float], float], float]:
    """The look's nominal level for a share of alpha, and the level of its intervals."""
    if spending == POCOCK:
        return (lambda share: pocock_level(share, schedule)), 1 - pocock_level(alpha, schedule)
    if spending == OBRIEN_FLEMING:
        return (lambda share: _nominal_levels(share, looks, max_blocks)[-1]), CI_LEVEL
    raise ValueError(f"spending={spending!r}: use {OBRIEN_FLEMING!r} or {POCOCK!r}")


def _undecided(analysis: RunAnalysis, specs: Mapping[str, MetricRule]) -> list[str]:
    """The primary verdicts (every compared metric's where none is primary) more blocks could
    still change, as ``metric[treatment] (verdict)``."""
    targets = [m for m, s in specs.items() if s.primary] or [
        m for m, s in specs.items() if s.direction != "equal"
    ]
    return [
        f"{metric}[{treatment}] ({verdict.verdict})"
        for metric in targets
        for treatment, verdict in analysis.verdicts.get(metric, {}).items()
        if not _decided(verdict, specs[metric].noise_threshold)
    ]


def _decided(verdict: Verdict, threshold: float) -> bool:
    """A verdict more blocks would not be expected to change."""
    if verdict.verdict in ("improved", "regressed"):
        return True
    if verdict.verdict == "not_comparable":
        return bool(verdict.reason and verdict.reason.startswith("guard "))
    return inside_band(verdict.ci, threshold)


@lru_cache(maxsize=256)
def pocock_level(alpha: float, looks: tuple[int, ...]) -> float:
    """The one two-sided nominal level at which testing at every one of ``looks`` keeps the
    chance of any false rejection at ``alpha`` (Pocock's boundary, for looks at these block
    counts): from a fixed-seed simulation of the standardized statistics' joint null
    distribution (Brownian motion, one increment per block), the 1 - alpha quantile of their
    largest absolute value over the looks. The CI gate's adaptive blocks use it, with each
    look's interval at that level: an exact test reaches it from the first look (the
    O'Brien-Fleming-like level of a first look at 8 of 40 blocks, about 1e-5, needs 18 blocks),
    and the gate decides on the interval, so interval and test must agree."""
    rng = np.random.default_rng(_BOUNDARY_SEED)
    total = np.zeros(_BOUNDARY_PATHS)
    largest = np.zeros(_BOUNDARY_PATHS)
    for k in range(1, looks[-1] + 1):
        total += rng.standard_normal(_BOUNDARY_PATHS)
        if k in looks:
            np.maximum(largest, np.abs(total) / math.sqrt(k), out=largest)
    bound = float(np.quantile(largest, 1 - alpha))
    return 2 * ndtr(-bound)


@lru_cache(maxsize=256)
def _nominal_levels(alpha: float, looks: tuple[int, ...], max_blocks: int) -> tuple[float, ...]:
    """Two-sided nominal p thresholds at the given looks (block counts, ascending).

    Lan-DeMets O'Brien-Fleming-like spending ``a(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t))`` with
    information fraction t = k / max_blocks. The first look's level is a(t) itself; later ones
    come from a fixed-seed simulation of the joint null distribution of the standardized
    statistics (Brownian motion, one increment per block): each boundary is the one at which
    the fraction of paths first crossing there equals that look's share of alpha.
    """
    rng = np.random.default_rng(_BOUNDARY_SEED)
    z_final = -ndtri(alpha / 2)  # the normal's inverse survival
    total = np.zeros(_BOUNDARY_PATHS)
    alive = np.ones(_BOUNDARY_PATHS, dtype=bool)
    levels: list[float] = []
    for k in range(1, looks[-1] + 1):
        total += rng.standard_normal(_BOUNDARY_PATHS)
        if k not in looks:
            continue
        t = k / max_blocks
        spent = alpha if t >= 1 else 2 * ndtr(-z_final / math.sqrt(t))
        z = np.abs(total) / math.sqrt(k)
        if levels:
            need = int(round(spent * _BOUNDARY_PATHS)) - int(np.count_nonzero(~alive))
            ranked = np.sort(z[alive])[::-1]
            level = 0.0
            if need > 0:
                bound = float(ranked[need - 1] + ranked[min(need, len(ranked) - 1)]) / 2
                level = 2 * ndtr(-bound)
        else:
            level = spent
        levels.append(level)
        if level > 0:
            alive &= z <= -ndtri(level / 2)
    return tuple(levels)
