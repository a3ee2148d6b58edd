"""``report.html``: the run's report as one self-contained page (criterion's report the model).

Beside ``report.md`` and with the same content a person looks for first: per metric a summary
table (in human units, :mod:`.units`), gate 2's verdict with its ratio and 95% interval, and the
samples' plot inlined as SVG; then What Went Wrong, the hosts, the preps and the environment.
It opens from disk with no server: the style is inline, there are no scripts, and nothing is
fetched (no ``src`` or ``href`` leaves the page except the record's own files beside it).

User text is escaped with :func:`html.escape` (a hostile name cannot open a tag), and the page
goes through ``redact.scrub_text`` like the Markdown one.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_benchmark_agent.config.metric import metric_role
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.report.headline import headline
from pytest_benchmark_agent.stats.comparability import Verdict
from pytest_benchmark_agent.stats.describe import values_text
from pytest_benchmark_agent.stats.units import human, interval, p_value, pct, ratio, unit_of
from pytest_benchmark_agent.util.placeholders import as_text
from pytest_benchmark_agent.util.safetext import one_line

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1240px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:.2em .45em}
th{background:#f3f3f3;text-align:left;white-space:nowrap}td{white-space:nowrap}
td:last-child{white-space:normal}td.n{text-align:right;font-variant-numeric:tabular-nums}
.wide{overflow-x:auto;max-width:100%}
.answer{font-size:1.2em;margin:.8em 0;padding:.5em .8em;background:#f6f8fa;
border-left:4px solid #888}.answer p{margin:.2em 0}.answer .about{font-size:.75em}
.warn{background:#fff8e1;border-left:4px solid #f0b400;padding:.3em .8em;margin:.3em 0}
.verdict{font-weight:bold}.improved{color:#17692b}.regressed{color:#a3141d}
.tag{display:inline-block;padding:0 .5em;border-radius:3px;background:#eee;font-weight:bold}
.plot svg{max-width:100%;height:auto}code{background:#f6f6f6;padding:0 .2em}
.wrong li{margin:.2em 0}
"""


def render_html(
    run: RunRecord,
    svgs: Mapping[str, str] | None = None,
    plot_note: str | None = None,
    *,
    wrong: Sequence[str],
) -> str:
    """The whole page; ``svgs`` maps a metric to its inline plot (``plots.write_plots``),
    ``wrong`` is the run's What Went Wrong (the Markdown report's list, shown alike)."""
    e = _text
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(run.name)}: {e(run.run_id)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{e(run.name)} <small>{e(run.run_id)}</small></h1>",
        *_answer(run),
        *_head_table(run),
        "<h2>Results</h2>",
    ]
    if not run.one_configuration:
        parts.append(
            f"<p>Each treatment is compared with the control <code>{e(run.control)}</code> "
            "within blocks. <b>ratio</b> is gate 2's estimate of treatment / control (the "
            "centre of its 95% interval), the one figure quoted everywhere for a comparison; "
            "the medians are in the tables.</p>"
        )
    parts += _metrics(run, svgs or {})
    if plot_note:
        parts.append(f"<p>Plots: {e(plot_note)}.</p>")
    parts += ['<h2>What Went Wrong</h2><ul class="wrong">']
    parts += [f"<li>{_prose(item)}</li>" for item in wrong]
    parts += ["</ul>", *_controls(run), *_hosts_and_preps(run)]
    parts += ["<h2>Environment</h2>", _environment(run), "</body></html>"]
    return "\n".join(parts) + "\n"


def _answer(run: RunRecord) -> list[str]:
    """The answer first (:mod:`.headline`): each primary comparison, its verdict coloured, the
    tag, the CI gate and the machine's warnings, before any table."""
    said = headline(run)
    parts = ['<div class="answer">']
    for answer in said.answers:
        word = answer.rsplit(" - ", 1)[-1]
        style = f' class="verdict {word}"' if word in ("improved", "regressed") else ""
        parts.append(f"<p{style}>{_text(answer)}</p>")
    about = f'Tag: <span class="tag">{_text(said.tag)}</span>'
    about += f" ({_text(said.tag_reason)})" if said.tag_reason else ""
    if said.gate:
        about += f"<br>CI gate: <b>{_text(said.gate)}</b>"
        about += f": {_text(said.gate_reason)}" if said.gate_reason else ""
    parts.append(f'<p class="about">{about}</p>')
    parts.append("</div>")
    return parts + [f'<p class="warn">Machine: {_text(w)}</p>' for w in said.warnings]


