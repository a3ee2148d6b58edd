"""Sequential replication (``replicates: {min, max}``): the looks a run takes and where they stop.

At each look of :func:`.stats.sequential.look_schedule` that the complete blocks reach,
:func:`.stats.sequential.sequential_decision` on the first *k* blocks; the first look that
stops gives the verdicts. A run that ends between looks (a budget) is analysed as a final look
at its complete blocks; one that ends before ``min`` as a fixed design (no look taken, no
alpha spent). The session calls :func:`sequential_stop` after every trial, and
:func:`sequential_outcome` when the run ends, before ``judge.gate2.judge_run``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_benchmark_agent.config.gate1 import ALPHA
from pytest_benchmark_agent.config.models import ReplicateRange
from pytest_benchmark_agent.judge import evidence
from pytest_benchmark_agent.judge.baseline import primary_metrics
from pytest_benchmark_agent.judge.observations import counter_floors, measure_stages, observations
from pytest_benchmark_agent.records.frozen import freeze
from pytest_benchmark_agent.records.outcomes import SequentialRecord
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.records.schema import TrialRecord

if TYPE_CHECKING:
    from pytest_benchmark_agent.stats import analysis
    from pytest_benchmark_agent.stats import sequential as rule

#: The seed of every resampling the judge does, so a record always gives the same verdicts.
SEED = 0


@dataclass
class SequentialOutcome:
    """Where sequential replication stands: the blocks its verdicts use and why."""

    min_blocks: int
    max_blocks: int
    blocks: int
    stopped: bool
    reason: str
    decision: rule.SequentialDecision | None
    looks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def decided(self) -> str | None:
        """The stop that skips the remaining blocks (a stop at ``max`` skips nothing)."""
        if not self.stopped or self.blocks >= self.max_blocks:
            return None
        return stop_text(self.blocks, self.max_blocks, self.reason)

    def as_record(self, late_trials: int) -> SequentialRecord:
        """The looks as a run's record holds them, with the trials that ran on after the stop."""
        return SequentialRecord(
            min_blocks=self.min_blocks,
            max_blocks=self.max_blocks,
            blocks_used=self.blocks,
            stopped=self.stopped,
            reason=self.reason,
            looks=freeze(self.looks),
            late_trials=late_trials,
        )


def stop_text(blocks: int, max_blocks: int, reason: str) -> str:
    return f"sequential replication stopped after {blocks} of {max_blocks} blocks: {reason}"


def metric_stages(record: RunRecord) -> dict[str, str | None]:
    """The measure stage of each declared metric (:func:`.observations.measure_stages`)."""
    return measure_stages(record.model, record.model.metrics)


def planned_blocks(record: RunRecord) -> dict[int, set[str]]:
    """Trial ids of each planned block (replicate), after selection."""
    blocks: dict[int, set[str]] = {}
    for planned in record.planned:
        blocks.setdefault(planned.replicate, set()).add(planned.id)
    return blocks


def blocks_done(trials: Sequence[TrialRecord], blocks: Mapping[int, set[str]]) -> int:
    """How many leading blocks have every planned trial recorded (not ``not_run``)."""
    ran = {t.id for t in trials if t.status != "not_run"}
    done = 0
    while done in blocks and blocks[done] <= ran:
        done += 1
    return done


def until(record: RunRecord) -> str:
    """What a range of replicates adds blocks until (:data:`.models.UNTIL`): as declared, else
    ``gate`` for a revision comparison (``--bench-against``), else ``verdicts``."""
    replicates = record.model.replicates
    declared = replicates.until if isinstance(replicates, ReplicateRange) else None
    return declared or ("gate" if record.revisions else "verdicts")


def _decide(record: RunRecord, blocks: int, replicates: ReplicateRange) -> rule.SequentialDecision:
    """The look at ``blocks``: every treatment against the control, or under ``--bench-against``
    with a treatment variable each revision pair alone at alpha / pairs (as the judge does)."""
    from pytest_benchmark_agent.stats import sequential as rule  # only a sequential run needs it
    from pytest_benchmark_agent.stats.analysis import Judging

    mode = until(record)
    spending = rule.OBRIEN_FLEMING if mode == "verdicts" else rule.POCOCK
    pairs = record.revision_pairs if len(record.revision_pairs) > 1 else ()
    groups = pairs or ((record.control, None),)
    judging = Judging(ALPHA / len(groups), SEED, counter_floors(record.model, record.trials))
    decisions = []
    for control, treatment in groups:
        treatments = [control, treatment] if treatment else list(record.treatments)
        obs, _ = observations(
            record.trials,
            list(record.model.metrics),
            treatments,
            upto=blocks,
            stage_of=metric_stages(record),
        )
        decisions.append(
            rule.sequential_decision(
                obs,
                record.model.metrics,
                treatments,
                control,
                blocks_done=blocks,
                looks=rule.Looks(replicates.min, replicates.max, spending),
                judging=judging,
            )
        )
    decision = _merged(decisions)
    if blocks not in rule.look_schedule(replicates.min, replicates.max) or (
        mode == "verdicts" and decision.stop
    ):
        return decision
    settled = _gate_settled(record, decision.analysis, mode)
    if settled is not None:
        return dataclasses.replace(decision, stop=True, reason=f"{settled} after {blocks} blocks")
    if blocks >= replicates.max or mode == "verdicts":
        return decision
    # decided verdicts do not stop a run that waits for the gate (a bisect step's verdict can
    # be decided while its interval still straddles the midpoint)
    return dataclasses.replace(
        decision, stop=False, reason=f"{blocks} of {replicates.max} blocks; the gate cannot decide"
    )


