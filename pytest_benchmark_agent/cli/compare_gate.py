"""``compare A B`` as a gate, and what it says besides the table.

``--fail-on regression[,unjudged]`` turns B against A into the session's CI gate
(:func:`.judge.ci_gate.baseline_gate`, A as the baseline) with the session's exit codes: 1 when
the gate fails as named, else 0 (pytest-benchmark's compare-fail, outside pytest). The verb also
says which run each REF resolved to and why, lists the code's differences on one line, and
gives the geometric mean of B's ratios over the metrics of one direction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_benchmark_agent.judge.baseline import Resolution
from pytest_benchmark_agent.judge.ci_gate import baseline_gate, unjudged
from pytest_benchmark_agent.records.frozen import freeze
from pytest_benchmark_agent.records.outcomes import GateRecord
from pytest_benchmark_agent.records.record import BaselineComparison, RunRecord
from pytest_benchmark_agent.report.summary_lines import geomean_text
from pytest_benchmark_agent.stats.comparability import Verdict
from pytest_benchmark_agent.stats.geomean import geometric_mean
from pytest_benchmark_agent.util.safetext import one_line

#: Code fields shown by name before the rest are counted.
_CODE_SHOWN = 2


def resolution_lines(sides: Sequence[tuple[str, Resolution]]) -> list[str]:
    """``A: main -> 2026-...-3f2a (git revision 1a2b3c4)``: what each REF named, and how."""
    return [
        one_line(f"{side}: `{found.ref}` -> {found.run_id} ({found.how})") for side, found in sides
    ]


def code_difference_line(differences: Sequence[str]) -> list[str]:
    """The code's differences on one line: the run's code identity (commit, dirty state)
    first, the per-path fields (one per code path: many in a bisect's worktrees) counted."""
    if not differences:
        return []
    identity = [d for d in differences if d.startswith("code_identity")]
    shown = (identity or list(differences))[:_CODE_SHOWN]
    rest = len(differences) - len(shown)
    more = f" (and {rest} more code field(s))" if rest else ""
    return [one_line(f"  code differences: {'; '.join(shown)}{more}")]


def geomean_lines(
    verdicts: Mapping[str, Mapping[str, Verdict]], specs: Mapping[str, Any]
) -> list[str]:
    """Per direction and treatment of B, the geometric mean of its ratios against A over the
    metrics of that direction (two or more, primaries first)."""
    lines = []
    for direction in ("lower", "higher"):
        metrics = [m for m, spec in specs.items() if spec.direction == direction]
        metrics.sort(key=lambda m: not specs[m].primary)
        labels = dict.fromkeys(label for m in metrics for label in verdicts.get(m) or {})
        for label in labels:
            parts = []
            for metric in metrics:
                verdict = (verdicts.get(metric) or {}).get(label)
                if verdict is not None and not verdict.not_comparable:
                    parts.append((metric, verdict.ratio, verdict.ci))
            mean = geometric_mean(parts)
            if mean is not None:
                lines.append(one_line(f"  {geomean_text(f'[{label}] B/A', direction, mean)}"))
    return lines


def compare_gate(
    a: RunRecord,
    b: RunRecord,
    verdicts: Mapping[str, Mapping[str, Verdict]],
    specs: Mapping[str, Any],
    refusal: str | None,
) -> GateRecord:
    """The session's CI gate for B with A as its baseline."""
    comparison = BaselineComparison(
        run_id=a.run_id,
        refused=refusal,
        code=freeze({"baseline": a.code, "this": b.code}),
        verdicts=freeze(verdicts),
    )
    return baseline_gate(comparison, specs)


def missing_gate(problem: str) -> GateRecord:
    """The gate when A or B names no run: unjudged, as a session's baseline naming none."""
    return unjudged([problem])


def gate_lines(gate: GateRecord) -> list[str]:
    """``CI gate: REGRESSED: reason`` and the further reasons, as the session prints them."""
    reasons = gate.reasons
    head = f"CI gate: {gate.word}"
    lines = [head + (f": {reasons[0]}" if reasons else "")]
    return [one_line(line) for line in lines + [f"  {reason}" for reason in reasons[1:]]]


def gate_exit(gate: GateRecord, fail_on: Sequence[str]) -> int:
    """The session's exit code for ``gate`` under ``--fail-on``: 1 when it failed as named."""
    return 1 if gate.fails(fail_on) else 0
