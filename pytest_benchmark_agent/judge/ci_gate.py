"""The CI gate: what ``--bench-fail-on`` (and ``compare --fail-on``) act on.

Against a baseline (:func:`baseline_gate`), ``regressed`` when a primary metric regressed beyond
its ``fail_threshold`` or a guard metric regressed, ``unjudged`` when the baseline was not
found, not comparable, or no primary could be compared, else ``passed``; without one,
:func:`ci_gate` judges within the run, each treatment against the control. Every primary
comparison is judged by :func:`.evidence.judge_metric`: a pass needs evidence.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_benchmark_agent.judge import evidence
from pytest_benchmark_agent.judge.baseline import primary_metrics
from pytest_benchmark_agent.records.outcomes import GateRecord
from pytest_benchmark_agent.records.record import BaselineComparison, RunRecord
from pytest_benchmark_agent.stats.units import ratio

_WITHIN = (
    "judged within one session: the treatments ran interleaved in blocks, compared block by block"
)


def unjudged(reasons: list[str]) -> GateRecord:
    """The gate when nothing could be judged, and why."""
    return GateRecord("unjudged", tuple(reasons))


def baseline_gate(baseline: BaselineComparison, specs: Mapping[str, Any]) -> GateRecord:
    """The CI gate against a baseline, each primary metric by :func:`.evidence.judge_metric` on
    its verdict judged with the session as the unit (``judged``; ``verdicts`` for a record
    without one): ``regressed`` when one regressed beyond its ``fail_threshold`` or a guard
    metric regressed (for an ``equal`` guard: changed); ``unjudged`` when one could not have
    seen its threshold or could not be compared; ``passed`` when each could and did not.
    Each outcome gives its reasons; the first says how it was judged."""
    where = f"baseline {baseline.run_id}"
    both = f"{baseline.code.get('baseline')} -> {baseline.code.get('this')}"
    if baseline.refused:
        return unjudged([f"not comparable with {where} ({both}): {baseline.refused}"])
    verdicts = baseline.gated_verdicts
    primaries = primary_metrics(specs)
    judged: list[evidence.MetricGate] = []
    for metric in primaries:
        for label, v in verdicts.get(metric, {}).items():
            said = (
                f"`{metric}` [{label}] {v.word} {ratio(v.ratio, 3)} "
                f"against {v.extra.get('against')} ({both})"
            )
            judged.append(evidence.judge_metric(said, v, metric, specs[metric]))
    guards = [
        f"guard `{metric}` [{label}] changed against {v.extra.get('against')} "
        f"({both}): " + (v.reason or f"{ratio(v.ratio, 3)}")
        for metric, spec in specs.items()
        if spec.guard and metric not in primaries
        for label, v in verdicts.get(metric, {}).items()
        if v.regressed
    ]
    mode = _across_mode(baseline, primaries)
    if guards:
        failed = [g.text for g in judged if g.outcome == "regressed"]
        return GateRecord("regressed", _first(failed + guards, mode))
    return _gate(judged, f"against {where} ({both})", mode)


def _across_mode(baseline: BaselineComparison, primaries: Sequence[str]) -> str:
    """How a comparison with a recorded baseline was judged (the first primary's spread)."""
    run_to_run = baseline.extra.get("run_to_run") or {}
    for metric in primaries:
        for spread in (run_to_run.get(metric) or {}).values():
            view = evidence.Spread(
                spread["runs"],
                spread.get("sd"),
                spread.get("allowance") or 0.0,
                spread["source"],
                spread.get("df") or 0,
            )
            return f"judged across runs, one session each: {view.words()}"
    return "judged across runs, one session each"


def _gate(judged: Sequence[evidence.MetricGate], where: str, mode: str) -> GateRecord:
    """The gate's record from its primary comparisons: the failures, else the comparisons that
    could not see their threshold, else the pass; then every other comparison's line."""
    outcome = evidence.gate_outcome(judged)
    lines = [g.text for g in judged if g.outcome == outcome]
    rest = [g.text for g in judged if g.outcome != outcome]
    if not judged:
        return unjudged([f"no primary metric could be compared {where}"])
    if outcome == "passed":
        lines = [
            f"every primary metric's interval rules out a regression beyond its fail_threshold "
            f"{where}",
            *lines,
        ]
    return GateRecord(outcome, _first(lines + rest, mode))


def _first(reasons: list[str], mode: str) -> tuple[str, ...]:
    """The reasons with the mode that judged them appended to the first (the gate line)."""
    return (f"{reasons[0]}; {mode}", *reasons[1:]) if reasons else (mode,)


def ci_gate(record: RunRecord) -> GateRecord:
    """The outcome ``--bench-fail-on`` acts on: against the baseline when one was given, else
    within the run, each primary metric of each treatment against the control by
    :func:`.evidence.judge_metric` (unjudged when the run had no primary comparison)."""
    if record.baseline is not None and record.baseline.gate is not None:
        return record.baseline.gate
    specs = record.model.metrics
    primaries = primary_metrics(specs)
    # --bench-against with a treatment variable: each treatment's control is itself under REV
    controls = {label: control for control, label in record.revision_pairs}
    judged = []
    for metric in primaries:
        per = record.stats(metric)
        for label, v in record.verdicts.get(metric, {}).items():
            control = controls.get(label, record.control)
            cv = [per.get(side, {}).get("cv") for side in (control, label)]
            said = f"`{metric}` [{label}] {v.word} {ratio(v.ratio, 3)} against the control"
            said += f" {control}"
            with_cv = dataclasses.replace(v, extra={**v.extra, "cv": cv})
            judged.append(evidence.judge_metric(said, with_cv, metric, specs[metric]))
    if judged:
        where = (
            "each against itself under REV"
            if len(controls) > 1
            else f"against the control {record.control}"
        )
        return _gate(judged, where, _WITHIN)
    refused = [r for r in record.refusals if r.split(" [", 1)[0] in primaries]
    return unjudged(
        [
            "no baseline (--bench-baseline) and no comparison within the run that could be made",
            *refused,
        ]
    )


def regressions(record: RunRecord) -> list[str]:
    """Every primary metric that regressed, in the run and against its baseline."""
    out = []
    for metric in primary_metrics(record.model.metrics):
        for treatment, verdict in record.verdicts.get(metric, {}).items():
            if verdict.regressed:
                out.append(
                    f"`{metric}` regressed for {treatment} ({ratio(verdict.ratio, 3)} "
                    f"of the control {record.control})"
                )
        if record.baseline is None:
            continue
        code = record.baseline.code
        for treatment, verdict in record.baseline.gated_verdicts.get(metric, {}).items():
            if verdict.regressed:
                out.append(
                    f"`{metric}` regressed for {treatment} against baseline "
                    f"{verdict.extra.get('against')} ({ratio(verdict.ratio, 3)}, "
                    f"{code.get('baseline')} -> {code.get('this')})"
                )
    return out
