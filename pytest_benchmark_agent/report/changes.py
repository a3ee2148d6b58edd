"""The change points of a benchmark's metric over its series of runs, in words a reader acts on:
the commit range, the size of the step, its evidence, and the ``bisect`` command that tests it
with paired sessions. Shared by ``history --changes`` and the published pages.
"""

from __future__ import annotations

import os
import shlex
import statistics
from dataclasses import dataclass
from pathlib import Path

from pytest_benchmark_agent.records.series import RunPoint, Series
from pytest_benchmark_agent.stats.changepoints import ChangePoint, find_change_points
from pytest_benchmark_agent.stats.units import change_words, human
from pytest_benchmark_agent.stats.units import ratio as ratio_text

#: What every list of change points says about them.
HYPOTHESIS = (
    "A change point is a hypothesis, not a verdict: the runs on either side were separate "
    "sessions, so a change of the machine between them looks the same as a change of the code; "
    "benchmark-agent bisect tests it with paired sessions."
)

#: What introduces a change point's bisect command (its range is wider than the step's).
BISECT_NOTE = "test it (a commit wider each side)"


@dataclass(frozen=True)
class Change:
    """A change point placed between two runs of a series."""

    point: ChangePoint
    before: RunPoint
    after: RunPoint
    direction: str
    #: The ends handed to ``bisect``: a commit wider on each side (within the step's segments),
    #: as the split's place is uncertain too (one run off in about 1 series of 10 in
    #: docs/benchmark/STATISTICS.md's calibration); bisecting costs a session per halving.
    good: RunPoint
    bad: RunPoint
    #: The metric stepping: its name says its unit and whether "faster" or "higher" fits.
    metric: str = ""

    @property
    def worse(self) -> bool:
        """Whether the step goes against the metric's direction (a regression)."""
        ratio = self.point.ratio
        return ratio is not None and (ratio > 1) == (self.direction == "lower")

    @property
    def step(self) -> str:
        """The step in the one ratio form (after over before, :func:`.units.change_words`) and
        what it means for the metric's direction: ``x1.08, 1.08x slower (worse)``."""
        ratio = self.point.ratio
        if ratio is None:
            return "from zero"
        return (
            f"{ratio_text(ratio, 3)}, {change_words(self.metric, ratio)} "
            f"({'worse' if self.worse else 'better'})"
        )

    @property
    def range(self) -> str:
        """The commits (or run ids, without git) between which the step happened."""
        if self.before.git and self.after.git:
            return f"{self.before.git.sha[:7]}..{self.after.git.sha[:7]}"
        return f"{self.before.run_id}..{self.after.run_id}"

    @property
    def evidence(self) -> str:
        p = self.point
        return (
            f"E-Divisive permutation p = {p.p_value:.3g} ({p.permutations} permutations); "
            f"median {human(p.before, self.metric)} -> {human(p.after, self.metric)}"
        )


def run_value(point: RunPoint, metric: str) -> float | None:
    """A run's figure for ``metric`` in the series: the median of its control's passed trials."""
    values = point.values.get(metric)
    return statistics.median(values) if values else None


def metric_changes(series: Series, metric: str) -> tuple[list[RunPoint], list[Change]]:
    """The points holding ``metric`` and the change points among them. With commit order, a
    step may only fall where the commit changes."""
    points = [p for p in series.points if run_value(p, metric) is not None]
    values = [run_value(p, metric) or 0.0 for p in points]
    allowed = None
    if series.by_commit:
        allowed = [k for k in range(1, len(points)) if points[k].commit != points[k - 1].commit]
    direction = (
        str((points[-1].metrics.get(metric) or {}).get("direction", "lower")) if points else "lower"
    )
    found = find_change_points(values, allowed)
    edges = [0, *(f.index for f in found), len(points)]
    changes = [
        Change(
            f,
            points[f.index - 1],
            points[f.index],
            direction,
            *_widened(points, f.index, edges[k - 1], edges[k + 1]),
            metric,
        )
        for k, f in enumerate(found, 1)
    ]
    return points, changes


def _widened(points: list[RunPoint], index: int, low: int, high: int) -> tuple[RunPoint, RunPoint]:
    """The run of the commit before the last one ahead of the step (not before ``low``), and
    the run of the commit after the first one past it (before ``high``)."""
    good, bad = points[index - 1], points[index]
    earlier = [p for p in points[low : index - 1] if p.commit != good.commit]
    later = [p for p in points[index + 1 : high] if p.commit != bad.commit]
    return (earlier[-1] if earlier else good), (later[0] if later else bad)


def bisect_command(change: Change, top: Path | None, home: Path) -> str | None:
    """The ``benchmark-agent bisect`` command for a change's widened commit range, the
    benchmark file as a path from the repository's root ``top`` (every value quoted), or None
    without commits or a benchmark file."""
    good, bad = change.good, change.bad
    if not (good.git and bad.git and bad.source and top):
        return None
    source = Path(bad.source)
    file = os.path.relpath(source, top)
    if file.startswith(".."):
        file = str(source)
    words = ["benchmark-agent", "bisect", good.git.sha[:12], bad.git.sha[:12], file]
    return " ".join(shlex.quote(w) for w in [*words, "--home", str(home)])
