"""A run's samples for other tools, as hyperfine exports them: CSV, one JSON file, Markdown.

Each renders the finished run's :class:`.RunRecord` (``load_run``) only, one function per format:

* ``csv``: one row per trial and metric (``run_id, trial, stage, treatment, replicate, seed,
  position, host, status, metric, value``), every trial that ran, in the order it ran; a trial
  without metrics (failed before measuring) is one row with an empty metric.
* ``json``: one self-describing file: the run (name, state, tag and why, the treatment variable
  and its values with the control first), each metric's summary and verdicts, and every trial
  with its metrics. Non-finite numbers are written as the strings ``"nan"``, ``"inf"``.
* ``markdown``: per metric a table of the treatments (control first): n, median, min, max in
  human units, gate 2's ratio and interval, and the verdict.

The portable record that ``benchmark-agent import`` reads is another format
(:mod:`pytest_benchmark_agent.records.portable`).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping
from typing import Any

from pytest_benchmark_agent.records.frozen import thaw
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.stats.describe import values_text
from pytest_benchmark_agent.stats.units import human, interval, ratio
from pytest_benchmark_agent.util.safetext import md, md_code

#: ``--format`` values of ``benchmark-agent export`` besides the portable record.
FORMATS = ("csv", "json", "markdown")
CSV_COLUMNS = (
    "run_id",
    "trial",
    "stage",
    "treatment",
    "replicate",
    "seed",
    "position",
    "host",
    "status",
    "metric",
    "value",
)
_RUN_FIELDS = (
    "run_id",
    "name",
    "state",
    "tag",
    "tag_reasons",
    "treatment_variable",
    "control",
    "started",
    "ended",
    "stop_reason",
    "counts",
    "caveats",
    "what_went_wrong",
)
_TRIAL_FIELDS = (
    "id",
    "stage",
    "treatment",
    "replicate",
    "seed",
    "position",
    "host",
    "status",
    "reason",
    "started",
    "ended",
    "metrics",
)


def export_text(run: RunRecord, form: str) -> str:
    """The run in ``form`` (one of :data:`FORMATS`)."""
    return {"csv": to_csv, "json": to_json, "markdown": to_markdown}[form](run)


def treatments_control_first(run: RunRecord) -> list[str]:
    """The run's treatment labels, the control first, the others as declared."""
    labels = list(run.treatments)
    control = run.control
    return [control] + [t for t in labels if t != control] if control in labels else labels


def to_csv(run: RunRecord) -> str:
    """One row per trial and metric (a trial without metrics: one row, its metric empty)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for trial in run.trials:
        head = [
            run.run_id,
            trial.id,
            trial.stage,
            trial.treatment,
            trial.replicate,
            trial.seed,
            trial.position,
            trial.host,
        ]
        if not trial.metrics:
            writer.writerow([*_cells(head), trial.status, "", ""])
        for metric, value in trial.metrics.items():
            writer.writerow([*_cells(head), trial.status, metric, _cell(value)])
    return buffer.getvalue()


def to_json(run: RunRecord) -> str:
    """One self-describing JSON document: the run, its summary, verdicts and trials."""
    document = {
        "format": "pytest-benchmark-agent run export",
        "schema_version": run.schema_version,
        "run": {key: thaw(getattr(run, key)) for key in _RUN_FIELDS},
        "treatments": treatments_control_first(run),
        "summary": thaw(run.summary),
        "verdicts": thaw(run.verdicts),
        "trials": [
            {key: thaw(getattr(trial, key)) for key in _TRIAL_FIELDS} for trial in run.trials
        ],
    }
    return json.dumps(_finite(document), indent=2, ensure_ascii=False) + "\n"


def to_markdown(run: RunRecord) -> str:
    """Per metric a table of the treatments (the control first) with gate 2's verdicts."""
    labels = treatments_control_first(run)
    lines = [
        f"# {md(run.name)}: {md(run.run_id)} ({run.tag})",
        "",
        f"Treatment variable {md_code(run.treatment_variable)}, control "
        f"{md_code(run.control)}. ratio: gate 2's estimate of treatment / control with its "
        "95% CI.",
    ]
    for metric, per in run.summary.items():
        lines += [
            "",
            f"## {md_code(metric)}",
            "",
            "| treatment | n | median | min | max | ratio | 95% CI | verdict |",
            "|---|--:|--:|--:|--:|--:|---|---|",
        ]
        verdicts = run.verdicts.get(metric, {})
        for label in [t for t in labels if t in per] + [t for t in per if t not in labels]:
            row, v = per[label], verdicts.get(label)
            central = (
                [md(values_text(row))] * 3
                if row.exact
                else [human(row.get(k), metric) for k in ("median", "min", "max")]
            )
            lines.append(
                f"| {md_code(label)}{' (control)' if label == run.control else ''} | "
                f"{row.get('n', 0)} | "
                + " | ".join(central)
                + (
                    f" | {ratio(v.ratio)} | {interval(v.ci)} | {v.word} |"
                    if v
                    else " | - | - | - |"
                )
            )
    return "\n".join(lines) + "\n"


def _cells(values: list[Any]) -> list[str]:
    return ["" if value is None else str(value) for value in values]


def _cell(value: Any) -> str:
    """A metric value as recorded: an int's every digit, a float's shortest repr."""
    return repr(value) if isinstance(value, float) else str(value)


def _finite(data: Any) -> Any:
    """``data`` with non-finite floats as strings (JSON has no NaN or infinity)."""
    if isinstance(data, float) and not math.isfinite(data):
        return str(data)
    if isinstance(data, Mapping):
        return {str(k): _finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(v) for v in data]
    return data
