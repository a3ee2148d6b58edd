"""What the terminal summary adds below a run's table, as hyperfine and criterion print it.

The CPU time's user and system parts beside ``cpu_s``, how many samples each metric has beyond
Tukey's fences, one line per comparison (``b: wall_s 1.32x faster than a (x0.758, ...)``), and the
geometric mean of the ratios of one direction (within a run, and across a session's files).
Every figure comes from the recorded trials and gate 2's verdicts; nothing is judged here.
The few texts the terminal, report.md and the job summary share (the trial counts, a median or
an exact metric's values, the revisions compared, the verdicts against a baseline) are here too.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.records.summary import SummaryRow
from pytest_benchmark_agent.stats.comparability import Verdict
from pytest_benchmark_agent.stats.describe import tukey_outliers, values_text
from pytest_benchmark_agent.stats.geomean import GeoMean, geometric_mean
from pytest_benchmark_agent.stats.units import change_text, human, ratio

#: How many hex digits name a commit (``engine.revisions.SHORT``, which the reports sit below).
_SHORT = 12


def primary_first(metrics: Iterable[str], specs: Mapping[str, Any]) -> list[str]:
    """``metrics`` with the declared primaries first, each group in its own order."""
    names = list(metrics)
    primaries = [m for m in names if getattr(specs.get(m), "primary", False)]
    return primaries + [m for m in names if m not in primaries]


def primary_first_items(table: Mapping[str, Any], specs: Mapping[str, Any]) -> list[Any]:
    """``table``'s (metric, value) pairs, the declared primaries first."""
    return [(metric, table[metric]) for metric in primary_first(table, specs)]


def counts_text(run: RunRecord) -> str:
    """``12 recorded (failed: 2, passed: 10)``."""
    total = sum(run.counts.values())
    return (
        f"{total} recorded (" + ", ".join(f"{k}: {v}" for k, v in sorted(run.counts.items())) + ")"
    )


def central(row: SummaryRow, quote: str = "") -> str:
    """A summary row's median, or an exact metric's values verbatim with their counts."""
    return values_text(row, quote) if row.exact else human(row.get("median"))


def both_revisions(run: RunRecord) -> str | None:
    """``1a2b3c4d5e6f (origin/main) -> 9f8e7d6c5b4a (HEAD)``: the two commits of
    ``--bench-against``, None for a run of one code."""
    if not run.revisions:
        return None
    against, this = run.revisions["against"], run.revisions["this"]
    return f"{against['sha'][:_SHORT]} ({against['ref']}) -> {this['sha'][:_SHORT]} ({this['ref']})"


def cpu_split_lines(run: RunRecord) -> list[str]:
    """The medians of ``user_s`` and ``sys_s`` per treatment, beside ``cpu_s``'s."""
    cells = []
    for label in run.treatments:
        trials = [t for t in run.passed() if t.treatment == label and t.user_s is not None]
        if not trials:
            continue
        medians = {
            "cpu_s": statistics.median(float(t.cpu_s or 0) for t in trials),
            "user_s": statistics.median(float(t.user_s or 0) for t in trials),
            "sys_s": statistics.median(float(t.sys_s or 0) for t in trials),
        }
        cells.append(
            f"{label}: {human(medians['cpu_s'], 'cpu_s')} = user "
            f"{human(medians['user_s'], 'user_s')} + sys {human(medians['sys_s'], 'sys_s')}"
        )
    return [f"  {'cpu_s (medians)':<16}  " + "; ".join(cells)] if cells else []


def outlier_lines(run: RunRecord) -> list[str]:
    """Per declared metric with any, the samples beyond Tukey's fences per treatment
    (``a 1/6``)."""
    specs = run.model.metrics
    lines = []
    for metric in primary_first([m for m in run.summary if m in specs], specs):
        per = run.samples(metric)
        counts = []
        for label in run.treatments:
            values = [v for v in per.get(label, []) if isinstance(v, (int, float))]
            counts.append((label, tukey_outliers(values), len(values)))
        if any(found for _, found, _ in counts):
            lines.append(
                f"  {metric[:16]:<16}  outliers (Tukey's fences): "
                + ", ".join(f"{label} {found}/{n}" for label, found, n in counts)
            )
    return lines


