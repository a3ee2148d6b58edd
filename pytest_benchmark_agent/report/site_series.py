"""What the published site shows of a benchmark's series (asv's graphs the model): one point per
commit (several runs of a commit pool their trials), every treatment beside the control, each
commit's CI gate outcomes, the regressions among the change points, and the latest run's answer
in the reports' words (:func:`.summary_lines.comparison_text`).

Each piece is a model of plain data (what :mod:`.site` hashes to publish incrementally) and the
HTML drawn from it; outside text goes through :func:`html_text`.
"""

from __future__ import annotations

import html
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.records.series import RunPoint, Series
from pytest_benchmark_agent.report.changes import Change, bisect_command
from pytest_benchmark_agent.report.history_chart import ChartPoint, chart_svg
from pytest_benchmark_agent.report.summary_lines import comparison_text
from pytest_benchmark_agent.stats.describe import median_interval
from pytest_benchmark_agent.stats.units import human
from pytest_benchmark_agent.util.safetext import one_line

#: The coverage asked of each point's interval for its median.
LEVEL = 0.95


def html_text(value: Any) -> str:
    """Outside text for HTML: one line (control characters gone), escaped, quotes too."""
    return html.escape(one_line(value), quote=True)


def commit_groups(one: Series, points: Sequence[RunPoint]) -> list[list[RunPoint]]:
    """``points`` in runs of the same commit (in a commit-ordered series), else one each."""
    groups: list[list[RunPoint]] = []
    for point in points:
        if one.by_commit and groups and groups[-1][-1].commit == point.commit:
            groups[-1].append(point)
        else:
            groups.append([point])
    return groups


def chart_model(
    one: Series, metric: str, points: Sequence[RunPoint], changes: Sequence[Change]
) -> dict[str, Any]:
    """The chart of ``metric``: a point per commit (its runs' control trials pooled: the median
    and a distribution-free interval), each treatment's pooled median, and the change points
    placed before the commit they fall at."""
    groups = commit_groups(one, points)
    where = {p.run_id: k for k, group in enumerate(groups) for p in group}
    rows = []
    for group in groups:
        values = [v for p in group for v in p.values[metric]]
        low, high, coverage = median_interval(values, LEVEL)
        first = group[-1]
        treatments: dict[str, list[float]] = {}
        for point in group:
            for label, per in point.treatment_values.items():
                treatments.setdefault(label, []).extend(per.get(metric) or [])
        rows.append(
            {
                "label": first.git.sha[:7] if one.by_commit and first.git else first.started[:16],
                "commit": first.git.sha[:10] if first.git else first.code_label,
                "subject": first.git.subject if first.git else "",
                "date": (first.git.date if first.git else first.started)[:10],
                "runs": [p.run_id for p in group],
                "gates": [p.ci_gate or "-" for p in group],
                "tag": first.tag,
                "control": first.control,
                "median": statistics.median(values),
                "low": low,
                "high": high,
                "coverage": coverage,
                "n": len(values),
                "treatments": {t: statistics.median(v) for t, v in treatments.items() if v},
            }
        )
    return {
        "metric": metric,
        "by_commit": one.by_commit,
        "points": rows,
        "steps": sorted({where[c.after.run_id] for c in changes}),
    }


def chart_html(model: Mapping[str, Any], compact: bool = False) -> str:
    """The chart of a :func:`chart_model` as an inline ``<svg>`` in its box."""
    rows = model["points"]
    labels = sorted({t for r in rows for t in r["treatments"]})
    svg = chart_svg(
        model["metric"],
        [ChartPoint(r["label"], r["median"], r["low"], r["high"], r["tag"]) for r in rows],
        model["steps"],
        "commit (git order)" if model["by_commit"] else "run (time order)",
        treatments={t: [r["treatments"].get(t) for r in rows] for t in labels},
        control=rows[-1]["control"] if rows else "",
        compact=compact,
    )
    return f'<div class="chart">{svg}</div>'


def commits_table(model: Mapping[str, Any], last: int | None = None) -> list[str]:
    """A row per commit of the chart (the ``last`` ones, newest first): its runs, the control's
    median and each treatment's (in the metric's unit), and the CI gate outcome of each run."""
    metric, rows = model["metric"], model["points"]
    labels = sorted({t for r in rows for t in r["treatments"]})
    control = rows[-1]["control"] if rows else "control"
    head = ["commit", "date", "subject", "runs", f"{html_text(control)} (median)"]
    head += [f"{html_text(t)} (median)" for t in labels] + ["CI gate"]
    shown = list(reversed(rows))[: last or len(rows)]
    body = []
    for r in shown:
        cells = [
            f"<code>{html_text(r['commit'])}</code>",
            html_text(r["date"]),
            f'<span class="subject">{html_text(r["subject"])}</span>',
            str(len(r["runs"])),
            f'<span class="n">{html_text(human(r["median"], metric))}</span>',
            *(
                f'<span class="n">{html_text(human(r["treatments"].get(t), metric))}</span>'
                for t in labels
            ),
            html_text(", ".join(r["gates"])),
        ]
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    note = (
        f"<p>The latest {len(shown)} of {len(rows)} commits; the benchmark's page lists all.</p>"
        if len(shown) < len(rows)
        else ""
    )
    head_row = "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"
    return ['<div class="wide"><table>', head_row, *body, "</table></div>", note]


def regression_items(
    name: str, changes: Sequence[Change], top: Path | None, home: Path
) -> list[dict[str, Any]]:
    """The change points that go against their metric's direction, as plain data: the metric,
    the step in the one ratio form, the commit range, the evidence and the bisect command."""
    return [
        {
            "benchmark": name,
            "metric": change.metric,
            "range": change.range,
            "step": change.step,
            "evidence": change.evidence,
            "bisect": bisect_command(change, top, home),
        }
        for change in changes
        if change.worse
    ]


def regressions_html(items: Sequence[Mapping[str, Any]], note: str) -> list[str]:
    """The Regressions list (asv's page of them): each with its bisect command."""
    body = ["<h2>Regressions</h2>", f'<p class="note">{html_text(note)}</p>']
    if not items:
        return [*body, "<p>None among the change points found.</p>"]
    body.append("<ul>")
    for item in items:
        command = f"<br>test it: <code>{html_text(item['bisect'])}</code>" if item["bisect"] else ""
        body.append(
            f"<li><strong>{html_text(item['benchmark'])}</strong>: "
            f"<code>{html_text(item['metric'])}</code>"
            f" {html_text(item['step'])} at {html_text(item['range'])}"
            f" ({html_text(item['evidence'])}){command}</li>"
        )
    return [*body, "</ul>"]


def answer_lines(point: RunPoint | None) -> list[str]:
    """The latest run's primary comparisons in the reports' words, "" lines left out."""
    if point is None:
        return []
    primaries = [m for m, spec in point.metrics.items() if spec.get("primary")]
    lines = []
    for metric in primaries or list(point.verdicts):
        for label, verdict in (point.verdicts.get(metric) or {}).items():
            said = comparison_text(label, point.control, metric, verdict)
            if said:
                lines.append(said)
    return lines
