"""How a metric is judged (``metrics:`` of a benchmark file): its direction, role and noise
bounds, the built-in metrics every stage reports, and the counters a measure stage may ask for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pytest_benchmark_agent.config.fields import FileModel, Float, Fraction, ReplicateCount

#: Metrics every stage reports without being asked: they can be used as fields and as primaries.
BUILTIN_METRICS = ("wall_s", "cpu_s", "peak_rss_mb")


#: Counters a measure stage may ask for (``counters:``): each becomes a built-in metric of it,
#: counted by a backend (engine/counters.py). Their default ``noise_threshold`` is
#: :data:`COUNTER_NOISE_THRESHOLD`, calibrated in docs/benchmark/STATISTICS.md.
COUNTERS = ("instructions",)


COUNTER_NOISE_THRESHOLD = 0.002


#: A counter's default ``min_replicates``: its t rule decides from 3 blocks (stats/paired.py).
COUNTER_MIN_REPLICATES = 3


class MetricSpec(FileModel):
    """How a metric is judged: its better direction, its role, and its noise and floor bounds."""

    direction: Literal["lower", "higher", "equal"] = "lower"
    primary: bool = False
    guard: bool = False
    floor: Float | None = None
    ceiling: Float | None = None
    noise_threshold: Fraction = 0.01
    reproduce_tolerance: Fraction = 0.10
    #: How far a primary metric may regress before the CI gate fails (a fraction, 0.05 or
    #: "5%"), read on the interval (judge/evidence.py); None: :func:`default_fail_threshold`.
    fail_threshold: Fraction | None = None
    #: How far this metric's run medians may move between CI jobs on the same code (a
    #: fraction): against a recorded baseline with fewer than 3 recorded runs, a change within it
    #: cannot be told from the machine. None: the documented default (judge/evidence.py).
    run_to_run: Fraction | None = None
    min_replicates: ReplicateCount = 5


#: The CI gate's default ``fail_threshold``: 5% for a sampled metric (a timing), 1% for a
#: counted one (issue 34's decision; never below the metric's noise_threshold).
SAMPLED_FAIL_THRESHOLD, COUNTED_FAIL_THRESHOLD = 0.05, 0.01


def default_fail_threshold(name: str, spec: MetricSpec) -> float:
    """A primary metric's gate threshold: its ``fail_threshold``, else 5% (1% for a counter),
    never below its ``noise_threshold``."""
    if spec.fail_threshold is not None:
        return spec.fail_threshold
    default = COUNTED_FAIL_THRESHOLD if name in COUNTERS else SAMPLED_FAIL_THRESHOLD
    return max(default, spec.noise_threshold)


def metric_role(name: str, spec: MetricSpec | None) -> str:
    """How the reports title a metric: primary, guard, built-in (measured by the engine) or
    secondary."""
    if spec is not None and spec.primary:
        return "primary"
    if spec is not None and spec.guard:
        return "guard"
    return "built-in" if name in BUILTIN_METRICS else "secondary"


def exact_metrics(specs: Mapping[str, object]) -> frozenset[str]:
    """The names of the ``direction: equal`` metrics of ``specs`` (kept as written)."""
    return frozenset(
        name for name, spec in specs.items() if getattr(spec, "direction", None) == "equal"
    )
