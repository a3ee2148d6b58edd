"""Step changes in a metric over a series of runs: E-Divisive means with a permutation test.

The method is Matteson and James's E-Divisive (2014), as MongoDB's performance team applies it
to CI history (Daly et al., ICPE 2020): the energy distance between the values before and after
each candidate split is scaled by the sizes of both sides; the best split of a segment is kept
when fewer than ``alpha`` of ``permutations`` shuffles of that segment's values reach its
statistic, and each side is then searched again. Values are compared on a log scale when all
are positive, so a step is relative (+8% reads the same at 10 ms and at 10 s).

A change point is a hypothesis about a series of separate sessions, not a verdict: the runs were
not interleaved, so drift of the machine between them looks like a change of the code. A paired
comparison (``benchmark-agent bisect``) tests it. docs/benchmark/STATISTICS.md ("Change points")
says why this is written here rather than imported.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: The significance level a split's permutation p-value must be under to be kept.
ALPHA = 0.05
#: Shuffles per tested split: the smallest p-value reachable is 1 / (PERMUTATIONS + 1).
PERMUTATIONS = 199
#: The fewest values on each side of a split (a within-side distance needs two).
MIN_SIZE = 2
#: The shuffles' seed: the same series always gives the same change points.
SEED = 20200420


@dataclass(frozen=True)
class ChangePoint:
    """A step between ``values[index - 1]`` and ``values[index]``."""

    index: int
    statistic: float
    p_value: float
    permutations: int
    before: float
    after: float

    @property
    def ratio(self) -> float | None:
        """The median after the step over the median before it (None when that is zero)."""
        return self.after / self.before if self.before else None


def find_change_points(
    values: Sequence[float],
    allowed: Sequence[int] | None = None,
    alpha: float = ALPHA,
    permutations: int = PERMUTATIONS,
    seed: int = SEED,
) -> list[ChangePoint]:
    """The significant step changes of ``values`` (in series order), earliest first.

    ``allowed`` are the indexes a step may fall before (e.g. where the commit changes: runs of
    one commit cannot straddle a change of code); None allows every index.
    """
    data = np.asarray(values, dtype=float)
    if data.size and np.all(data > 0):
        data = np.log(data)
    splits = set(range(1, len(data)) if allowed is None else allowed)
    rng = np.random.default_rng(seed)
    found: list[tuple[int, float, float]] = []
    segments = [(0, len(data))]
    while segments:
        best = None
        for start, end in segments:
            choice = _best_split(data[start:end], [s - start for s in splits if start < s < end])
            if choice is not None and (best is None or choice[1] > best[2]):
                best = (start, end, choice[1], choice[0] + start)
        if best is None:
            break
        start, end, statistic, index = best
        p_value = _permutation_p(data[start:end], splits, start, statistic, permutations, rng)
        if p_value > alpha:
            break
        found.append((index, statistic, p_value))
        segments.remove((start, end))
        segments += [(start, index), (index, end)]
    return _described(values, sorted(found), permutations)


def _best_split(segment: np.ndarray, candidates: Sequence[int]) -> tuple[int, float] | None:
    """The candidate split of ``segment`` with the largest scaled energy distance, or None."""
    n = len(segment)
    usable = [t for t in candidates if MIN_SIZE <= t <= n - MIN_SIZE]
    if not usable:
        return None
    statistic = _statistics(segment)
    index = max(usable, key=lambda t: statistic[t])
    return index, float(statistic[index])


def _statistics(segment: np.ndarray) -> np.ndarray:
    """Q(t) for every split t of ``segment`` (nan where a side has fewer than two values):
    t(n-t)/n times (2/(t(n-t)) cross - within-left / C(t,2) - within-right / C(n-t,2))."""
    n = len(segment)
    upper = np.triu(np.abs(segment[:, None] - segment[None, :]), 1)
    left = np.concatenate(([0.0], np.cumsum(upper.sum(axis=0))))  # pairs inside [0, t)
    right = np.concatenate((np.cumsum(upper.sum(axis=1)[::-1])[::-1], [0.0]))  # inside [t, n)
    t = np.arange(n + 1, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        cross = left[n] - left - right
        energy = (
            2 * cross / (t * (n - t))
            - left / (t * (t - 1) / 2)
            - right / ((n - t) * (n - t - 1) / 2)
        )
        return t * (n - t) / n * energy


def _permutation_p(
    segment: np.ndarray,
    splits: set[int],
    start: int,
    observed: float,
    permutations: int,
    rng: np.random.Generator,
) -> float:
    """The share of shuffles of ``segment`` whose best split reaches ``observed`` (the observed
    order counted as one of them, so never zero)."""
    candidates = [s - start for s in splits if start < s < start + len(segment)]
    reached = 0
    for _ in range(permutations):
        choice = _best_split(rng.permutation(segment), candidates)
        reached += choice is not None and choice[1] >= observed
    return (reached + 1) / (permutations + 1)


def _described(
    values: Sequence[float], found: list[tuple[int, float, float]], permutations: int
) -> list[ChangePoint]:
    """Each change point with the medians of the segments on either side of it."""
    edges = [0, *(index for index, _, _ in found), len(values)]
    points = []
    for k, (index, statistic, p_value) in enumerate(found, 1):
        before = statistics.median(values[edges[k - 1] : index])
        after = statistics.median(values[index : edges[k + 1]])
        points.append(ChangePoint(index, statistic, p_value, permutations, before, after))
    return points