def _head_table(run: RunRecord) -> list[str]:
    """The run at a glance: hypothesis, treatments, state, tag, trials, times, its files."""
    e = _text
    return [
        "<table>",
        _row("Hypothesis", e(run.model.hypothesis or "(none stated)")),
        _row("Treatment", _treatments(run)),
        _row("State", e(run.state + (f" ({run.stop_reason})" if run.stop_reason else ""))),
        _row(
            "Tag",
            f'<span class="tag">{e(run.tag)}</span>'
            + "".join(f"<br>{e(reason)}" for reason in run.tag_reasons),
        ),
        _row("Trials", e(", ".join(f"{k}: {v}" for k, v in sorted(run.counts.items())))),
        _row("Started / ended (UTC)", e(f"{run.started} / {run.ended}")),
        _row(
            "Record",
            '<a href="results.yaml">results.yaml</a>, <a href="config.yaml">config.yaml</a>, '
            '<a href="report.md">report.md</a>',
        ),
        "</table>",
    ]


def _controls(run: RunRecord) -> list[str]:
    """Every declared parameter, its value and whether it is the treatment variable."""
    parts = ["<h2>Controls</h2>", "<table><tr><th>param</th><th>value</th><th>role</th></tr>"]
    for name, value in run.model.params.items():
        role, shown = "CONTROL", f"<code>{_text(as_text(value))}</code>"
        if name == run.treatment_variable:  # every treatment's value, not the control's alone
            role, shown = "TREATMENT", _treatment_values(run)
        parts.append(f"<tr><td><code>{_text(name)}</code></td><td>{shown}</td><td>{role}</td></tr>")
    return [*parts, "</table>"]


def _hosts_and_preps(run: RunRecord) -> list[str]:
    """Which hosts measured, whether measurements overlapped, and each prep's fate."""
    parts = ["<h2>Hosts and preps</h2><ul>"]
    parts.append(f"<li>Hosts: {_text(', '.join(run.hosts()) or '(none recorded)')}</li>")
    overlaps = run.overlapping_measurements()
    parts.append(f"<li>Measurement windows: {len(overlaps)} overlap(s) on a host</li>")
    for prep in run.preps:
        parts.append(
            f"<li>prep <code>{_text(prep.stage)}</code> {_text(prep.action)} "
            f"(<code>{_text(prep.signature[:12])}</code>)</li>"
        )
    return [*parts, "</ul>"]


def _metrics(run: RunRecord, svgs: Mapping[str, str]) -> list[str]:
    """Per metric: its heading, summary table, verdicts and plot."""
    specs = run.model.metrics
    parts: list[str] = []
    for metric, per in run.summary.items():
        spec = specs.get(metric)
        role = metric_role(metric, spec)
        direction = spec.direction if spec else "lower"
        better = "must equal" if direction == "equal" else f"{direction} is better"
        unit = unit_of(metric)
        parts.append(
            f"<h3><code>{_text(metric)}</code> ({role}, {better}"
            + (f", {_text(unit)}" if unit else "")
            + ")</h3>"
        )
        verdicts = run.verdicts.get(metric, {})
        parts += _summary(run, metric, per, verdicts, direction, role == "guard")
        if metric in svgs:
            parts.append(f'<div class="plot">{svgs[metric]}</div>')
    if not parts:
        parts = ["<p>No trial passed, so there is nothing to summarize.</p>"]
    return parts


#: A metric's descriptive figures in its table, and a guard's (no statistics).
_FIGURES = ("median", "mean", "stdev", "cv", "min", "max")
_GUARD_FIGURES = ("median", "min", "max")


