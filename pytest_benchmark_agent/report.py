"""``report.md`` of a run and the compact table at the end of pytest's terminal output.

The report always has a non-empty **What Went Wrong** section: failed and non-comparable
trials, high variance, too few replicates, broken guards, rebuilt caches, or, when nothing went
wrong, what the run did not test (so a clean run is never read as proof of more than it is).
"""

from __future__ import annotations

import platform
from typing import Any

import pytest

from .config import BUILTIN_METRICS
from .fsutil import atomic_write
from .placeholders import as_text
from .run import BenchRun

HIGH_CV = 0.05


class ReportWriter:
    """Writes ``report.md`` when a run finishes (after the record, which it links to)."""

    @pytest.hookimpl
    def pytest_bench_run_finished(self, run: BenchRun) -> None:
        atomic_write(run.dir / "report.md", render_report(run))


def render_report(run: BenchRun) -> str:
    config = run.plan.config
    lines = [f"# {run.name}: {run.run_id}", "",
             f"- **Hypothesis:** {config.hypothesis or '(none stated)'}",
             f"- **Treatment:** `{run.variable}` = "
             + ", ".join(f"`{t}`" + (" (control)" if t == run.control else "")
                         for t in run.treatment_labels),
             f"- **State:** {run.state}" + (f" ({run.stop_reason})" if run.stop_reason else ""),
             f"- **Tag:** {run.tag}", "- **Trials:** " + _counts_text(run),
             f"- **Started / ended (UTC):** {run.started} / {run.ended}",
             "- **Record:** [results.yaml](results.yaml), [config.yaml](config.yaml)", "",
             "## Controls", "", "Every declared parameter and its value (the treatment variable "
             "varies; everything else is held fixed):", "", "| param | value | role |",
             "|---|---|---|"]
    for name, value in config.params.items():
        role = "TREATMENT" if name == run.variable else "CONTROL"
        lines.append(f"| `{name}` | `{as_text(value)}` | {role} |")
    lines += ["", "## Results", ""]
    lines += _metric_tables(run)
    lines += ["## What Went Wrong", ""]
    lines += [f"- {item}" for item in what_went_wrong(run)]
    lines += ["", "## Hosts and isolation", ""]
    lines += _hosts(run)
    lines += ["", "## Preps", "", "| stage | binding | action | signature |", "|---|---|---|---|"]
    for prep in run.preps:
        lines.append(f"| {prep['stage']} | `{prep['binding']}` | {prep['action']} | "
                     f"`{prep['signature'][:12]}` |")
    if not run.preps:
        lines.append("| (none ran) | | | |")
    lines += ["", "## Environment", ""]
    lines += _environment(run)
    return "\n".join(lines) + "\n"


def _hosts(run: BenchRun) -> list[str]:
    """Which hosts measured, proof that measurements did not overlap, and per-host figures."""
    hosts = run.hosts()
    overlaps = run.overlapping_measurements()
    lines = [f"- Hosts: {', '.join(hosts) or '(none recorded)'}",
             f"- Measurement windows: {len(overlaps)} overlap(s) on a host"
             + (" (every measure stage ran alone on its host)" if not overlaps else "")]
    if len(hosts) > 1:
        lines += ["", "| host | metric | treatment | n | median | CV |",
                  "|---|---|---|---|---|---|"]
        for host, metrics in run.summary_by_host().items():
            for metric, per in metrics.items():
                if metric in BUILTIN_METRICS and metric not in run.plan.config.metrics:
                    continue
                for label, row in per.items():
                    lines.append(f"| {host} | `{metric}` | `{label}` | {row.get('n', 0)} | "
                                 f"{_fmt(row.get('median'))} | {_pct(row.get('cv'))} |")
    return lines


def _counts_text(run: BenchRun) -> str:
    counts = run.counts()
    total = sum(counts.values())
    return f"{total} recorded (" + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) + ")"


def _metric_tables(run: BenchRun) -> list[str]:
    lines: list[str] = []
    specs = run.plan.config.metrics
    for metric, per in run.summary.items():
        spec = specs.get(metric)
        role = ("primary" if spec and spec.primary else "guard" if spec and spec.guard
                else "built-in" if metric in BUILTIN_METRICS else "secondary")
        direction = spec.direction if spec else "lower"
        lines += [f"### `{metric}` ({role}, {direction} is better)"
                  if direction != "equal" else f"### `{metric}` ({role}, must equal the control)",
                  "", "| treatment | n | median | mean | stdev | CV | min | max "
                  "| ratio to control | verdict |", "|---|---|---|---|---|---|---|---|---|---|"]
        for label, row in per.items():
            verdict = run.verdicts.get(metric, {}).get(label, {})
            ratio = row.get("ratio_to_control")
            lines.append(
                f"| `{label}`{' (control)' if label == run.control else ''} | {row.get('n', 0)} | "
                + " | ".join(_fmt(row.get(k)) for k in ("median", "mean", "stdev"))
                + f" | {_pct(row.get('cv'))} | {_fmt(row.get('min'))} | {_fmt(row.get('max'))} | "
                f"{'-' if label == run.control else _fmt(ratio)} | "
                f"{verdict.get('verdict', '-')} |")
        lines.append("")
    if not lines:
        lines = ["No trial passed, so there is nothing to summarize.", ""]
    return lines


