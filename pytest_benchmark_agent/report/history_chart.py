"""The chart of one metric over a benchmark's runs, as SVG text for a published page.

x is the series order (commit order from git, else time); y each run's median with its
distribution-free interval; a point per run coloured by its tag; a dashed line at each change
point and the median of each segment between them. matplotlib's object API with the Agg
canvas (no pyplot, no global backend); its cache goes where the caller points
``MPLCONFIGDIR`` (publish: under the data home), imported only when a chart is drawn.
"""

from __future__ import annotations

import io
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_benchmark_agent.records.safetext import one_line
from pytest_benchmark_agent.stats.units import axis_label

#: A colour per reliability tag (matplotlib's palette), so a point says how far to trust it.
TAG_COLOURS = {
    "RELIABLE": "#2ca02c",
    "QUALIFIED": "#1f77b4",
    "EXPLORATORY": "#ff7f0e",
    "UNRELIABLE": "#d62728",
}
_OTHER = "#7f7f7f"
#: At most this many x tick labels (every k-th run past it).
MAX_TICKS = 24


@dataclass(frozen=True)
class ChartPoint:
    """One run on the chart."""

    label: str
    median: float
    low: float
    high: float
    tag: str


def chart_svg(metric: str, points: Sequence[ChartPoint], steps: Sequence[int], x_title: str) -> str:
    """The chart as an ``<svg>`` element (no XML prolog or metadata), ``steps`` being the
    indexes of the points each change point falls before. Text is never read as mathtext (a
    ``$`` in a label is a dollar), and the SVG's ids are salted alike on every call, so the
    same input gives the same bytes. Every text drawn goes through the printer's rules
    (:func:`.safetext.one_line`): no control or bidi character reaches the SVG, nor a
    missing-glyph warning of matplotlib quoting it."""
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False, "svg.hashsalt": "benchmark-agent"}):
        return _draw(metric, points, steps, x_title)


def _draw(metric: str, points: Sequence[ChartPoint], steps: Sequence[int], x_title: str) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    figure = Figure(figsize=(max(6.0, min(16.0, 0.45 * len(points) + 3)), 4.2), dpi=100)
    FigureCanvasAgg(figure)
    figure.subplots_adjust(left=0.1, right=0.98, top=0.9, bottom=0.24)
    axes = figure.subplots()
    xs = list(range(len(points)))
    for x, point in zip(xs, points, strict=True):
        colour = TAG_COLOURS.get(point.tag, _OTHER)
        axes.vlines(x, point.low, point.high, colors=colour, linewidth=1.2, alpha=0.7)
        axes.scatter([x], [point.median], s=36, color=colour, zorder=3, edgecolors="black")
    edges = [0, *steps, len(points)]
    for start, end in zip(edges, edges[1:], strict=False):
        if end > start:
            level = statistics.median(p.median for p in points[start:end])
            axes.hlines(level, start - 0.3, end - 0.7, colors="0.35", linewidth=1.5, zorder=2)
    for index in steps:
        axes.axvline(index - 0.5, color="#d62728", linestyle="--", linewidth=1.5)
    every = max(1, -(-len(points) // MAX_TICKS))
    labels = [one_line(p.label) for p in points]
    axes.set_xticks(xs[::every], labels[::every], rotation=60, fontsize=7)
    axes.set_xlim(-0.6, len(points) - 0.4)
    formatter = axes.yaxis.get_major_formatter()
    formatter.set_useOffset(False)
    formatter.set_scientific(False)
    axes.set_ylabel(one_line(f"{axis_label(metric)}: run medians"))
    axes.set_xlabel(one_line(x_title))
    axes.grid(axis="y", alpha=0.3)
    shown = sorted({p.tag for p in points})
    handles = [
        Line2D(
            [], [], marker="o", linestyle="", color=TAG_COLOURS.get(t, _OTHER), label=one_line(t)
        )
        for t in shown
    ]
    if steps:
        handles.append(Line2D([], [], color="#d62728", linestyle="--", label="change point"))
    axes.legend(handles=handles, fontsize=7, loc="best")
    axes.set_title(one_line(metric), fontsize=10)
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = re.sub(r"<metadata>.*?</metadata>", "", buffer.getvalue(), flags=re.S)
    return text[text.index("<svg") :]
