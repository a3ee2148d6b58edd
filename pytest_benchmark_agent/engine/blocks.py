"""How many blocks a session runs, and what a range of them waits for.

* The file's ``replicates`` (a count, or ``{min, max}`` for sequential replication).
* ``--bench-replicates N`` or ``MIN:MAX`` replaces it for one session (hyperfine's ``--runs``,
  ``--min-runs``/``--max-runs``).
* **Adaptive blocks**: a revision comparison (``--bench-against``, every bisect step) whose file
  declares no ``replicates`` runs ``{min: 8, max: 40}`` (``min: 3`` when every primary metric is
  counted), adding blocks until the CI gate can decide (:func:`.judge.sequential.until`). A
  declared count is honoured as it is.
* ``--bench-fail-threshold [METRIC=]X`` sets primary metrics' ``fail_threshold`` for one session,
  and ``--bench-bisect-midpoint METRIC=RATIO`` (what ``benchmark-agent bisect`` passes its
  steps) makes the session hunt a regression: the threshold is the midpoint between GOOD and
  BAD, and blocks are added until each interval lies wholly on one side of it.

Every change is made to the config before the plan is built, so the record holds the design
that ran, and recovery and the judge read it from there.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_benchmark_agent.config.fields import MAX_REPLICATES
from pytest_benchmark_agent.config.metric import COUNTERS
from pytest_benchmark_agent.config.models import BenchmarkConfig, ReplicateRange
from pytest_benchmark_agent.errors import ConfigError

#: The adaptive blocks' first look, its first look when every primary metric is counted (the
#: counters' t rule decides from 3 blocks), and their cap (issue 34's decision).
ADAPTIVE_MIN, ADAPTIVE_COUNTED_MIN, ADAPTIVE_MAX = 8, 3, 40


@dataclass(frozen=True)
class SessionDesign:
    """What the command line changes in every benchmark file's design for one session."""

    #: ``--bench-replicates``: a count, or (min, max).
    replicates: int | tuple[int, int] | None = None
    #: ``--bench-fail-threshold``: metric -> fraction ("" for every primary metric).
    fail_thresholds: dict[str, float] = field(default_factory=dict)
    #: ``--bench-bisect-midpoint``: metric -> the midpoint ratio between GOOD and BAD.
    midpoints: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_options(cls, option: Callable[[str], Any]) -> SessionDesign:
        """The design the session's options (``config.getoption``) give."""
        return cls(
            replicates=option("bench_replicates"),
            fail_thresholds=dict(option("bench_fail_threshold")),
            midpoints=dict(option("bench_bisect_midpoint")),
        )

    def apply(self, config: BenchmarkConfig, path: object, *, revisions: bool) -> BenchmarkConfig:
        """``config`` as this session runs it (see the module's docstring); a ConfigError
        naming the option when it names a metric the file does not declare as primary."""
        metrics = dict(config.metrics)
        primaries = [m for m, spec in metrics.items() if spec.primary]
        for option, named in (
            ("--bench-fail-threshold", self.fail_thresholds),
            ("--bench-bisect-midpoint", self.midpoints),
        ):
            unknown = sorted(m for m in named if m and m not in primaries)
            if unknown:
                raise ConfigError(
                    path,
                    [
                        (
                            option,
                            f"names {', '.join(unknown)}, not a primary metric of this file.",
                            f"name one of its primary metrics ({', '.join(primaries) or 'none'}).",
                        )
                    ],
                )
        for metric in primaries:
            threshold = self.fail_thresholds.get(metric, self.fail_thresholds.get(""))
            if metric in self.midpoints:
                threshold = abs(self.midpoints[metric] - 1)
            if threshold is not None:
                metrics[metric] = metrics[metric].model_copy(update={"fail_threshold": threshold})
        replicates = self._replicates(config, revisions, primaries)
        return config.model_copy(update={"metrics": metrics, "replicates": replicates})

    def _replicates(
        self, config: BenchmarkConfig, revisions: bool, primaries: list[str]
    ) -> int | ReplicateRange:
        until = "midpoint" if self.midpoints else None
        given = self.replicates
        if isinstance(given, int):
            return given
        if given is not None:
            return ReplicateRange(min=given[0], max=given[1], until=until)
        declared = config.replicates
        if "replicates" in config.model_fields_set or not revisions:
            if isinstance(declared, ReplicateRange) and until:
                return declared.model_copy(update={"until": until})
            return declared
        counted = bool(primaries) and all(m in COUNTERS for m in primaries)
        first = ADAPTIVE_COUNTED_MIN if counted else ADAPTIVE_MIN
        return ReplicateRange(min=first, max=ADAPTIVE_MAX, until=until or "gate")


def replicates_option(text: str) -> int | tuple[int, int]:
    """``--bench-replicates N`` or ``MIN:MAX`` (each 1..MAX_REPLICATES, MIN <= MAX)."""
    low, sep, high = text.partition(":")
    try:
        first = int(low)
        last = int(high) if sep else first
    except ValueError:
        first = last = 0
    if not (1 <= first <= last <= MAX_REPLICATES):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a count of blocks (--bench-replicates 12) or a range MIN:MAX "
            f"(--bench-replicates 8:40, adding blocks until the verdicts or the CI gate can "
            f"decide), each from 1 to {MAX_REPLICATES}, MIN <= MAX"
        )
    return (first, last) if sep else first


def fail_threshold_option(text: str) -> tuple[str, float]:
    """``--bench-fail-threshold [METRIC=]X``: X a fraction (0.05) or percentage (5%) in (0, 1]."""
    metric, sep, value = text.rpartition("=")
    number = _fraction(value)
    if number is None or not 0 < number <= 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a fraction or a percentage, for every primary metric (5%) or one "
            "(p50_ms=5%), above 0 and at most 100%"
        )
    return (metric.strip() if sep else ""), number


def midpoint_option(text: str) -> tuple[str, float]:
    """``--bench-bisect-midpoint METRIC=RATIO``: RATIO a positive ratio other than 1."""
    metric, sep, value = text.partition("=")
    number = _fraction(value)
    if not sep or not metric.strip() or number is None or number <= 0 or number == 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give METRIC=RATIO, the ratio to GOOD halfway to BAD (e.g. "
            "p50_ms=1.22); benchmark-agent bisect passes it to each step"
        )
    return metric.strip(), number


def _fraction(text: str) -> float | None:
    text = text.strip()
    try:
        number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None