def what_went_wrong(run: BenchRun) -> list[str]:
    """Every problem of the run, or (never empty) what a clean run did not test."""
    items: list[str] = []
    for trial in run.trials:
        if trial["status"] != "passed":
            reason = (trial.get("reason") or "").splitlines()
            items.append(f"`{trial['id']}` {trial['status']}: {reason[0] if reason else ''}")
    if run.stop_reason:
        items.append(f"The run stopped early: {run.stop_reason}.")
    for earlier, later in run.overlapping_measurements():
        items.append(f"Measurements overlapped on one host: `{earlier}` and `{later}`.")
    items += run.caveats
    specs = run.plan.config.metrics
    for metric, per in run.summary.items():
        spec = specs.get(metric)
        for label, row in per.items():
            cv = row.get("cv")
            if cv is not None and cv > HIGH_CV and metric not in ("cpu_s", "peak_rss_mb"):
                items.append(f"High variance: `{metric}` of `{label}` has CV {_pct(cv)} "
                             f"(above {_pct(HIGH_CV)}); small effects cannot be told from noise.")
            if spec and row.get("n", 0) < spec.min_replicates:
                items.append(f"Too few replicates: `{metric}` of `{label}` has n={row.get('n', 0)}"
                             f", needs {spec.min_replicates} for a verdict.")
        if spec and spec.guard:
            items += _guard_problems(metric, spec, per, run.control)
    for metric, per in run.verdicts.items():
        for label, verdict in per.items():
            if verdict.get("verdict") == "not_comparable":
                items.append(f"`{metric}` of `{label}` is not comparable: {verdict.get('reason')}")
    if not items:
        items = _untested(run)
    return items


def _guard_problems(metric: str, spec: Any, per: dict[str, Any], control: str) -> list[str]:
    problems = []
    base = per.get(control, {})
    for label, row in per.items():
        if not row.get("n"):
            continue
        if spec.direction == "equal" and (row.get("min") != base.get("min")
                                          or row.get("max") != base.get("max")):
            problems.append(f"Guard `{metric}` differs between `{label}` and the control "
                            f"(results are not identical).")
        if spec.floor is not None and row["min"] < spec.floor:
            problems.append(f"Guard `{metric}` of `{label}` fell below its floor {spec.floor} "
                            f"(min {row['min']}).")
        if spec.ceiling is not None and row["max"] > spec.ceiling:
            problems.append(f"Guard `{metric}` of `{label}` rose above its ceiling {spec.ceiling} "
                            f"(max {row['max']}).")
    return problems


def _untested(run: BenchRun) -> list[str]:
    config = run.plan.config
    items = ["Nothing failed. What this run did not test:",
             f"only the values {', '.join(run.treatment_labels)} of `{run.variable}`, at the "
             "control values listed above (other sizes or settings may behave differently);",
             f"one machine ({platform.node()}), one session: no reproduction yet, so the run is "
             f"{run.tag} until a second run reproduces it."]
    if config.seeds is None:
        items.append("a single seed: randomness of the workload itself was not varied.")
    return items


def _environment(run: BenchRun) -> list[str]:
    """The fingerprint in a few readable lines (the whole of it is in config.yaml)."""
    fingerprint = run.fingerprint or {}
    if not fingerprint:
        return ["(no fingerprint recorded)"]
    env = fingerprint.get("env", {})
    lines = ["- **Machine:** " + ", ".join(f"{k}: {v}" for k, v in env.items()
                                           if not isinstance(v, (dict, list)))]
    packages = env.get("packages") or {}
    if packages:
        lines.append("- **Packages:** " + ", ".join(f"{k} {v}" for k, v in packages.items()))
    for path, code in (fingerprint.get("code") or {}).items():
        if code.get("vcs") == "git":
            state = f"dirty, uncommitted changes {code.get('diff_hash', '')[:12]}" \
                if code.get("dirty") else "clean"
            lines.append(f"- **Code** `{path}`: git {str(code.get('commit'))[:12]} ({state})")
        else:
            lines.append(f"- **Code** `{path}`: content {str(code.get('content_hash'))[:12]}")
    accelerator = fingerprint.get("accelerator") or {}
    devices = accelerator.get("devices") or []
    lines.append("- **Accelerator:** " + (", ".join(str(d.get("name")) for d in devices)
                                          if devices else f"none ({accelerator.get('reason')})"))
    variables = fingerprint.get("vars") or {}
    if variables:
        lines.append("- **Declared variables:** "
                     + ", ".join(f"{k}={v}" for k, v in variables.items()))
    return lines


def terminal_lines(run: BenchRun) -> list[str]:
    """A compact per-metric table for the end of the pytest run."""
    lines = [f"{run.name} [{run.run_id}] {run.state}, {run.tag}: {_counts_text(run)}"]
    labels = run.treatment_labels
    header = f"  {'metric':<16}" + "".join(f"{label[:18]:>20}" for label in labels)
    lines.append(header)
    for metric, per in run.summary.items():
        if metric in BUILTIN_METRICS and metric not in run.plan.config.metrics:
            continue
        cells = []
        for label in labels:
            row = per.get(label, {})
            if not row.get("n"):
                cells.append(f"{'-':>20}")
                continue
            text = _fmt(row["median"])
            ratio = row.get("ratio_to_control")
            if ratio is not None:
                text += f" x{ratio:.3g}"
            verdict = run.verdicts.get(metric, {}).get(label, {}).get("verdict")
            if verdict:
                text += f" {verdict}"
            cells.append(f"{text:>20}")
        lines.append(f"  {metric[:16]:<16}" + "".join(cells))
    lines.append(f"  report: {run.dir / 'report.md'}")
    return lines


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"
