"""The chart of one metric over a benchmark's runs, as SVG text for a published page.

x is the series order (commit order from git, else time); y each commit's median (its runs
pooled) with its distribution-free interval, coloured by its tag; a line per other treatment; a
dashed line at each change point and the median of each segment between them, each named in
the legend; the metric's unit on the axis, logarithmic where the medians differ more than x5.
matplotlib's object API with the Agg canvas (no pyplot, no global backend); its cache goes
where the caller points ``MPLCONFIGDIR`` (publish: under the data home), imported only when a
chart is drawn.
"""

from __future__ import annotations

import io
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_benchmark_agent.report.plots import log_axis
from pytest_benchmark_agent.stats.units import axis_label
from pytest_benchmark_agent.util.safetext import one_line

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


#: Each treatment's line beside the control's points (colours no tag uses).
TREATMENT_COLOURS = ("#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
#: Medians further apart than this factor get a logarithmic axis (as the reports' plots).
LOG_RATIO = 5.0


def chart_svg(
    metric: str,
    points: Sequence[ChartPoint],
    steps: Sequence[int],
    x_title: str,
    *,
    treatments: Mapping[str, Sequence[float | None]] | None = None,
    control: str = "",
    compact: bool = False,
) -> str:
    """The chart as an ``<svg>`` element (no XML prolog or metadata), ``steps`` being the
    indexes of the points each change point falls before, ``treatments`` each other
    treatment's median per point (None where a point has none). Text is never read as
    mathtext (a ``$`` in a label is a dollar), and the SVG's ids are salted alike on every
    call, so the same input gives the same bytes. Every text drawn goes through the printer's
    rules (:func:`.safetext.one_line`): no control or bidi character reaches the SVG, nor a
    missing-glyph warning of matplotlib quoting it."""
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False, "svg.hashsalt": "benchmark-agent"}):
        return _draw(metric, points, steps, x_title, treatments or {}, control, compact)


def _draw(
    metric: str,
    points: Sequence[ChartPoint],
    steps: Sequence[int],
    x_title: str,
    treatments: Mapping[str, Sequence[float | None]],
    control: str,
    compact: bool,
) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    width = max(8.0, min(16.0, 0.45 * len(points) + 3))
    figure = Figure(figsize=(width, 3.6 if compact else 4.6), dpi=100)
    FigureCanvasAgg(figure)
    figure.subplots_adjust(left=0.9 / width, right=0.98, top=0.9, bottom=0.2)
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
    for k, medians in enumerate(treatments.values()):
        colour = TREATMENT_COLOURS[k % len(TREATMENT_COLOURS)]
        shown = [(x, m) for x, m in zip(xs, medians, strict=True) if m is not None]
        axes.plot([x for x, _ in shown], [m for _, m in shown], marker="s", color=colour, zorder=3)
    _axes_text(axes, metric, points, treatments, x_title)
    axes.legend(handles=_legend(points, steps, treatments, control), fontsize=8, loc="best")
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = re.sub(r"<metadata>.*?</metadata>", "", buffer.getvalue(), flags=re.S)
    return text[text.index("<svg") :]


def _axes_text(
    axes: Any,
    metric: str,
    points: Sequence[ChartPoint],
    treatments: Mapping[str, Sequence[float | None]],
    x_title: str,
) -> None:
    """Ticks (upright while few: a short sha reads level), the value axis (logarithmic with
    1-2-5 ticks where the medians differ by more than :data:`LOG_RATIO`, else plain numbers)
    and the labels with the metric's unit."""
    xs = list(range(len(points)))
    every = max(1, -(-len(points) // MAX_TICKS))
    rotation = 0 if len(points) <= 12 else 45
    labels = [one_line(p.label) for p in points][::every]
    axes.set_xticks(
        xs[::every], labels, rotation=rotation, fontsize=8, ha="center" if not rotation else "right"
    )
    axes.set_xlim(-0.6, len(points) - 0.4)
    medians = [p.median for p in points] + [m for v in treatments.values() for m in v if m]
    if medians and min(medians) > 0 and max(medians) / min(medians) > LOG_RATIO:
        log_axis(axes)
        low = min([p.low for p in points if p.low > 0] + medians)
        axes.set_ylim(low / 1.3, max([p.high for p in points] + medians) * 1.3)  # a tick each end
    else:
        formatter = axes.yaxis.get_major_formatter()
        formatter.set_useOffset(False)
        formatter.set_scientific(False)
    scale = " (log scale)" if axes.get_yscale() == "log" else ""
    axes.set_ylabel(one_line(axis_label(metric) + scale))
    axes.set_xlabel(one_line(x_title))
    axes.grid(axis="y", alpha=0.3)
    axes.set_title(
        one_line(f"{metric}: medians per {'commit' if 'commit' in x_title else 'run'}"),
        fontsize=10,
    )


def _legend(
    points: Sequence[ChartPoint],
    steps: Sequence[int],
    treatments: Mapping[str, Sequence[float | None]],
    control: str,
) -> list[Any]:
    """What every mark means: the control's points by tag, the segments' median line, the
    change points and each treatment's line."""
    from matplotlib.lines import Line2D

    named = f"{control}: " if control and treatments else ""
    handles = [
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            color=TAG_COLOURS.get(t, _OTHER),
            label=one_line(named + t),
        )
        for t in sorted({p.tag for p in points})
    ]
    handles.append(Line2D([], [], color="0.35", linewidth=1.5, label="median between changes"))
    if steps:
        handles.append(Line2D([], [], color="#d62728", linestyle="--", label="change point"))
    for k, label in enumerate(treatments):
        colour = TREATMENT_COLOURS[k % len(TREATMENT_COLOURS)]
        shown = one_line(f"{label} (treatment)")
        handles.append(Line2D([], [], marker="s", color=colour, label=shown))
    return handles
