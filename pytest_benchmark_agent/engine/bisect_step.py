"""The outcome of one ``bisect`` step, and the evidence for it, from its run's record.

A step measures GOOD and the candidate commit interleaved in one session (``--bench-against
GOOD``), so the machine it ran on cancels. The first step, BAD, is judged by the CI gate's rule
(:func:`.evidence.gate_decision`): ``bad`` when a primary metric regressed beyond its
``fail_threshold``, ``good`` when every interval rules that out. Its ratio to GOOD sets each
regressed metric's **midpoint** (the geometric midpoint between GOOD and BAD), and every later
step hunts that regression: ``bad`` when the candidate's interval lies wholly beyond the
midpoint (closer to BAD), ``good`` when it lies wholly before it, so a step resolves half the
regression, not 5%. ``bisect --threshold X`` keeps the gate's rule at X for every step instead.
Anything else is ``skip`` (git bisect then reports the range it could not split rather than
guessing); the adaptive blocks of each step add blocks until it decides, up to their cap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_benchmark_agent.judge.baseline import FINISHED, primary_metrics
from pytest_benchmark_agent.judge.evidence import fail_threshold, gate_decision
from pytest_benchmark_agent.records.record import RunRecord, load_run
from pytest_benchmark_agent.stats.comparability import Verdict
from pytest_benchmark_agent.stats.units import interval, ratio


@dataclass(frozen=True)
class Evidence:
    """One primary metric of a step: the candidate against GOOD, and the rule judging it."""

    metric: str
    label: str
    verdict: Verdict
    threshold: float
    direction: str
    #: ``gate`` (BAD, or every step with ``--threshold``) or ``midpoint`` (hunting BAD's).
    rule: str = "gate"

    @property
    def outcome(self) -> str | None:
        """``regressed``, ``passed`` or None (undecided), by :func:`.evidence.gate_decision`."""
        return gate_decision(self.verdict, self.threshold, self.direction, self.rule)

    def line(self) -> str:
        """``loop_ms x1.10 [1.07, 1.13] MDE 5.4% (fail_threshold 5%): regressed``; a hunting
        step names its midpoint (``midpoint x1.22``) and whether it lies beyond it."""
        v = self.verdict
        shown = interval(v.ci) if v.ci else "[-]"
        detected = "-" if v.mde is None else f"{100 * v.mde:.3g}%"
        if self.rule == "midpoint":
            side = {"regressed": "beyond", "passed": "before"}.get(self.outcome or "", "across")
            mid = 1 - self.threshold if self.direction == "higher" else 1 + self.threshold
            where = f"{side} midpoint {ratio(mid)}"
            return f"{self.metric} {ratio(v.ratio)} {shown} MDE {detected}: {where}"
        return (
            f"{self.metric} {ratio(v.ratio)} {shown} MDE {detected} "
            f"(fail_threshold {100 * self.threshold:.3g}%): {self.outcome or 'undecided'}"
        )


def evidence(
    record: RunRecord, midpoints: Mapping[str, float] | None = None, threshold: float | None = None
) -> list[Evidence]:
    """The primary metrics' comparisons of a step's run (the candidate against GOOD): with
    ``midpoints`` (metric -> ratio) the hunting rule for those metrics, else the gate's at
    ``threshold`` (default: each metric's ``fail_threshold``)."""
    specs = record.model.metrics
    found = []
    for metric in primary_metrics(specs):
        spec = specs[metric]
        if midpoints:
            if metric not in midpoints:
                continue
            limit, rule = abs(midpoints[metric] - 1), "midpoint"
        else:
            limit = fail_threshold(metric, spec) if threshold is None else threshold
            rule = "gate"
        for label, verdict in (record.verdicts.get(metric) or {}).items():
            found.append(Evidence(metric, label, verdict, limit, spec.direction, rule))
    return found


def judged(
    run_dir: Path,
    code: int | None,
    midpoints: Mapping[str, float] | None = None,
    threshold: float | None = None,
) -> tuple[str, str]:
    """The step's outcome (good, bad, skip) and its evidence, from its run's record (pytest's
    exit code, None for a run recovered from its record alone, is only reported)."""
    how = "recovered from its record" if code is None else f"pytest exit {code}"
    record = load_run(run_dir) if (run_dir / "results.yaml").is_file() else None
    if record is None or record.state not in FINISHED:
        state = record.state if record is not None and record.state else "none: no record"
        return "skip", f"{how}; the run did not finish (state {state})"
    found = evidence(record, midpoints, threshold)
    said = "; ".join(e.line() for e in found)
    if not found:
        return "skip", f"{how}; no primary metric was compared with GOOD"
    if any(e.outcome == "regressed" for e in found):
        return "bad", said
    if all(e.outcome == "passed" for e in found):
        return "good", said
    return "skip", f"{how}; could not decide within {record.model.max_replicates} blocks: {said}"


def midpoints_of(run_dir: Path) -> dict[str, float]:
    """BAD's step: the geometric midpoint between GOOD and BAD of each primary metric that
    regressed (the square root of its ratio to GOOD)."""
    return {
        e.metric: math.sqrt(e.verdict.ratio)
        for e in evidence(load_run(run_dir))
        if e.outcome == "regressed" and e.verdict.ratio and e.verdict.ratio > 0
    }
