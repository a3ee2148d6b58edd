"""The report's spread of a counted metric across Python hash seeds.

A counted stage runs each block under its own ``PYTHONHASHSEED`` (engine/counters.py), and a
run draws its seeds apart from every other run. Counts move with the hash seed (dict layouts:
up to 10% for a loop over module globals) while the pair inside a block shares it, so the
report shows both: how far each treatment's counts spread across the seeds, and how far the
per-block ratio to the control does (what the verdict rests on).
"""

from __future__ import annotations

import statistics
from typing import Any

from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.util.safetext import md_code


def counted_metrics(run: RunRecord) -> dict[str, str]:
    """Each counted metric of the run and the measure stage that counts it."""
    return {
        metric: stage.name
        for stage in run.model.stages
        for metric in stage.counters
        if metric in run.model.metrics
    }


def seed_spread_lines(run: RunRecord, metric: str) -> list[str]:
    """A table of ``metric``'s spread across hash seeds per treatment (none when not counted)."""
    stage = counted_metrics(run).get(metric)
    if stage is None:
        return []
    by_label: dict[str, dict[tuple[Any, Any], float]] = {}
    seeds: set[str] = set()
    for trial in run.passed():
        value = trial.metrics.get(metric)
        if trial.stage != stage or value is None:
            continue
        block = (trial.host, trial.replicate)
        by_label.setdefault(trial.treatment, {})[block] = float(value)
        seeds.add(str(trial.hash_seed))
    if not by_label:
        return []
    control = by_label.get(str(run.control), {})
    lines = [
        f"Across Python hash seeds ({len(seeds)} distinct, one per block; this run's "
        f"`hash_seed_base` {run.hash_seed_base}, replayed by `--bench-hash-seeds "
        f"{run.hash_seed_base}`):",
        "",
        "| treatment | blocks | min | max | spread (of the median) | ratio to the control, "
        "per block |",
        "|---|---|---|---|---|---|",
    ]
    for label, values in by_label.items():
        counts = list(values.values())
        spread = (max(counts) - min(counts)) / statistics.median(counts)
        ratios = [v / control[k] for k, v in values.items() if control.get(k)]
        shown = (
            "-"
            if label == str(run.control) or not ratios
            else f"{min(ratios):.5g} .. {max(ratios):.5g}"
        )
        lines.append(
            f"| {md_code(label)} | {len(counts)} | {min(counts):.6g} | {max(counts):.6g} | "
            f"{spread:.3%} | {shown} |"
        )
    return [*lines, ""]
