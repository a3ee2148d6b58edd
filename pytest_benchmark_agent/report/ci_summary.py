"""The CI gate as a markdown table in GitHub's job summary (``$GITHUB_STEP_SUMMARY``).

Registered by the plugin in the session's controller only (never in an xdist worker) when the
variable is set; at each run's end it appends one section: a heading naming the benchmark,
both sides' code and the gate's outcome, a table (metric, baseline, this run, ratio, interval,
MDE, n, CV, verdict: the evidence the gate read) and the gate's reasons, the first saying how it
was judged. Below the heading, the answer as the reports open with it (:mod:`.headline`: each
primary comparison in the one ratio form). Against a baseline the rows are the verdicts judged
with the session as the unit (``baseline.judged``); without one, the run's own verdicts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_benchmark_agent.judge.evidence import share
from pytest_benchmark_agent.records.fingerprint import code_label
from pytest_benchmark_agent.records.outcomes import GateRecord
from pytest_benchmark_agent.records.reader import UnreadableRecord
from pytest_benchmark_agent.records.record import BaselineComparison, RunRecord, load_run
from pytest_benchmark_agent.records.summary import SummaryRow
from pytest_benchmark_agent.report.headline import headline
from pytest_benchmark_agent.report.summary_lines import both_revisions
from pytest_benchmark_agent.stats.comparability import Verdict
from pytest_benchmark_agent.stats.describe import values_text
from pytest_benchmark_agent.stats.units import interval, number, ratio
from pytest_benchmark_agent.util import redact
from pytest_benchmark_agent.util.safetext import inert_markdown, md, md_code

HEADER = [
    "| metric | baseline | this run | ratio | interval | MDE | n | CV | verdict |",
    "|---|---:|---:|---:|---|---:|---:|---:|---|",
]


class StepSummaryWriter:
    """Appends each finished run's section to the job summary file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @pytest.hookimpl(trylast=True)
    def pytest_bench_run_finished(self, run: RunRecord) -> None:
        text = inert_markdown(redact.scrub_text("\n".join(render(run)))) + "\n\n"
        try:
            with open(self.path, "a", encoding="utf-8") as summary:
                summary.write(text)
        except OSError as exc:  # the run and its records stand; only the summary is lost
            print(
                f"benchmark-agent: cannot append to $GITHUB_STEP_SUMMARY {self.path}: {exc}",
                file=sys.stderr,
            )


def step_summary_writer() -> StepSummaryWriter | None:
    """A writer for ``$GITHUB_STEP_SUMMARY``, None where it is not set (outside GitHub)."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    return StepSummaryWriter(Path(path)) if path else None


def render(run: RunRecord) -> list[str]:
    """The run's section of the job summary, as lines (the CI gate as gate 2 recorded it)."""
    gate = run.ci_gate or GateRecord("unjudged", ("the run was not judged",))
    base = run.baseline
    this_code = code_label(run.fingerprint.get("code_identity"))
    both = both_revisions(run)
    if base is None and both is not None:
        lines = [
            f"### `{run.name}`: {both}: gate **{gate.outcome}** "
            "(both revisions measured in this session, interleaved)",
            "",
        ]
        lines += _own_table(run)
    elif base is None:
        lines = [
            f"### {md_code(run.name)} at {md(this_code)}: gate **{gate.outcome}** "
            "(within the run: no --bench-baseline)",
            "",
        ]
        lines += _own_table(run)
    else:
        code = base.code
        lines = [
            f"### {md_code(run.name)}: {md(code.get('baseline') or 'no baseline')} -> "
            f"{md(code.get('this') or this_code)}: gate **{gate.outcome}**",
            "",
            f"Baseline {md_code(base.ref)}: "
            + (
                f"run {base.run_id} ({base.resolved}, {base.extra.get('tag')})"
                if base.run_id
                else "no run"
            )
            + f"; this run {run.run_id} "
            f"({run.tag}).",
            "",
        ]
        lines += _baseline_table(run, base)
    lines[2:2] = [f"- **{md(answer)}**" for answer in headline(run).answers] + [""]
    if gate.outcome == "unjudged":  # a warning, never a failure unless asked for
        lines[2:2] = [
            "> [!WARNING]",
            "> The gate could not decide (its reasons are below); it fails the job only with "
            "`--bench-fail-on=unjudged`.",
            "",
        ]
    lines += ["", *[f"- {_cell(reason)}" for reason in gate.reasons]]
    return lines


