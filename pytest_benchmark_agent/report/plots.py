"""One PNG per metric beside a run's report (and its SVG, inlined by ``report.html``): every
sample of every treatment, with its blocks.

matplotlib is a dependency; should it fail to import, no file is written and the report says
so (every number is in its tables, so it is complete without the pictures). Each figure shows a
column per treatment (one dot per passed trial, the median as a bar) and a grey line through the
values of each block (its dots share an offset), so a reader sees both the spread and whether
the blocks agree. The y axis is labelled with the metric and the unit its name declares
(:mod:`.units`) and never uses offset notation (``1e6`` above the axis turned 23% into what
looked like 100%); it starts at zero unless the treatments' medians differ by more than
:data:`LOG_RATIO`, when it is logarithmic (a x0.07 treatment is not squashed against zero). A
``direction: equal`` metric (a hash) is drawn on a categorical axis only where it took two
values or more: its distinct values, verbatim, are the ticks, and there is no median bar; a hash
that never changed gets no plot (its table says all there is). matplotlib's object API is used (no
pyplot, no global backend switch).
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.records.schema import TrialRecord
from pytest_benchmark_agent.stats.comparability import Verdict
from pytest_benchmark_agent.stats.describe import MAX_MAGNITUDE, median, show_value
from pytest_benchmark_agent.stats.units import axis_label, verdict_text
from pytest_benchmark_agent.util.safetext import one_line

NO_MATPLOTLIB = (
    "matplotlib is not installed, so this report has no plots (it is a dependency: "
    "pip install matplotlib); every figure is in the tables, so the report is complete "
    "without them"
)
SINGLE_BLOCK = (
    "one trial of one configuration passed, so this report has no plots (its tables show "
    "every sample)"
)
#: The narrowest plot, in inches (about 700 pixels on a page: wide enough to read).
MIN_WIDTH = 7.0
#: Medians further apart than this factor get a logarithmic axis.
LOG_RATIO = 5.0
_JITTER = (0.0, -0.06, 0.06, -0.12, 0.12, -0.03, 0.03, -0.09, 0.09)


def matplotlib_under(home: Path) -> None:
    """Have matplotlib keep its font cache and config in the data home (``.matplotlib/``),
    not in ``$HOME/.cache/matplotlib``: the engine writes nothing outside the home. Set before
    matplotlib is first imported (it reads ``MPLCONFIGDIR`` then); a user's own is kept."""
    os.environ.setdefault("MPLCONFIGDIR", str(home / ".matplotlib"))


def plot_file(metric: str) -> str:
    return "plot-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", metric) + ".png"


@dataclass(frozen=True)
class PlotLayout:
    """How a run's figures lay out their axes: the ``exact`` metrics (``direction: equal``) on a
    categorical axis of their values, and ``variable``, what the treatments vary, as the x
    axis's label."""

    exact: Collection[str] = ()
    variable: str | None = None


def write_plots(
    folder: Path,
    trials: Sequence[TrialRecord],
    metrics: Sequence[str],
    treatments: Sequence[str],
    verdicts: Mapping[str, Mapping[str, Any]],
    layout: PlotLayout = PlotLayout(),
    svg: dict[str, str] | None = None,
) -> tuple[list[str], str | None]:
    """Write a plot per metric that has samples, laid out by ``layout``; returns the file names
    and, when plotting is not possible, the sentence the report shows instead. With ``svg``,
    each figure's SVG text is put there under its metric (for ``report.html``).

    Every run with two treatments or two blocks is plotted; a single block of a single
    configuration has nothing a picture adds to its table, so matplotlib (about half a second
    to import) is not loaded for it.
    """
    passed = [t for t in trials if t.status == "passed"]
    blocks_run = {(t.host, t.replicate, t.seed) for t in passed}
    if len(blocks_run) < 2 and len({t.treatment for t in passed}) < 2:
        return [], SINGLE_BLOCK
    matplotlib_under(folder.parent.parent)
    try:
        import matplotlib.collections  # noqa: F401  (only whether they import: _figure
        import matplotlib.figure  # noqa: F401  uses both)
    except ModuleNotFoundError:
        return [], NO_MATPLOTLIB
    except ImportError as exc:  # installed but broken (or unloaded, then imported again)
        return (
            [],
            f"matplotlib could not be imported ({exc}), so this report has no plots; "
            "every figure is in the tables, so the report is complete without them",
        )
    files = []
    for metric in metrics:
        figure = _figure(
            metric,
            trials,
            treatments,
            verdicts.get(metric, {}),
            metric in layout.exact,
            layout.variable,
        )
        if figure is None:
            continue
        name = plot_file(metric)
        temporary = folder / f".{name}.tmp"
        figure.savefig(temporary, format="png")
        os.replace(temporary, folder / name)
        files.append(name)
        if svg is not None:
            svg[metric] = _svg_text(figure)
    return files, None


