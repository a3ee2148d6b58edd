"""``benchmark-agent publish OUT``: a static site of every benchmark's history (asv's
``publish`` the model), opened from disk: no server, no script, nothing fetched.

``index.html`` lists the benchmarks with their latest run and trend; each benchmark has a page
(its metrics, its guard metrics as a table of values) and a page per charted metric: the chart
(:mod:`.history_chart`), the change points (:mod:`.changes`) and a table of every run with a
relative link to its ``report.html``. Publishing is incremental: each page is built from a
model of plain data whose hash is kept in ``OUT/.publish.json``; a page whose model did not
change is neither drawn nor written, so a new run rewrites its benchmark's pages and the index
only. Every outside text (names, labels, commit subjects) goes through :func:`_text`.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.errors import BenchError
from pytest_benchmark_agent.records import redact
from pytest_benchmark_agent.records.fsutil import atomic_write
from pytest_benchmark_agent.records.safetext import one_line
from pytest_benchmark_agent.records.series import RunPoint, Series
from pytest_benchmark_agent.report.changes import (
    BISECT_NOTE,
    HYPOTHESIS,
    Change,
    bisect_command,
    metric_changes,
    run_value,
)
from pytest_benchmark_agent.report.history_chart import TAG_COLOURS, ChartPoint, chart_svg
from pytest_benchmark_agent.report.site_manifest import (
    GENERATOR,
    check_writable,
    claim,
    file_hash,
    write_manifest,
)
from pytest_benchmark_agent.stats.changepoints import ALPHA
from pytest_benchmark_agent.stats.describe import median_interval, show_value

#: The coverage asked of each run's interval for its median.
LEVEL = 0.95
_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:.25em .6em}
th{background:#f3f3f3;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.chart svg{max-width:100%;height:auto}code{background:#f6f6f6;padding:0 .2em}
.note{background:#fff8e1;border-left:4px solid #f0b400;padding:.4em .8em}
"""


def _text(value: Any) -> str:
    """Outside text for HTML: one line (control characters gone), escaped, quotes too."""
    return html.escape(one_line(value), quote=True)


@dataclass
class Published:
    """What one publish did: the pages written, those left as they were, those removed."""

    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Site:
    """Where the site goes and what it is built from."""

    out: Path
    home: Path
    #: The root of the runs' git work tree (None outside git): bisect's FILE is relative to it.
    top: Path | None
    source: str


def slug(text: str) -> str:
    """A file name for ``text``: its safe characters, and a hash so two names never meet."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:60].strip("-.") or "x"
    return f"{safe}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def renderer_identity() -> str:
    """The package's version and a hash of the modules that draw the pages: a page drawn by
    other code is drawn again, even where its data did not change."""
    digest = hashlib.sha256()
    for module in ("site.py", "history_chart.py", "changes.py"):
        digest.update((Path(__file__).parent / module).read_bytes())
    return f"{version('pytest-benchmark-agent')} {digest.hexdigest()}"


def publish(site: Site, series: list[Series]) -> Published:
    """Write every page whose model changed, and remove the pages no benchmark has any more;
    only into an OUT that is new, empty or a site publish wrote, and never over or removing a
    file it did not write (:mod:`.site_manifest`)."""
    if site.out.exists() and not site.out.is_dir():
        raise BenchError(f"{site.out} is a file, not a folder; fix: name a folder for the site")
    owned = claim(site.out)
    site.out.mkdir(parents=True, exist_ok=True)
    done, after, files = Published(), {}, {}
    pages: dict[str, tuple[dict[str, Any], Callable[[dict[str, Any]], str]]] = {}
    summaries = []
    for one in series:
        folder = slug(one.name)
        metric_pages, summary = _benchmark_pages(site, one, folder)
        pages.update(metric_pages)
        summaries.append(summary)
    pages["index.html"] = ({"source": site.source, "benchmarks": summaries}, _index_page)
    check_writable(site.out, owned, pages)
    stamp = renderer_identity()
    for relative, (model, render) in pages.items():
        digest = hashlib.sha256(json.dumps([stamp, model], sort_keys=True).encode()).hexdigest()
        after[relative] = digest
        path = site.out / relative
        if owned.pages.get(relative) == digest and relative in owned.files:
            done.unchanged.append(relative)
            files[relative] = owned.files[relative]
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, redact.scrub_text(render(model)))
        files[relative] = file_hash(path)
        done.written.append(relative)
    for relative in sorted(set(owned.files) - set(after)):  # only what it wrote and verified
        (site.out / relative).unlink()
        done.removed.append(relative)
    write_manifest(site.out, owned, after, files)
    return done


def _benchmark_pages(site: Site, one: Series, folder: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pages of one benchmark (its own and one per charted metric) and its index row."""
    pages: dict[str, Any] = {}
    metrics = _charted(one.points)
    rows = []
    for metric in metrics:
        points, changes = metric_changes(one, metric)
        page = f"{folder}/{slug(metric)}.html"
        model = _metric_model(site, one, metric, points, changes, depth=1)
        pages[page] = (model, _metric_page)
        rows.append(
            {
                "metric": metric,
                "href": page.split("/", 1)[1],
                "runs": len(points),
                "changes": [_change_text(c) for c in changes],
            }
        )
    guards = sorted({m for p in one.points for m in p.guard_values})
    benchmark = {
        "name": one.name,
        "by_commit": one.by_commit,
        "left_out": one.left_out,
        "metrics": rows,
        "guards": guards,
        "runs": [
            _run_row(site, p, depth=1) | {"guards": {g: _guard_text(p, g) for g in guards}}
            for p in one.points
        ],
    }
    pages[f"{folder}/index.html"] = (benchmark, _benchmark_page)
    latest = one.points[-1] if one.points else None
    summary = {
        "name": one.name,
        "href": f"{folder}/index.html",
        "runs": len(one.points),
        "latest": _run_row(site, latest, depth=0) if latest else None,
        "trend": _trend(one, metrics[0]) if metrics else "no charted metric",
    }
    return pages, summary


