"""``benchmark-agent publish OUT``: a static site of every benchmark's history (asv's
``publish`` the model), opened from disk: no server, no script, nothing fetched.

``index.html`` leads with the Regressions list, then per benchmark its latest answer, its
primary metric over commits and each commit's CI gate (:mod:`.site_series`); each benchmark has a
page (that chart over every commit, its metrics' latest medians per treatment, its guard metrics
as a table of values) and a page per charted metric: the chart (:mod:`.history_chart`), the
change points (:mod:`.changes`) and a table of every run with a relative link to its
``report.html``. Publishing is incremental: each page is built from a
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
import statistics
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.errors import BenchError
from pytest_benchmark_agent.records.series import RunPoint, Series
from pytest_benchmark_agent.report import site_series
from pytest_benchmark_agent.report.changes import (
    BISECT_NOTE,
    HYPOTHESIS,
    Change,
    bisect_command,
    metric_changes,
    run_value,
)
from pytest_benchmark_agent.report.history_chart import TAG_COLOURS
from pytest_benchmark_agent.report.site_manifest import (
    GENERATOR,
    check_writable,
    claim,
    file_hash,
    write_manifest,
)
from pytest_benchmark_agent.stats.changepoints import ALPHA
from pytest_benchmark_agent.stats.describe import median_interval, show_value
from pytest_benchmark_agent.stats.units import human
from pytest_benchmark_agent.util import redact
from pytest_benchmark_agent.util.fsutil import atomic_write
from pytest_benchmark_agent.util.safetext import one_line

#: The coverage asked of each run's interval for its median.
LEVEL = 0.95
#: The commits the index lists per benchmark (its page lists all).
INDEX_COMMITS = 8
_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1240px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:.2em .45em}
th{background:#f3f3f3;text-align:left}td{white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums}.wide{overflow-x:auto;max-width:100%}
td .subject{display:inline-block;max-width:12em;overflow:hidden;text-overflow:ellipsis;
vertical-align:bottom}.answer{font-size:1.1em;font-weight:bold;margin:.3em 0}
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
    drawing = ("site.py", "site_series.py", "history_chart.py", "changes.py", "plots.py")
    for module in (*drawing, "../stats/units.py"):  # units: how a median is written
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
    """The pages of one benchmark (its own and one per charted metric) and its index entry:
    the primary metric's chart over commits, the latest run's answer, its regressions."""
    pages: dict[str, Any] = {}
    metrics = _charted(one.points)
    rows, charts, regressions = [], {}, []
    for metric in metrics:
        points, changes = metric_changes(one, metric)
        page = f"{folder}/{slug(metric)}.html"
        model = _metric_model(site, one, metric, points, changes, depth=1)
        pages[page] = (model, _metric_page)
        charts[metric] = model["chart"]
        regressions += site_series.regression_items(one.name, changes, site.top, site.home)
        latest = model["chart"]["points"][-1] if model["chart"]["points"] else {}
        rows.append(
            {
                "metric": metric,
                "href": page.split("/", 1)[1],
                "runs": len(points),
                "latest": {"control": latest.get("median")} | (latest.get("treatments") or {}),
                "changes": [_change_text(c) for c in changes],
            }
        )
    guards = sorted({m for p in one.points for m in p.guard_values})
    latest_point = one.points[-1] if one.points else None
    answers = site_series.answer_lines(latest_point)
    benchmark = {
        "name": one.name,
        "by_commit": one.by_commit,
        "left_out": one.left_out,
        "metrics": rows,
        "primary": charts[metrics[0]] if metrics else None,
        "answers": answers,
        "control": latest_point.control if latest_point else "control",
        "guards": guards,
        "runs": [
            _run_row(site, p, depth=1) | {"guards": {g: _guard_text(p, g) for g in guards}}
            for p in one.points
        ],
    }
    pages[f"{folder}/index.html"] = (benchmark, _benchmark_page)
    summary = {
        "name": one.name,
        "href": f"{folder}/index.html",
        "runs": len(one.points),
        "latest": _run_row(site, latest_point, depth=0) if latest_point else None,
        "primary": benchmark["primary"],
        "answers": answers,
        "regressions": regressions,
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
                "treatments": {
                    label: statistics.median(per[metric])
                    for label, per in point.treatment_values.items()
                    if per.get(metric)
                },
            }
        )
    return {
        "name": one.name,
        "metric": metric,
        "by_commit": one.by_commit,
        "runs": runs,
        "chart": site_series.chart_model(one, metric, points, changes),
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
    """Each benchmark's latest answer and its primary metric over commits (with each commit's
    CI gate), under the Regressions list; then the table of benchmarks."""
    body = [
        "<h1>Benchmark history</h1>",
        f"<p>Published from {_text(model['source'])}.</p>",
        *site_series.regressions_html(
            [r for b in model["benchmarks"] for r in b["regressions"]], HYPOTHESIS
        ),
    ]
    rows = []
    for b in model["benchmarks"]:
        latest = b["latest"] or {}
        body.append(f"<h2>{_link(b['href'], b['name'])}</h2>")
        body += [f'<p class="answer">{_text(a)}</p>' for a in b["answers"]]
        if b["primary"]:
            body.append(site_series.chart_html(b["primary"], compact=True))
            body += site_series.commits_table(b["primary"], last=INDEX_COMMITS)
        rows.append(
            [
                _link(b["href"], b["name"]),
                str(b["runs"]),
                _link(latest.get("report"), latest.get("run_id", "-")),
                _text(latest.get("tag", "-")),
                _text(latest.get("ci_gate", "-")),
                f"<code>{_text(latest.get('commit', '-'))}</code>",
            ]
        )
    head = ["benchmark", "runs", "latest run", "its tag", "its CI gate", "its commit"]
    body += ["<h2>Benchmarks</h2>", *_table(head, rows)]
    return _page("Benchmark history", body)


def _benchmark_page(model: Mapping[str, Any]) -> str:
    """The latest answer, the primary metric over every commit, each metric's latest medians
    per treatment (in its unit) with its change points, and the guard metrics' values."""
    body = [
        f"<h1>{_text(model['name'])}</h1>",
        '<p><a href="../index.html">all benchmarks</a></p>',
        *(f'<p class="answer">{_text(a)}</p>' for a in model["answers"]),
    ]
    if model["primary"]:
        body.append(site_series.chart_html(model["primary"]))
        body += site_series.commits_table(model["primary"])
    labels = sorted({t for m in model["metrics"] for t in m["latest"]} - {"control"})
    body += [
        "<h2>Metrics</h2>",
        "<p>Each metric's medians at the latest commit (the control's, then each treatment's); "
        "its page charts it over every commit.</p>",
        *_table(
            ["metric", "runs", f"{_text(model['control'])} (control)"]
            + [*(_text(t) for t in labels), "change points"],
            [
                [
                    _link(m["href"], m["metric"]),
                    str(m["runs"]),
                    *(_text(human(m["latest"].get(t), m["metric"])) for t in ["control", *labels]),
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
    """The metric over commits (every treatment), its change points and every run."""
    chart = model["chart"]
    body = [
        f"<h1>{_text(model['name'])}: {_text(model['metric'])}</h1>",
        '<p><a href="index.html">the benchmark</a> · '
        '<a href="../index.html">all benchmarks</a></p>',
        site_series.chart_html(chart),
        "<p>Each point is a commit (a run's time, outside git): the median of its runs' control "
        "trials, pooled, with a distribution-free interval for it (the order statistics "
        f"covering at least {LEVEL:.0%} where the trials allow, with fewer their range; the "
        "table gives each run's exact coverage). Colour: the tag of the commit's latest run ("
        + ", ".join(f'<span style="color:{c}">{t}</span>' for t, c in TAG_COLOURS.items())
        + "); a line per other treatment, at its median.</p>",
        *_change_list(model["changes"]),
        "<h2>Runs</h2>",
        *_runs_table(model["metric"], model["runs"]),
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


def _runs_table(metric: str, runs: list[Mapping[str, Any]]) -> list[str]:
    """Every run: its commit, report, tag and gate, the control's median with its interval
    (and that interval's exact coverage) and each treatment's median, in the metric's unit."""
    labels = sorted({t for r in runs for t in r["treatments"]})
    head = ["commit", "subject", "run (report)", "tag / CI gate", "median"]
    head += ["interval (coverage, n)", *(f"{_text(t)} (median)" for t in labels)]
    rows = [
        [
            f"<code>{_text(r['commit'])}</code>",
            f'<span class="subject">{_text(r["subject"])}</span>',
            _link(r["report"], r["run_id"]),
            _text(f"{r['tag']} / {r['ci_gate']}"),
            _text(human(r["median"], metric)),
            _text(
                f"[{human(r['low'], metric)}, {human(r['high'], metric)}] "
                f"({r['coverage']:.0%}, n {r['n']})"
            ),
            *(_text(human(r["treatments"].get(t), metric)) for t in labels),
        ]
        for r in runs
    ]
    return ['<div class="wide">', *_table(head, rows), "</div>"]
