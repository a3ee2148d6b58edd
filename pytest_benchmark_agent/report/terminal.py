"""The compact summary of each run at the end of pytest's terminal output.

Per metric the median of each treatment with gate 2's ratio and verdict (one configuration: its
median, CV and n), then what :mod:`.summary_lines` adds (CPU split, outliers, comparisons,
geometric means), the refusals, the regressions, the verdicts against a baseline, the CI gate
(loud when it did not pass) and where the report is. Every line is one line of user text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_benchmark_agent.config.metric import BUILTIN_METRICS, exact_metrics
from pytest_benchmark_agent.judge.baseline import primary_metrics
from pytest_benchmark_agent.judge.ci_gate import regressions
from pytest_benchmark_agent.records.outcomes import GateRecord
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.records.summary import SummaryRow
from pytest_benchmark_agent.report import summary_lines
from pytest_benchmark_agent.report.summary_lines import central, counts_text
from pytest_benchmark_agent.stats.describe import values_text
from pytest_benchmark_agent.stats.units import human, interval, pct, ratio
from pytest_benchmark_agent.util.safetext import one_line


def terminal_lines(run: RunRecord, gate: GateRecord | None = None) -> list[str]:
    """A compact per-metric table for the end of the pytest run; with ``gate`` (a CI
    invocation: a baseline or ``--bench-fail-on``), the baseline's verdicts and the gate."""
    lines = [f"{run.name} [{run.run_id}] {run.state}, {run.tag}: {counts_text(run)}"]
    if run.tag_reasons:
        lines.append(f"  {run.tag}: {run.tag_reasons[0]}")
    extra = summary_lines.cpu_split_lines(run) + summary_lines.outlier_lines(run)
    if run.one_configuration:
        return [one_line(line) for line in lines + _alone_lines(run) + extra + _tail(run, gate)]
    lines += _table(run)
    lines += extra + summary_lines.comparison_lines(run) + summary_lines.geomean_lines(run)
    lines += [f"  refused: {refusal}" for refusal in run.refusals]
    return [one_line(line) for line in lines + _tail(run, gate)]  # user text: one line each


def _table(run: RunRecord) -> list[str]:
    """Each declared metric's median per treatment with gate 2's ratio and verdict; an exact
    metric's values below the table (a hash in a cell would widen every column)."""
    specs = run.model.metrics
    labels = run.treatments
    rows: list[tuple[str, list[str]]] = []
    exact: list[str] = []
    for metric, per in summary_lines.primary_first_items(run.summary, specs):
        if metric in BUILTIN_METRICS and metric not in specs:
            continue
        verdicts = run.verdicts.get(metric, {})
        if metric in exact_metrics(specs):
            exact.append(
                f"  {metric[:16]:<16}  "
                + "; ".join(
                    f"{label}: {values_text(per.get(label, {}))}"
                    + (f" {verdicts[label].word}" if label in verdicts else "")
                    for label in labels
                )
            )
            continue
        rows.append(
            (metric, [_cell(metric, per.get(label, {}), verdicts.get(label)) for label in labels])
        )
    width = 2 + max(
        [18, *(len(label[:30]) for label in labels), *(len(c) for _, cells in rows for c in cells)]
    )
    lines = [f"  {'metric':<16}" + "".join(f"{label[:30]:>{width}}" for label in labels)]
    for metric, cells in rows:
        lines.append(f"  {metric[:16]:<16}" + "".join(f"{cell:>{width}}" for cell in cells))
    return lines + exact


def _cell(metric: str, row: Mapping[str, Any], verdict: Any) -> str:
    """A treatment's median with gate 2's ratio (the tag lines' figure) and its verdict."""
    if not row.get("n"):
        return "-"
    text = human(row["median"], metric)
    if verdict is not None and verdict.ratio is not None:
        text += f" {ratio(verdict.ratio, 3)}"
    if verdict is not None and verdict.verdict:
        text += f" {verdict.word}"
    return text


def _tail(run: RunRecord, gate: GateRecord | None) -> list[str]:
    """The end of :func:`terminal_lines`: regressions, the baseline's verdicts, the CI gate
    (loud when it did not pass) and where the report is."""
    lines = [f"  regression: {regression}" for regression in regressions(run)]
    both = summary_lines.both_revisions(run)
    if both is not None:
        lines.append(f"  code: {both}, both measured in this session")
    lines += _baseline_lines(run)
    if gate is not None:
        reasons = gate.reasons
        lines.append(f"  CI gate: {gate.word}" + (f": {reasons[0]}" if reasons else ""))
        lines += [f"    {reason}" for reason in reasons[1:]]
    if run.dir is not None and (run.dir / "report.md").is_file():  # never a report not written
        lines.append(f"  report: {run.dir / 'report.md'}")
    return lines


def _baseline_lines(run: RunRecord) -> list[str]:
    """The primary verdicts against the baseline, both sides named by their code."""
    base = run.baseline
    if base is None or not base.run_id:
        return []
    named = ", ".join(str(part) for part in (base.extra.get("tag"), base.ref) if part)
    sides = [base.code.get("baseline") or "(not read)", base.code.get("this") or "(not read)"]
    codes = (
        f": code {sides[0]} -> {sides[1]}"
        if base.code.get("baseline") or base.code.get("this")
        else ""
    )
    lines = [f"  baseline {base.run_id}" + (f" ({named})" if named else "") + codes]
    verdicts = base.gated_verdicts  # as the CI gate read them
    judged = primary_metrics(run.model.metrics) + list(verdicts)
    for metric in dict.fromkeys(judged):  # every judged metric, the primaries first
        for label, v in (verdicts.get(metric) or {}).items():
            lines.append(
                f"    `{metric}` [{label}] {v.word}"
                + (f" {ratio(v.ratio, 3)}" if v.ratio is not None else "")
                + (f" {interval(v.ci)}" if v.ci else "")
                + f" against {v.extra.get('against')}"
                + (f": {v.reason}" if v.not_comparable else "")
            )
    return lines


def _alone_lines(run: RunRecord) -> list[str]:
    """:func:`terminal_lines` of one configuration: each metric's median, CV and n (no ratio,
    no verdict: nothing was compared within the run)."""
    label = run.control
    lines = [f"  {'metric':<16}{'median (' + label[:24] + ')':>20}{'CV':>9}{'n':>5}"]
    for metric, per in run.summary.items():
        if metric in BUILTIN_METRICS and metric not in run.model.metrics:
            continue
        row = per.get(label, SummaryRow())
        lines.append(
            f"  {metric[:16]:<16}{central(row):>20}{pct(row.get('cv')):>9}{row.get('n', 0):>5}"
        )
    return lines