def _baseline_table(run: RunRecord, base: BaselineComparison) -> list[str]:
    """One row per metric and treatment of this run against the baseline."""
    verdicts = base.gated_verdicts
    reference = _reference(run, base.run_id)
    several = len(run.treatments) > 1
    rows = []
    for metric in run.model.metrics:
        for label, v in (verdicts.get(metric) or {}).items():
            if reference is None:
                theirs = None
            else:
                target = label if label in reference.treatments else reference.control
                theirs = (reference.summary.get(metric) or {}).get(target)
            rows.append(
                _row(
                    f"`{metric}`" + (f" [{md(label)}]" if several else ""),
                    theirs,
                    (run.summary.get(metric) or {}).get(label),
                    v,
                    v.extra.get("cv") or [],
                )
            )
    return HEADER + (
        rows
        or [
            "| - | - | - | - | - | - | - | - | nothing compared: "
            f"{_cell(base.refused or 'no verdicts')} |"
        ]
    )


def _own_table(run: RunRecord) -> list[str]:
    """The run's own verdicts, each treatment against the control; a run of one configuration
    shows its medians, judged by nothing."""
    rows = []
    for metric in run.model.metrics:
        per = run.summary.get(metric) or {}
        control = per.get(run.control)
        if run.one_configuration:
            row = control or {}
            alone = Verdict("not judged (one configuration, no baseline)")
            cv = [row.get("cv")] if control else []
            rows.append(_row(f"`{metric}`", None, control, alone, cv, [row.get("n")]))
            continue
        controls = {treatment: against for against, treatment in run.revision_pairs}
        for label, v in (run.verdicts.get(metric) or {}).items():
            against = controls.get(label, run.control)  # under --bench-against: its pair's
            cv = [(row or {}).get("cv") for row in (per.get(against), per.get(label))]
            rows.append(
                _row(
                    f"`{metric}` [{md(label)} vs control {md(against)}]",
                    per.get(against),
                    per.get(label),
                    v,
                    cv,
                )
            )
    return HEADER + (rows or ["| - | - | - | - | - | - | - | - | no verdicts |"])


def _reference(run: RunRecord, run_id: str | None) -> RunRecord | None:
    """The baseline's record (for its medians), None where it cannot be read."""
    if (
        not run_id
        or run.home is None
        or not (run.home / "runs" / run_id / "results.yaml").is_file()
    ):
        return None
    try:
        return load_run(run.home / "runs" / run_id)
    except (OSError, ValueError, UnreadableRecord):
        return None


def _row(
    name: str,
    theirs: Mapping[str, Any] | None,
    mine: Mapping[str, Any] | None,
    verdict: Verdict,
    cv: Sequence[Any],
    n: Sequence[Any] | None = None,
) -> str:
    """One metric's row: both sides' figures, the verdict's ratio, interval, MDE, n and CV."""
    said = verdict.word
    if verdict.reason and said in ("not_comparable", "regressed"):
        said += f": {verdict.reason}"
    cells = [
        name,
        _value(theirs),
        _value(mine),
        ratio(verdict.ratio),
        interval(verdict.ci),
        share(verdict.mde),
        _counts(verdict.n if n is None else n),
        "/".join(share(c) for c in cv) or "-",
        said,
    ]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _counts(n: Sequence[Any]) -> str:
    """The n of each side, ``-`` where none is known."""
    return "/".join(str(k) for k in n) if any(n) else "-"


def _value(row: SummaryRow | None) -> str:
    """A treatment's figure: its median, or an exact metric's values verbatim."""
    if not row or not row.get("n"):
        return "-"
    if row.exact:
        return values_text(row, "`")
    return "-" if row.get("median") is None else number(float(row["median"]))


def _cell(text: str) -> str:
    """Text safe in one markdown table cell (no pipe ends it, no newline breaks the row)."""
    return " ".join(str(text).split()).replace("|", "\\|")