def _charted(points: list[RunPoint]) -> list[str]:
    """The metrics with values, primary ones first, then in the order first declared."""
    seen: dict[str, bool] = {}
    for point in points:
        for metric in point.values:
            primary = bool((point.metrics.get(metric) or {}).get("primary"))
            seen[metric] = seen.get(metric, False) or primary
    return sorted(seen, key=lambda m: not seen[m])


def _trend(one: Series, metric: str) -> str:
    """The primary metric's latest figure against the first, and its latest change point."""
    points, changes = metric_changes(one, metric)
    if not points:
        return "-"
    first, last = run_value(points[0], metric), run_value(points[-1], metric)
    text = f"{metric}: {last:.4g}"
    if first and len(points) > 1:
        text += f" ({100 * (last / first - 1):+.1f}% since the first of {len(points)} runs)"
    if changes:
        text += f"; latest change point {changes[-1].range}: {changes[-1].step}"
    return text


def _change_text(change: Change) -> str:
    return f"{change.range}: {change.step}; {change.evidence}"


def _run_row(site: Site, point: RunPoint, depth: int) -> dict[str, Any]:
    """A run as a table row: its identity, commit, date and the relative link to its report."""
    report = site.home / "runs" / point.run_id / "report.html"
    here = site.out.joinpath(*["x"] * depth)
    link = os.path.relpath(report, here.resolve()) if report.is_file() else None
    return {
        "run_id": point.run_id,
        "tag": point.tag,
        "ci_gate": point.ci_gate or "-",
        "commit": point.git.sha[:10] if point.git else point.code_label,
        "subject": point.git.subject if point.git else "",
        "date": point.git.date if point.git else point.started,
        "started": point.started,
        "report": urllib.parse.quote(link) if link else None,
    }


def _guard_text(point: RunPoint, metric: str) -> str:
    values = point.guard_values.get(metric) or []
    shown = sorted({show_value(v) for v in values})
    return ", ".join(shown[:3]) + (f" (+{len(shown) - 3} more)" if len(shown) > 3 else "") or "-"


def _metric_model(
    site: Site, one: Series, metric: str, points: list[RunPoint], changes: list[Change], depth: int
) -> dict[str, Any]:
    """Everything a metric page shows, as plain data (what its hash is taken of)."""
    runs = []
    for point in points:
        low, high, coverage = median_interval(point.values[metric], LEVEL)
        runs.append(
            _run_row(site, point, depth)
            | {
                "median": run_value(point, metric),
                "low": low,
                "high": high,
                "coverage": coverage,
                "n": len(point.values[metric]),
            }
        )
    index = {p.run_id: k for k, p in enumerate(points)}
    return {
        "name": one.name,
        "metric": metric,
        "by_commit": one.by_commit,
        "runs": runs,
        "steps": [index[c.after.run_id] for c in changes],
        "changes": [
            {"text": _change_text(c), "bisect": bisect_command(c, site.top, site.home)}
            for c in changes
        ],
    }


def _page(title: str, body: list[str]) -> str:
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            GENERATOR,
            f"<title>{_text(title)}</title><style>{_STYLE}</style></head><body>",
            *body,
            "</body></html>",
            "",
        ]
    )