def _svg_text(figure: Any) -> str:
    """The figure as an ``<svg>`` element to inline in HTML: no XML prolog, DOCTYPE or
    metadata (they name w3.org and purl.org addresses a page need not load)."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    return text[text.index("<svg") :]


def _figure(
    metric: str,
    trials: Sequence[TrialRecord],
    treatments: Sequence[str],
    verdicts: Mapping[str, Any],
    exact: bool = False,
    variable: str | None = None,
) -> Any:
    """The figure of one metric, or None when no passed trial has a value for it (or an
    ``exact`` one has a single value); an ``exact`` one's y axis is its distinct values as
    recorded (the control's first)."""
    from matplotlib.figure import Figure

    position = {label: i for i, label in enumerate(treatments)}
    recorded = _recorded(metric, trials, treatments)
    if not recorded:
        return None
    categories = _categories(recorded, position) if exact else {}
    if exact and len(categories) < 2:  # one value everywhere: a plot of it shows nothing the
        return None  # table does not (a hash given a plot was a user's complaint)
    if not exact and _beyond_the_bound(recorded):
        return None
    blocks = {
        key: {
            label: float(categories[value] if exact else value) for label, value in values.items()
        }
        for key, values in recorded.items()
    }
    ticks = [show_value(value) for value in categories]
    width = max(MIN_WIDTH, 2.0 + 1.4 * len(treatments))  # a readable page width, not a stamp
    left = 0.9 / width
    if exact:  # room for the values, verbatim, as the y labels (about 0.06 inch a character)
        margin = 0.4 + 0.06 * max(map(len, ticks))
        width, left = width + margin, (0.4 + margin) / (width + margin)
    figure = Figure(figsize=(width, 4.2), dpi=100)
    figure.subplots_adjust(left=left, right=0.97, top=0.9, bottom=0.13)
    axes = figure.subplots()
    _draw_blocks(axes, blocks, position, medians=not exact)
    if exact:
        axes.set_yticks(range(len(ticks)), [one_line(t) for t in ticks], fontsize=7)
        axes.set_ylim(-0.6, len(ticks) - 0.4)
    else:
        _value_axis(axes, blocks.values())
    axes.set_xticks(range(len(treatments)), [one_line(t) for t in treatments])
    axes.set_xlim(-0.6, len(treatments) - 0.4)
    axes.set_ylabel(axis_label(metric) + (" (log scale)" if axes.get_yscale() == "log" else ""))
    axes.set_xlabel(f"treatment ({variable})" if variable else "treatment")
    axes.grid(axis="y", alpha=0.3)
    said = ", ".join(f"{t}: {_said(v)}" for t, v in verdicts.items())
    axes.set_title(one_line(f"{metric}" + (f" ({said})" if said else "")), fontsize=9)
    return figure


def _recorded(
    metric: str, trials: Sequence[TrialRecord], treatments: Sequence[str]
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The passed trials' values of ``metric`` by block (host, replicate, seed), each block's
    by treatment."""
    recorded: dict[tuple[Any, ...], dict[str, Any]] = {}
    for trial in trials:
        value = trial.metrics.get(metric)
        if trial.status == "passed" and value is not None and trial.treatment in treatments:
            key = (trial.host, trial.replicate, trial.seed)
            recorded.setdefault(key, {})[trial.treatment] = value
    return recorded


def _beyond_the_bound(recorded: Mapping[Any, Mapping[str, Any]]) -> bool:
    """Whether a value is beyond :data:`~.describe.MAX_MAGNITUDE` (an older record's ``1e308``,
    which a trial now refuses): matplotlib's tick locator overflows on it, so the metric gets
    no plot; its table has every number."""
    return any(abs(v) > MAX_MAGNITUDE for values in recorded.values() for v in values.values())


def _categories(
    recorded: Mapping[tuple[Any, ...], Mapping[str, Any]], position: Mapping[str, int]
) -> dict[Any, int]:
    """An exact metric's distinct values as rows of the axis, in treatment order then trial
    order (the control's first)."""
    categories: dict[Any, int] = {}
    for values in sorted(recorded.values(), key=lambda v: min(map(position.__getitem__, v))):
        for label in sorted(values, key=position.__getitem__):
            categories.setdefault(values[label], len(categories))
    return categories


def _draw_blocks(
    axes: Any,
    blocks: Mapping[tuple[Any, ...], Mapping[str, float]],
    position: Mapping[str, int],
    medians: bool,
) -> None:
    """Each block's values joined by a grey line across treatments, each treatment's points
    jittered, and (``medians``) its median as a bar.

    The blocks' grey lines are one ``LineCollection``: an artist per block (a ``Line2D`` each)
    cost about half a millisecond apiece to build and draw, the largest part of what a trial
    adds to a run's end (docs/benchmark/PERFORMANCE.md).
    """
    from matplotlib.collections import LineCollection

    offsets = [_JITTER[k % len(_JITTER)] for k in range(len(blocks))]
    order = position.__getitem__
    segments = [
        [(position[t] + offset, values[t]) for t in sorted(values, key=order)]
        for offset, values in zip(offsets, blocks.values(), strict=True)
        if len(values) > 1
    ]
    if segments:
        axes.add_collection(LineCollection(segments, colors="0.82", linewidths=0.8, zorder=1))
    for label, i in position.items():
        points = [
            (i + offset, values[label])
            for offset, values in zip(offsets, blocks.values(), strict=True)
            if label in values
        ]
        if not points:
            continue
        axes.scatter([x for x, _ in points], [y for _, y in points], s=16, zorder=2)
        if medians:
            axes.hlines(
                median([y for _, y in points]),
                i - 0.25,
                i + 0.25,
                colors="black",
                linewidth=2,
                zorder=3,
            )


def _value_axis(axes: Any, blocks: Any) -> None:
    """A numeric axis a reader can trust: logarithmic when the treatments' medians differ by
    more than :data:`LOG_RATIO` (all positive), else linear from zero (for positive values)
    with plain tick labels, no offset and no scientific notation."""
    columns: dict[str, list[float]] = {}
    for values in blocks:
        for label, value in values.items():
            columns.setdefault(label, []).append(value)
    medians = [median(v) for v in columns.values()]
    everything = [x for v in columns.values() for x in v]
    positive = min(everything) > 0
    if positive and max(medians) / min(medians) > LOG_RATIO:
        log_axis(axes)
        return
    formatter = axes.yaxis.get_major_formatter()
    formatter.set_useOffset(False)
    formatter.set_scientific(False)
    if positive:
        axes.set_ylim(bottom=0, top=max(everything) * 1.08)


def log_axis(axes: Any) -> None:
    """A logarithmic axis with ticks at 1, 2 and 5 of every decade, labelled as plain numbers
    (matplotlib's default labels only the powers of ten: two ticks over a x12 change)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axes.set_yscale("log")
    axes.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axes.yaxis.set_minor_formatter(NullFormatter())


def _said(verdict: Verdict) -> str:
    """A verdict with gate 2's ratio and its interval, as in the report's tables."""
    return verdict_text(verdict)