def comparison_lines(run: RunRecord) -> list[str]:
    """One line per treatment and judged metric with a ratio, primaries first:
    ``b: wall_s 1.32x faster than a (x0.758, 95% [0.74, 0.78]) - improved``."""
    specs = run.model.metrics
    lines = []
    for metric in primary_first(run.verdicts, specs):
        direction = getattr(specs.get(metric), "direction", "lower")
        if direction == "equal":
            continue
        for label, verdict in run.verdicts[metric].items():
            text = comparison_text(label, run.control, metric, verdict)
            if text:
                lines.append(f"  {text}")
    return lines


#: A verdict as the comparison line ends with it (others as recorded).
_VERDICT_WORDS = {"no_change": "no change detected", "not_comparable": "not comparable"}


def comparison_text(label: str, control: str, metric: str, verdict: Verdict) -> str:
    """``label: metric 48x faster than control (x0.0209, 95% [0.0185, 0.0275]) - improved``,
    the one line a comparison is said in (terminal, report.md, report.html): the words and
    the interval come from gate 2's ratio (label over control) by :func:`.units.change_text`.
    "" without a ratio."""
    said = change_text(metric, verdict.ratio, verdict.ci, control, verdict.extra.get("ci_level"))
    if not said:
        return ""
    judged = _VERDICT_WORDS.get(verdict.word, verdict.word)
    if verdict.verdict == "not_comparable" and verdict.reason:
        judged += f": {verdict.reason}"
    return f"{label}: {metric} {said}" + (f" - {judged}" if judged else "")


def run_geomeans(run: RunRecord) -> dict[str, dict[str, GeoMean]]:
    """direction -> treatment -> the geometric mean of its ratios over the judged metrics of
    that direction (two or more)."""
    specs = run.model.metrics
    out: dict[str, dict[str, GeoMean]] = {}
    for direction in ("lower", "higher"):
        metrics = [
            m
            for m in primary_first(run.verdicts, specs)
            if getattr(specs.get(m), "direction", "lower") == direction
        ]
        for label in run.treatments:
            parts = []
            for metric in metrics:
                verdict = run.verdicts[metric].get(label)
                if verdict is not None:
                    parts.append((metric, verdict.ratio, verdict.ci))
            found = geometric_mean(parts)
            if found is not None:
                out.setdefault(direction, {})[label] = found
    return out


def geomean_text(what: str, direction: str, mean: GeoMean) -> str:
    """``geometric mean of 2 lower-is-better ratios b/a (wall_s, cpu_s): x0.91 [x0.88, x0.95]``."""
    interval = f" [{ratio(mean.ci[0], 3)}, {ratio(mean.ci[1], 3)}]" if mean.ci else " (no interval)"
    return (
        f"geometric mean of {mean.n} {direction}-is-better ratios {what} "
        f"({', '.join(mean.names)}): {ratio(mean.ratio, 3)}{interval}"
    )


def geomean_lines(run: RunRecord) -> list[str]:
    """The run's geometric means, one line per direction and treatment."""
    return [
        f"  {geomean_text(f'{label}/{run.control}', direction, mean)}"
        for direction, per in run_geomeans(run).items()
        for label, mean in per.items()
    ]


def session_geomeans(runs: Iterable[RunRecord]) -> dict[str, GeoMean]:
    """direction -> the geometric mean over a session's files of their primary metrics'
    ratios (every treatment against its file's control), where two or more."""
    parts: dict[str, list[tuple[str, Any, Any]]] = {}
    for run in runs:
        specs = run.model.metrics
        for metric, per in run.verdicts.items():
            spec = specs.get(metric)
            if spec is None or not spec.primary or spec.direction == "equal":
                continue
            for label, verdict in per.items():
                name = f"{run.name}:{metric}[{label}]"
                parts.setdefault(spec.direction, []).append((name, verdict.ratio, verdict.ci))
    found = {direction: geometric_mean(items) for direction, items in parts.items()}
    return {direction: mean for direction, mean in found.items() if mean is not None}


def session_geomean_lines(runs: list[RunRecord]) -> list[str]:
    """The session's geometric means across its benchmark files (two or more files)."""
    if len({run.name for run in runs}) < 2:
        return []
    return [
        geomean_text("across the session's files", direction, mean)
        for direction, mean in session_geomeans(runs).items()
    ]
