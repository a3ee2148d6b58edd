"""``objective.png`` of a tune: the objective's median per point over the search space.

One tuned param: the objective against it, points breaking a constraint in red with their
region shaded, and one panel per constraint with its bound. Two or more: the first two params as
axes, colour for the objective. Drawn from the record alone; matplotlib is optional (the report
says so instead of the plot).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.report.plots import matplotlib_under
from pytest_benchmark_agent.stats.describe import describe
from pytest_benchmark_agent.tune.space import OPERATORS
from pytest_benchmark_agent.util.placeholders import as_text


def plot_objective(doc: dict[str, Any], png: Path) -> str | None:
    """Objective (median per point) over the space, with the points breaking a constraint.

    One tuned param: the objective against it, the regions around infeasible points shaded,
    and one panel per constraint with its bound. Two or more: the first two params as axes,
    colour for the objective. Returns a note instead when matplotlib is not installed.
    """
    matplotlib_under(png.parent.parent.parent)  # runs/<tune id>/objective.png
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return (
            "No plot: matplotlib is not installed (it is a dependency of "
            "pytest-benchmark-agent: `pip install matplotlib`)."
        )
    points = _plot_points(doc)
    if not points:
        return "No plot: no point has a passed trial."
    names = list(doc["search_space"])
    coord = {n: _axis(list(doc["search_space"][n])) for n in names}
    path = [coord[names[0]](step["point"][names[0]]) for step in doc["incumbents"]]
    if len(names) == 1:
        fig = _one_param_figure(plt, doc, points, coord, path)
    else:
        fig = _two_params_figure(plt, doc, points, coord, path)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return None


def _one_param_figure(
    plt: Any,
    doc: dict[str, Any],
    points: list[dict[str, Any]],
    coord: dict[str, Callable[[Any], float]],
    path: list[float],
) -> Any:
    """One tuned param: the objective against it (infeasible points red, their region shaded
    in every panel), the incumbents' path, and one panel per constraint."""
    name = list(doc["search_space"])[0]
    constraints = doc["constraints"]
    fig, axes = plt.subplots(
        1 + len(constraints),
        1,
        sharex=True,
        squeeze=False,
        figsize=(7, 3.2 + 2.2 * len(constraints)),
    )
    ax = axes[0][0]
    feasible = [p["feasible"] for p in points]
    xs = [coord[name](p["point"][name]) for p in points]
    ys = [p["objective"] for p in points]
    order = sorted(range(len(xs)), key=xs.__getitem__)
    ax.plot([xs[i] for i in order], [ys[i] for i in order], color="0.6", lw=1, zorder=1)
    for x, y, ok in zip(xs, ys, feasible, strict=True):
        ax.scatter(
            [x], [y], marker="o" if ok else "x", color="tab:blue" if ok else "tab:red", zorder=3
        )
    half = _half_gap(sorted(set(xs)))
    for x, ok in zip(xs, feasible, strict=True):
        if not ok:
            for row in axes:
                row[0].axvspan(x - half, x + half, color="tab:red", alpha=0.08, lw=0)
    path_y = [_objective_of(points, name, coord, x) for x in path]
    ax.plot(path, path_y, color="tab:green", lw=2, marker=">", zorder=2, label="path of incumbents")
    ax.scatter(
        [path[-1]], [path_y[-1]], marker="*", s=250, color="tab:green", zorder=4, label="selected"
    )
    ax.set_ylabel(f"{doc['objective']['metric']} (median)")
    ax.legend(loc="best", fontsize=8)
    ax.set_title("objective over the search space (red: breaks a constraint)", fontsize=10)
    for row, text in zip(axes[1:], constraints, strict=True):
        _constraint_panel(row[0], text, xs, points)
    axes[-1][0].set_xlabel(name)
    _ticks(axes[-1][0], list(doc["search_space"][name]))
    return fig


def _constraint_panel(cax: Any, text: str, xs: list[float], points: list[dict[str, Any]]) -> None:
    """One constraint's worst sample per point against its bound, the breaking side shaded."""
    metric, op, bound = text.split()
    cys = [p["constraint_worst"].get(text) for p in points]
    cax.scatter(
        [x for x, y in zip(xs, cys, strict=True) if y is not None],
        [y for y in cys if y is not None],
        color="tab:purple",
    )
    cax.axhline(float(bound), color="tab:red", ls="--", lw=1)
    low, high = cax.get_ylim()
    low, high = min(low, float(bound)), max(high, float(bound))
    if op in (">=", ">"):
        cax.axhspan(low, float(bound), color="tab:red", alpha=0.1)
    else:
        cax.axhspan(float(bound), high, color="tab:red", alpha=0.1)
    cax.set_ylim(low, high)
    cax.set_ylabel(f"{metric} (worst sample)")