def _summary(
    run: RunRecord,
    metric: str,
    per: Mapping[str, Any],
    verdicts: Mapping[str, Verdict],
    direction: str,
    guard: bool,
) -> list[str]:
    """The metric's table: descriptive figures per treatment and, for a comparison, the
    verdict, its ratio and interval (a guard's: only its bounds' verdict, no statistics)."""
    compared = not run.one_configuration and bool(verdicts)  # a built-in is not judged
    if direction == "equal":
        head = ["treatment", "n", "values (count of each)"]
    elif guard:
        head = ["treatment", "n", "median", "min", "max"]
    else:
        head = ["treatment", "n", "median", "mean", "stdev", "CV", "min", "max"]
    if compared:
        head += (
            ["verdict", "why"]
            if direction == "equal" or guard
            else ["verdict", "ratio", "95% CI", "p", "p (Holm)", "MDE", "why"]
        )
    rows = ['<div class="wide"><table><tr>' + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for label, row in per.items():
        cells = [
            f"<code>{_text(label)}</code>" + (" (control)" if label == run.control else ""),
            _num(row.get("n", 0)),
        ]
        if direction == "equal":
            cells.append(_text(values_text(row)))
        else:
            keys = _GUARD_FIGURES if guard else _FIGURES
            cells += [
                _num(pct(row.get(k)) if k == "cv" else human(row.get(k), metric)) for k in keys
            ]
        if compared:
            cells += _verdict_cells(verdicts.get(label), direction == "equal" or guard)
        cells = [c if c.startswith("<td") else f"<td>{c}</td>" for c in cells]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return rows + ["</table></div>"]


def _verdict_cells(v: Verdict | None, bounds_only: bool) -> list[str]:
    """A verdict's cells: its word, and (unless only its bounds are judged) its ratio,
    interval, p-values and MDE; then why."""
    if v is None:
        return ["-"] + ([] if bounds_only else [_num("-")] * 5) + ["-"]
    cells = [f'<span class="verdict {_text(v.verdict)}">{_text(v.word)}</span>']
    if not bounds_only:
        cells += [
            _num(ratio(v.ratio)),
            _num(interval(v.ci)),
            _num(p_value(v.p)),  # uncorrected, beside Holm's, as report.md has both
            _num(p_value(v.p_holm)),
            _num(pct(v.mde)),
        ]
    return [*cells, _text(v.reason or "-")]


def _treatments(run: RunRecord) -> str:
    if run.one_configuration:
        return f"one configuration, <code>{_text(run.control)}</code>"
    return f"<code>{_text(run.treatment_variable)}</code> = {_treatment_values(run)}"


def _treatment_values(run: RunRecord) -> str:
    """Every treatment's value, the control's marked."""
    return ", ".join(
        f"<code>{_text(t)}</code>" + (" (control)" if t == run.control else "")
        for t in run.treatments
    )


def _environment(run: RunRecord) -> str:
    fingerprint = run.fingerprint or {}
    env = fingerprint.get("env") or {}
    items = [
        f"<li>{_text(k)}: {_text(v)}</li>"
        for k, v in env.items()
        if isinstance(v, (str, int, float))
    ]
    packages = env.get("packages") or {}
    if packages:
        items.append(
            "<li>packages: " + _text(", ".join(f"{k} {v}" for k, v in packages.items())) + "</li>"
        )
    devices = (fingerprint.get("accelerator") or {}).get("devices") or []
    items.append(
        "<li>accelerator: " + _text(", ".join(str(d.get("name")) for d in devices) or "none")
    )
    return "<ul>" + "".join(items) + "</ul>" if items else "<p>(no fingerprint recorded)</p>"


def _row(name: str, value: str) -> str:
    return f"<tr><th>{name}</th><td>{value}</td></tr>"


def _text(value: Any) -> str:
    """User text: one line, HTML-escaped (quotes too: it may sit in an attribute)."""
    return html.escape(one_line(value), quote=True)


def _prose(item: str) -> str:
    """A What Went Wrong line (written for Markdown) as HTML: its Markdown escapes undone,
    then escaped for HTML, its code spans as ``<code>``."""
    plain = item.replace("&lt;", "<").replace("&gt;", ">").replace("\\|", "|")
    plain = plain.replace("\\\\", "\\")
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", _text(plain))


def _num(text: Any) -> str:
    return f'<td class="n">{_text(text)}</td>'
