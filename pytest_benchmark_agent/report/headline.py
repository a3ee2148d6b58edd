"""The answer a report opens with, before any table (criterion leads with "Performance has
improved"): one line per primary comparison in words and numbers, the tag and the CI gate
beside it, and the machine's warnings of the session.

A comparison's line is :func:`.summary_lines.comparison_text`, the terminal's own (``optimize:
p50_ms 48x faster than none (x0.0209, 95% [0.0185, 0.0275]) - improved``); against a
``--bench-baseline`` the primary verdicts the CI gate read. The gate's outcome and first reason
are the record's, as gate 2 wrote them (never reworded here). The lines are plain text: each
report escapes them for its own format.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_benchmark_agent.judge.baseline import primary_metrics
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.report.summary_lines import comparison_text
from pytest_benchmark_agent.stats.comparability import Verdict


@dataclass(frozen=True)
class Headline:
    """What a report says first: the answers, the tag, the CI gate and the machine."""

    answers: list[str]
    tag: str
    #: The tag's first reason, "" for none.
    tag_reason: str
    #: The CI gate's outcome as recorded (None where the run has none) and its first reason.
    gate: str | None
    gate_reason: str
    warnings: list[str]

    def tag_text(self) -> str:
        """``EXPLORATORY (its first reason)``."""
        return self.tag + (f" ({self.tag_reason})" if self.tag_reason else "")

    def gate_text(self) -> str:
        """``passed: its first reason``, "" without a gate."""
        return (self.gate or "") + (
            f": {self.gate_reason}" if self.gate and self.gate_reason else ""
        )


def headline(run: RunRecord) -> Headline:
    """The run's answer, tag, CI gate and machine warnings."""
    gate = run.ci_gate or (run.baseline.gate if run.baseline is not None else None)
    host = (run.fingerprint or {}).get("host_check") or {}
    return Headline(
        answers=_answers(run),
        tag=run.tag,
        tag_reason=run.tag_reasons[0] if run.tag_reasons else "",
        gate=gate.outcome if gate is not None else None,
        gate_reason=gate.reasons[0] if gate is not None and gate.reasons else "",
        warnings=[str(w) for w in host.get("warnings") or []],
    )


def _answers(run: RunRecord) -> list[str]:
    """One line per treatment and primary metric (and per primary verdict against the
    baseline), or the sentence saying why there is none."""
    primaries = primary_metrics(run.model.metrics)
    lines = [
        comparison_text(label, run.control, metric, verdict) or _unmeasured(label, metric, verdict)
        for metric in primaries
        for label, verdict in (run.verdicts.get(metric) or {}).items()
    ]
    base = run.baseline
    if base is not None and base.run_id:
        for metric in primaries:
            for label, verdict in (base.gated_verdicts.get(metric) or {}).items():
                against = f"baseline {base.run_id}"
                said = comparison_text(f"this session [{label}]", against, metric, verdict)
                lines.append(said or _unmeasured(f"this session [{label}]", metric, verdict))
    if lines:
        return lines
    if run.one_configuration:
        return [
            f"one configuration ({run.control}): nothing is compared within this run; "
            "--bench-baseline REF judges it against another run"
        ]
    return ["no verdict on a primary metric: What Went Wrong says why"]


def _unmeasured(label: str, metric: str, verdict: Verdict) -> str:
    """A verdict without a ratio (refused, too small): its word and why."""
    why = f" ({verdict.reason})" if verdict.reason else ""
    return f"{label}: {metric} {verdict.word}{why}"
