"""The report's **Hosts and isolation** section: which hosts measured, proof that no two
measurements overlapped on a host, and for a run on several hosts each host's own figures and
verdicts (gate 2 judges each host's blocks alone too, and refuses a direction that differs)."""

from __future__ import annotations

from typing import Any

from pytest_benchmark_agent.config.metric import BUILTIN_METRICS
from pytest_benchmark_agent.records.record import RunRecord, verdict_table
from pytest_benchmark_agent.records.summary import SummaryRow
from pytest_benchmark_agent.report.summary_lines import central
from pytest_benchmark_agent.stats.describe import describe, describe_exact
from pytest_benchmark_agent.stats.units import interval, number, p_value, pct
from pytest_benchmark_agent.util.safetext import md_code


def hosts_lines(run: RunRecord) -> list[str]:
    """Which hosts measured, proof that measurements did not overlap, per-host figures and
    per-host verdicts."""
    hosts = run.hosts()
    overlaps = run.overlapping_measurements()
    lines = [
        f"- Hosts: {', '.join(hosts) or '(none recorded)'}",
        f"- Measurement windows: {len(overlaps)} overlap(s) on a host"
        + (" (every measure stage ran alone on its host)" if not overlaps else ""),
    ]
    declared = run.model.metrics
    if len(hosts) > 1:
        lines += [
            "",
            "| host | metric | treatment | n | median | CV |",
            "|---|---|---|---|---|---|",
        ]
        for host, metrics in summary_by_host(run).items():
            for metric, per in metrics.items():
                if metric in BUILTIN_METRICS and metric not in declared:
                    continue
                lines += [
                    f"| {host} | {md_code(metric)} | {md_code(label)} | {row.get('n', 0)} | "
                    f"{central(row, '`')} | {pct(row.get('cv'))} |"
                    for label, row in per.items()
                ]
    if run.verdicts_by_host:
        lines += _verdicts_by_host(run, several=len(hosts) > 1)
    return lines


def _verdicts_by_host(run: RunRecord, several: bool) -> list[str]:
    """Gate 2's verdicts on each host's blocks alone."""
    lines = [
        "",
        "Verdicts per host (each host's blocks alone"
        + (
            "; the run's verdicts above combine them, and refuse a direction that "
            "differs between hosts"
            if several
            else ": one host, so the same as the run's verdicts"
        )
        + "):",
        "",
        "| host | metric | treatment | verdict | ratio | 95% CI | p | n (control / treatment) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for host, metrics in run.verdicts_by_host.items():
        for metric, per in verdict_table(metrics).items():
            for label, v in per.items():
                lines.append(
                    f"| {host or '(unnamed)'} | {md_code(metric)} | {md_code(label)} | "
                    f"{v.word} | {number(v.ratio)} | {interval(v.ci)} | {p_value(v.p)} | "
                    + " / ".join(str(x) for x in v.n)
                    + " |"
                )
    return lines


def summary_by_host(run: RunRecord) -> dict[str, dict[str, dict[str, SummaryRow]]]:
    """host -> metric -> treatment -> descriptive statistics of the passed trials (an exact
    metric's distinct values), for the per-host figures of a multi-host run."""
    specs = run.model.metrics
    names = list(specs) + [m for m in BUILTIN_METRICS if m not in specs]
    values: dict[tuple[str, str, str], list[Any]] = {}
    for trial in run.passed():
        for metric, value in trial.metrics.items():
            values.setdefault((str(trial.host), metric, trial.treatment), []).append(value)
    out: dict[str, dict[str, dict[str, SummaryRow]]] = {}
    for host in run.hosts():
        for metric in names:
            exact = metric in specs and specs[metric].direction == "equal"
            per = {
                label: SummaryRow(
                    (describe_exact if exact else describe)(values.get((host, metric, label), []))
                )
                for label in run.treatments
            }
            if any(row.get("n") for row in per.values()):
                out.setdefault(host, {})[metric] = per
    return out
