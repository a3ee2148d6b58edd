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

#: What every list of change points says about them.
HYPOTHESIS = (
    "A change point is a hypothesis, not a verdict: the runs on either side were separate "
    "sessions, so a change of the machine between them looks the same as a change of the code; "
    "benchmark-agent bisect tests it with paired sessions."
)


@dataclass(frozen=True)
class Change:
    """A change point placed between two runs of a series."""

    point: ChangePoint
    before: RunPoint
    after: RunPoint
    direction: str

    @property
    def step(self) -> str:
        """The step as a signed percentage and what it means for the metric's direction."""
        ratio = self.point.ratio
        if ratio is None:
            return "from zero"
        worse = (ratio > 1) == (self.direction == "lower")
        return f"{100 * (ratio - 1):+.1f}% ({'worse' if worse else 'better'})"

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
            f"median {p.before:.4g} -> {p.after:.4g}"
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
    changes = [
        Change(found, points[found.index - 1], points[found.index], direction)
        for found in find_change_points(values, allowed)
    ]
    return points, changes


def bisect_command(change: Change, repo: Path, home: Path) -> str | None:
    """The ``benchmark-agent bisect`` command for a change's commit range (every value quoted),
    or None without commits or a benchmark file."""
    before, after = change.before, change.after
    if not (before.git and after.git and after.source):
        return None
    source = Path(after.source)
    try:
        file = os.path.relpath(source, repo.resolve())
    except ValueError:  # another drive
        file = str(source)
    if file.startswith(".."):
        file = str(source)
    words = ["benchmark-agent", "bisect", before.git.sha[:12], after.git.sha[:12], file]
    return " ".join(shlex.quote(w) for w in [*words, "--home", str(home)])
