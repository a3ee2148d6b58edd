"""What the terminal summary adds below a run's table, as hyperfine and criterion print it.

The CPU time's user and system parts beside ``cpu_s``, how many samples each metric has beyond
Tukey's fences, one line per comparison (``b is x1.32 +- 0.04 faster than a``), and the
geometric mean of the ratios of one direction (within a run, and across a session's files).
Every figure comes from the recorded trials and gate 2's verdicts; nothing is judged here.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_benchmark_agent.report.units import human, unit_of
from pytest_benchmark_agent.stats.describe import tukey_outliers
from pytest_benchmark_agent.stats.geomean import GeoMean, geometric_mean

_TIME_UNITS = ("s", "ms", "us", "ns")


def primary_first(metrics: Iterable[str], specs: Mapping[str, Any]) -> list[str]:
    """``metrics`` with the declared primaries first, each group in its own order."""
    names = list(metrics)
    primaries = [m for m in names if getattr(specs.get(m), "primary", False)]
    return primaries + [m for m in names if m not in primaries]


def primary_first_items(table: Mapping[str, Any], specs: Mapping[str, Any]) -> list[Any]:
    """``table``'s (metric, value) pairs, the declared primaries first."""
    return [(metric, table[metric]) for metric in primary_first(table, specs)]


def cpu_split_lines(run: Any) -> list[str]:
    """The medians of ``user_s`` and ``sys_s`` per treatment, beside ``cpu_s``'s."""
    cells = []
    for label in run.treatment_labels:
        trials = [
            t
            for t in run.trials
            if t["treatment"] == label and t["status"] == "passed" and "user_s" in t
        ]
        if not trials:
            continue
        medians = {
            key: statistics.median(float(t[key]) for t in trials)
            for key in ("cpu_s", "user_s", "sys_s")
        }
        cells.append(
            f"{label}: {human(medians['cpu_s'], 'cpu_s')} = user "
            f"{human(medians['user_s'], 'user_s')} + sys {human(medians['sys_s'], 'sys_s')}"
        )
    return [f"  {'cpu_s (medians)':<16}  " + "; ".join(cells)] if cells else []


def outlier_lines(run: Any) -> list[str]:
    """Per declared metric with any, the samples beyond Tukey's fences per treatment
    (``a 1/6``)."""
    table = run.samples()
    specs = run.plan.config.metrics
    lines = []
    for metric in primary_first([m for m in run.summary if m in specs], specs):
        per = table.get(metric) or {}
        counts = []
        for label in run.treatment_labels:
            values = [v for v in per.get(label, []) if isinstance(v, (int, float))]
            counts.append((label, tukey_outliers(values), len(values)))
        if any(found for _, found, _ in counts):
            lines.append(
                f"  {metric[:16]:<16}  outliers (Tukey's fences): "
                + ", ".join(f"{label} {found}/{n}" for label, found, n in counts)
            )
    return lines


def comparison_lines(run: Any) -> list[str]:
    """One hyperfine line per treatment and judged metric with a ratio and its interval,
    primaries first: ``b is x1.32 +- 0.04 faster than a (wall_s, interval x1.28 to x1.36)``."""
    specs = run.plan.config.metrics
    lines = []
    for metric in primary_first(run.verdicts, specs):
        direction = getattr(specs.get(metric), "direction", "lower")
        if direction == "equal":
            continue
        for label, verdict in (run.verdicts.get(metric) or {}).items():
            text = comparison_text(label, run.control, metric, verdict)
            if text:
                lines.append(f"  {text}")
    return lines


def comparison_text(label: str, control: str, metric: str, verdict: Mapping[str, Any]) -> str:
    """``label is xF +- H <word> than control (metric, interval ...)`` from a verdict's ratio
    (label over control) and interval; "" without a ratio. F is at least 1: the ratio or its
    inverse, whichever says "faster"/"slower" (times) or "higher"/"lower" (other metrics)."""
    ratio, ci = verdict.get("ratio"), verdict.get("ci")
    if not isinstance(ratio, (int, float)) or ratio <= 0:
        return ""
    timed = unit_of(metric) in _TIME_UNITS
    if ratio < 1:
        factor, word = 1 / ratio, "faster" if timed else "lower"
        bounds = (1 / ci[1], 1 / ci[0]) if ci and min(ci) > 0 else None
    else:
        factor, word = ratio, "slower" if timed else "higher"
        bounds = (ci[0], ci[1]) if ci else None
    spread = f" +- {(bounds[1] - bounds[0]) / 2:.2f}" if bounds else ""
    interval = f", interval x{bounds[0]:.3g} to x{bounds[1]:.3g}" if bounds else ""
    verdict_word = verdict.get("verdict")
    judged = f", {verdict_word}" if verdict_word else ""
    return f"{label} is x{factor:.2f}{spread} {word} than {control} ({metric}{interval}{judged})"


def run_geomeans(run: Any) -> dict[str, dict[str, GeoMean]]:
    """direction -> treatment -> the geometric mean of its ratios over the judged metrics of
    that direction (two or more)."""
    specs = run.plan.config.metrics
    out: dict[str, dict[str, GeoMean]] = {}
    for direction in ("lower", "higher"):
        metrics = [
            m
            for m in primary_first(run.verdicts, specs)
            if getattr(specs.get(m), "direction", "lower") == direction
        ]
        for label in run.treatment_labels:
            parts = []
            for metric in metrics:
                verdict = (run.verdicts.get(metric) or {}).get(label) or {}
                parts.append((metric, verdict.get("ratio"), verdict.get("ci")))
            found = geometric_mean(parts)
            if found is not None:
                out.setdefault(direction, {})[label] = found
    return out


def geomean_text(what: str, direction: str, mean: GeoMean) -> str:
    """``geometric mean of 2 lower-is-better ratios b/a (wall_s, cpu_s): x0.91 [x0.88, x0.95]``."""
    interval = f" [x{mean.ci[0]:.3g}, x{mean.ci[1]:.3g}]" if mean.ci else " (no interval)"
    return (
        f"geometric mean of {mean.n} {direction}-is-better ratios {what} "
        f"({', '.join(mean.names)}): x{mean.ratio:.3g}{interval}"
    )


def geomean_lines(run: Any) -> list[str]:
    """The run's geometric means, one line per direction and treatment."""
    return [
        f"  {geomean_text(f'{label}/{run.control}', direction, mean)}"
        for direction, per in run_geomeans(run).items()
        for label, mean in per.items()
    ]


def session_geomeans(runs: Iterable[Any]) -> dict[str, GeoMean]:
    """direction -> the geometric mean over a session's files of their primary metrics'
    ratios (every treatment against its file's control), where two or more."""
    parts: dict[str, list[tuple[str, Any, Any]]] = {}
    for run in runs:
        specs = run.plan.config.metrics
        for metric, per in run.verdicts.items():
            spec = specs.get(metric)
            if spec is None or not spec.primary or spec.direction == "equal":
                continue
            for label, verdict in per.items():
                name = f"{run.name}:{metric}[{label}]"
                parts.setdefault(spec.direction, []).append(
                    (name, verdict.get("ratio"), verdict.get("ci"))
                )
    found = {direction: geometric_mean(items) for direction, items in parts.items()}
    return {direction: mean for direction, mean in found.items() if mean is not None}


def session_geomean_lines(runs: list[Any]) -> list[str]:
    """The session's geometric means across its benchmark files (two or more files)."""
    if len({run.name for run in runs}) < 2:
        return []
    return [
        geomean_text("across the session's files", direction, mean)
        for direction, mean in session_geomeans(runs).items()
    ]