def _two_params_figure(
    plt: Any,
    doc: dict[str, Any],
    points: list[dict[str, Any]],
    coord: dict[str, Callable[[Any], float]],
    path: list[float],
) -> Any:
    """Two or more tuned params: the first two as axes, colour for the objective, infeasible
    points as red crosses, and the incumbents' path."""
    names = list(doc["search_space"])
    x_name, y_name = names[0], names[1]
    fig, ax = plt.subplots(figsize=(7, 5.5))
    feasible = [p["feasible"] for p in points]
    xs = [coord[x_name](p["point"][x_name]) for p in points]
    ys = [coord[y_name](p["point"][y_name]) for p in points]
    values = [p["objective"] for p in points]
    scatter = ax.scatter(
        [x for x, ok in zip(xs, feasible, strict=True) if ok],
        [y for y, ok in zip(ys, feasible, strict=True) if ok],
        c=[v for v, ok in zip(values, feasible, strict=True) if ok],
        cmap="viridis_r" if doc["objective"]["direction"] == "lower" else "viridis",
        s=80,
    )
    ax.scatter(
        [x for x, ok in zip(xs, feasible, strict=True) if not ok],
        [y for y, ok in zip(ys, feasible, strict=True) if not ok],
        marker="x",
        color="tab:red",
        s=80,
        label="breaks a constraint",
    )
    fig.colorbar(scatter, ax=ax, label=f"{doc['objective']['metric']} (median)")
    py = [coord[y_name](step["point"][y_name]) for step in doc["incumbents"]]
    ax.plot(path, py, color="tab:green", lw=2, marker=">", label="path of incumbents")
    ax.scatter([path[-1]], [py[-1]], marker="*", s=300, color="tab:green", label="selected")
    ax.set_xlabel(x_name)
    ax.set_ylabel(y_name)
    _ticks(ax, list(doc["search_space"][x_name]))
    if len(names) > 2:
        ax.set_title(
            f"first two of {len(names)} tuned params (others at each point's value)",
            fontsize=10,
        )
    ax.legend(loc="best", fontsize=8)
    return fig


def _plot_points(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per evaluated point: its median objective, the worst sample of each constraint, and
    whether every sample met every constraint."""
    objective = doc["objective"]["metric"]
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for trial in doc["trials"]:
        if trial["status"] == "passed" and trial.get("point") is not None:
            grouped[trial["treatment"]].append(trial)
    out = []
    for trials in grouped.values():
        values = [t["metrics"][objective] for t in trials if objective in t["metrics"]]
        if not values:
            continue
        worst: dict[str, float] = {}
        feasible = True
        for text in doc["constraints"]:
            metric, op, bound = text.split()
            samples = [t["metrics"][metric] for t in trials if metric in t["metrics"]]
            if not samples:
                feasible = False
                continue
            worst[text] = min(samples) if op in (">=", ">") else max(samples)
            feasible = feasible and all(OPERATORS[op](v, float(bound)) for v in samples)
        out.append(
            {
                "point": trials[0]["point"],
                "objective": describe(values)["median"],
                "constraint_worst": worst,
                "feasible": feasible,
            }
        )
    return out


def _axis(values: list[Any]) -> Callable[[Any], float]:
    """Numbers plot as themselves; other values at their index on the lattice."""
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return float
    texts = [as_text(v) for v in values]
    return lambda value: float(texts.index(as_text(value)))


def _ticks(ax: Any, values: list[Any]) -> None:
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        ax.set_xticks(range(len(values)))
        ax.set_xticklabels([as_text(v) for v in values])


def _half_gap(xs: list[float]) -> float:
    gaps = [b - a for a, b in zip(xs[:-1], xs[1:], strict=True)]
    return min(gaps) / 2 if gaps else 0.5


def _objective_of(
    points: list[dict[str, Any]], name: str, coord: dict[str, Any], x: float
) -> float:
    for p in points:
        if coord[name](p["point"][name]) == x:
            return p["objective"]
    return float("nan")