def _merged(decisions: Sequence[rule.SequentialDecision]) -> rule.SequentialDecision:
    """One look's decisions over the revision pairs as one: it stops when every pair stops."""
    if len(decisions) == 1:
        return decisions[0]
    from pytest_benchmark_agent.stats import analysis

    merged = analysis.RunAnalysis(verdicts={})
    for one in decisions:
        for metric, per in one.analysis.verdicts.items():
            merged.verdicts.setdefault(metric, {}).update(per)
        merged.caveats += one.analysis.caveats
        merged.refusals += one.analysis.refusals
        merged.findings += one.analysis.findings
    stop = all(d.stop for d in decisions)
    reasons = [d.reason for d in decisions if d.stop == stop]
    first = decisions[0]
    return dataclasses.replace(first, stop=stop, reason="; ".join(reasons), analysis=merged)


def _gate_settled(record: RunRecord, result: analysis.RunAnalysis, mode: str) -> str | None:
    """Why a look may stop for the gate although a verdict is open: every primary comparison
    is decided by :func:`.evidence.gate_decision` (``gate``: regressed beyond its
    ``fail_threshold`` or that ruled out; ``midpoint``: its interval wholly on one side of the
    bisect midpoint); None otherwise. ``verdicts`` stops so only when every primary metric
    declares its ``fail_threshold``. Stopping adds no false verdict: the looks' levels hold
    whenever a run stops."""
    specs = record.model.metrics
    primaries = primary_metrics(specs)
    if mode == "verdicts" and any(specs[m].fail_threshold is None for m in primaries):
        return None
    mode = "gate" if mode == "verdicts" else mode
    decided = [
        evidence.gate_decision(
            v, evidence.fail_threshold(metric, specs[metric]), specs[metric].direction, mode
        )
        for metric in primaries
        for v in result.verdicts.get(metric, {}).values()
    ]
    if not decided or None in decided:
        return None
    if mode == "midpoint":
        return "every primary interval lies wholly on one side of the bisect midpoint"
    return (
        "the CI gate can decide: every primary metric regressed beyond its fail_threshold "
        "or its interval rules that out"
    )


def sequential_stop(record: RunRecord, looked: set[int]) -> str | None:
    """After a trial: the stop reason when a look not taken yet (``looked`` holds those taken)
    says stop before ``max``, from the trials ``record`` holds."""
    replicates = record.model.replicates
    if not isinstance(replicates, ReplicateRange):
        return None
    from pytest_benchmark_agent.stats import sequential as rule  # only a sequential run needs it

    done = blocks_done(record.trials, planned_blocks(record))
    for look in rule.look_schedule(replicates.min, replicates.max):
        if look > done or look >= replicates.max:
            break
        if look in looked:
            continue
        looked.add(look)
        decision = _decide(record, look, replicates)
        if decision.stop:
            return stop_text(look, replicates.max, decision.reason)
    return None


def sequential_outcome(record: RunRecord) -> SequentialOutcome | None:
    """The looks a finished run reached, from its record (None for a fixed design)."""
    replicates = record.model.replicates
    if not isinstance(replicates, ReplicateRange):
        return None
    from pytest_benchmark_agent.stats import sequential as rule  # only a sequential run needs it

    done = blocks_done(record.trials, planned_blocks(record))
    looks: list[dict[str, Any]] = []
    last: rule.SequentialDecision | None = None
    low, high = replicates.min, replicates.max
    for look in rule.look_schedule(low, high):
        if look > done:
            break
        last = _decide(record, look, replicates)
        looks.append(
            {"blocks": look, "stop": last.stop, "level": last.level, "reason": last.reason}
        )
        if last.stop:
            return SequentialOutcome(low, high, look, True, last.reason, last, looks)
    if done < low:
        why = (
            f"only {done} complete block(s), fewer than replicates.min {low}: analysed as a "
            "fixed design"
        )
        return SequentialOutcome(low, high, done, False, why, None, looks)
    if last is None or last.look != done:
        last = _decide(record, done, replicates)
    why = (
        f"ended after {done} complete blocks, between looks: analysed as a final look "
        f"({last.reason})"
    )
    return SequentialOutcome(low, high, done, False, why, last, looks)