def _link(href: str | None, label: Any) -> str:
    """A relative link (its target already URL-quoted), or the label alone without one."""
    return f'<a href="{html.escape(href, quote=True)}">{_text(label)}</a>' if href else _text(label)


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A table of cells that are already HTML."""
    return [
        "<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>",
        *("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows),
        "</table>",
    ]


def _index_page(model: Mapping[str, Any]) -> str:
    rows = []
    for b in model["benchmarks"]:
        latest = b["latest"] or {}
        rows.append(
            [
                _link(b["href"], b["name"]),
                str(b["runs"]),
                _link(latest.get("report"), latest.get("run_id", "-")),
                _text(latest.get("tag", "-")),
                _text(latest.get("ci_gate", "-")),
                _text(latest.get("commit", "-")),
                _text(b["trend"]),
            ]
        )
    head = ["benchmark", "runs", "latest run", "its tag", "its CI gate", "its commit", "trend"]
    return _page(
        "Benchmark history",
        [
            "<h1>Benchmark history</h1>",
            f"<p>Published from {_text(model['source'])}.</p>",
            *_table(head, rows),
        ],
    )


def _benchmark_page(model: Mapping[str, Any]) -> str:
    body = [
        f"<h1>{_text(model['name'])}</h1>",
        '<p><a href="../index.html">all benchmarks</a></p>',
        "<h2>Metrics</h2>",
        *_table(
            ["metric", "runs", "change points"],
            [
                [
                    _link(m["href"], m["metric"]),
                    str(m["runs"]),
                    "<br>".join(_text(c) for c in m["changes"]) or "none found",
                ]
                for m in model["metrics"]
            ],
        ),
    ]
    if model["guards"]:
        body += ["<h2>Guard metrics</h2>", "<p>The values of each run's control, as recorded.</p>"]
        body += _table(
            ["commit", "run", *(_text(g) for g in model["guards"])],
            [
                [
                    _text(r["commit"]),
                    _link(r["report"], r["run_id"]),
                    *(_text(r["guards"][g]) for g in model["guards"]),
                ]
                for r in model["runs"]
            ],
        )
    body += _left_out(model)
    return _page(model["name"], body)


def _left_out(model: Mapping[str, Any]) -> list[str]:
    if not model["left_out"]:
        return []
    return [
        "<h2>Runs left out</h2>",
        "<ul>",
        *(f"<li>{_text(x)}</li>" for x in model["left_out"]),
        "</ul>",
    ]


def _metric_page(model: Mapping[str, Any]) -> str:
    runs = model["runs"]
    x_title = "commit (git order)" if model["by_commit"] else "run (time order)"
    svg = chart_svg(
        model["metric"],
        [
            ChartPoint(
                r["commit"][:7] if model["by_commit"] else r["started"][:16],
                r["median"],
                r["low"],
                r["high"],
                r["tag"],
            )
            for r in runs
        ],
        model["steps"],
        x_title,
    )
    body = [
        f"<h1>{_text(model['name'])}: {_text(model['metric'])}</h1>",
        '<p><a href="index.html">the benchmark</a> · '
        '<a href="../index.html">all benchmarks</a></p>',
        f'<div class="chart">{svg}</div>',
        "<p>Each point is a run: the median of its control's passed trials, with a "
        f"distribution-free interval for it (coverage {LEVEL:.0%} where the trials allow; "
        "with fewer, their range: the table gives each one's coverage). Colour: the run's tag ("
        + ", ".join(f'<span style="color:{c}">{t}</span>' for t, c in TAG_COLOURS.items())
        + ").</p>",
        *_change_list(model["changes"]),
        "<h2>Runs</h2>",
        *_runs_table(runs),
    ]
    return _page(f"{model['name']}: {model['metric']}", body)


def _change_list(changes: list[Mapping[str, Any]]) -> list[str]:
    """The change points, each with its bisect command, under the sentence saying what they
    are."""
    body = ["<h2>Change points</h2>", f'<p class="note">{_text(HYPOTHESIS)}</p>']
    if not changes:
        return [*body, f"<p>None found (E-Divisive means, permutation test at {ALPHA:g}).</p>"]
    items = [
        f"<li>{_text(c['text'])}"
        + (f"<br>{BISECT_NOTE}: <code>{_text(c['bisect'])}</code>" if c["bisect"] else "")
        + "</li>"
        for c in changes
    ]
    return [*body, "<ul>", *items, "</ul>"]


def _runs_table(runs: list[Mapping[str, Any]]) -> list[str]:
    return _table(
        ["#", "commit", "date", "subject", "run (report)", "tag", "CI gate", "median", "interval"],
        [
            [
                str(k),
                _text(r["commit"]),
                _text(r["date"]),
                _text(r["subject"]),
                _link(r["report"], r["run_id"]),
                _text(r["tag"]),
                _text(r["ci_gate"]),
                f"{r['median']:.6g}",
                f"[{r['low']:.6g}, {r['high']:.6g}] ({r['coverage']:.0%}, n {r['n']})",
            ]
            for k, r in enumerate(runs, 1)
        ],
    )
