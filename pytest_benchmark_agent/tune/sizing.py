"""Round sizing: the fewest blocks at which a round's comparisons can be decided at all.

Gate 2's paired test respects the blocks, so with n blocks it has at most 2^n equally likely
sign patterns and its smallest two-sided p is 2/2^n (:func:`.paired.min_blocks_to_decide`).
A round of k candidates is a Holm family of m = k x (metrics compared) tests, whose first level
is alpha/m: below ``min_blocks_to_decide(alpha/m)`` blocks no candidate can be selected, however
large its gain (at the default 5 blocks, 2/32 = 0.0625 is above even a single test's 0.05).
So the tuner sizes every round: with a fixed ``replicates`` it runs as many sessions of the
file's blocks as the family needs (each session its own interleaved blocks, pooled as one
paired comparison); with ``replicates: {min, max}`` a session's blocks are capped at ``max`` and
its last look is judged at the spent level, so a round ``max`` cannot decide is refused with the
arithmetic shown; with ``seeds`` the paired units are the seeds, which more blocks do not add,
so a round too many for them is refused too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pytest_benchmark_agent.config.models import BenchmarkConfig, ReplicateRange
from pytest_benchmark_agent.stats import paired, sequential
from pytest_benchmark_agent.stats.analysis import Judging

ALPHA = 0.05


@dataclass(frozen=True)
class RoundSize:
    """How a round runs: sessions of ``per_session`` blocks each, and why (the arithmetic)."""

    sessions: int
    per_session: int
    comparisons: int
    needed: int
    why: str

    @property
    def blocks(self) -> int:
        return self.sessions * self.per_session


class Undecidable(Exception):
    """A round whose family of comparisons no number of its file's blocks can decide."""


def first_level(config: BenchmarkConfig, comparisons: int) -> float:
    """Holm's first level over ``comparisons`` tests at a session's last look: alpha/m for a
    fixed design; for ``replicates: {min, max}`` the level the O'Brien-Fleming-like spending of
    alpha/m leaves at ``max`` (as the sessions and the tuner judge it)."""
    share = ALPHA / max(comparisons, 1)
    replicates = config.replicates
    if not isinstance(replicates, ReplicateRange) or replicates.min == replicates.max:
        return share
    return sequential.sequential_decision(
        {},
        {},
        ["a", "b"],
        "a",
        blocks_done=replicates.max,
        looks=sequential.Looks(replicates.min, replicates.max),
        judging=Judging(alpha=share),
    ).level


def size_round(config: BenchmarkConfig, comparisons: int) -> RoundSize:
    """Sessions a round of ``comparisons`` Holm-corrected tests needs; :class:`Undecidable`
    (with the arithmetic and the fix) when a sequential file's ``max`` cannot decide it."""
    first = first_level(config, comparisons)
    needed = paired.min_blocks_to_decide(first)
    per_session = config.max_replicates
    spent = isinstance(config.replicates, ReplicateRange)
    arithmetic = (
        f"{comparisons} comparison(s) in Holm's family, so the first level is "
        f"{ALPHA:g}/{comparisons}{' (spent over the looks)' if spent else ''} = {first:.3g}; "
        "with n blocks the paired test's smallest "
        f"two-sided p is 2/2^n, so deciding needs n >= {needed} "
        f"(2/2^{needed} = {2 / 2**needed:.3g})"
    )
    if config.seeds is not None:  # each seed's median is one paired unit: blocks add none
        units = len(config.seeds)
        if needed > units:
            raise Undecidable(
                f"seeds: the paired units are the {units} seeds (each the median of its "
                f"replicates): {arithmetic.replace('blocks', 'units')}, and 2/2^{units} = "
                f"{2 / 2**units:.3g} is above {first:.3g}, so no candidate of this round could "
                f"be selected. Use at least {needed} seeds, or fewer candidates per round."
            )
        return RoundSize(1, per_session, comparisons, needed, arithmetic)
    if spent:
        if needed > per_session:
            raise Undecidable(
                f"replicates.max is {per_session}: {arithmetic}, and 2/2^{per_session} = "
                f"{2 / 2**per_session:.3g} is above {first:.3g}, so no candidate of this round "
                f"could be selected. Raise replicates.max to at least {needed} (the last look's "
                "level falls a little as max grows), or use a fixed replicates, which the tuner "
                "extends with sessions."
            )
        return RoundSize(1, per_session, comparisons, needed, arithmetic)
    sessions = max(1, math.ceil(needed / per_session))
    if sessions > 1:
        arithmetic += (
            f"; replicates is {per_session} per session, so the round runs {sessions} "
            f"sessions ({sessions * per_session} blocks)"
        )
    return RoundSize(sessions, per_session, comparisons, needed, arithmetic)
