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

from pytest_benchmark_agent.config.models import ReplicateRange
from pytest_benchmark_agent.judge import evidence
from pytest_benchmark_agent.judge.baseline import primary_metrics
from pytest_benchmark_agent.judge.observations import counter_floors, measure_stages, observations
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

    def as_record(self) -> dict[str, Any]:
        return {
            "min": self.min_blocks,
            "max": self.max_blocks,
            "blocks_used": self.blocks,
            "stopped": self.stopped,
            "reason": self.reason,
            "looks": self.looks,
        }


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


def _decide(record: RunRecord, blocks: int, replicates: ReplicateRange) -> rule.SequentialDecision:
    from pytest_benchmark_agent.stats import sequential as rule  # only a sequential run needs it

    specs = record.model.metrics
    obs, _ = observations(
        record.trials,
        list(specs),
        record.treatments,
        upto=blocks,
        stage_of=metric_stages(record),
    )
    decision = rule.sequential_decision(
        obs,
        specs,
        list(record.treatments),
        record.control,
        blocks_done=blocks,
        min_blocks=replicates.min,
        max_blocks=replicates.max,
        seed=SEED,
        counter_floors=counter_floors(record.model, record.trials),
    )
    if decision.stop or blocks not in rule.look_schedule(replicates.min, replicates.max):
        return decision
    settled = _gate_settled(record, decision.analysis)
    if settled is None:
        return decision
    return dataclasses.replace(decision, stop=True, reason=f"{settled} after {blocks} blocks")


def _gate_settled(record: RunRecord, result: analysis.RunAnalysis) -> str | None:
    """Why a look may stop for the CI gate although a verdict is open: every primary metric
    declares a ``fail_threshold`` and each comparison already regressed beyond it or could have
    seen it (:func:`.evidence.judge_metric`); None otherwise. Stopping adds no false verdict:
    the looks' levels hold whenever a run stops."""
    specs = record.model.metrics
    primaries = primary_metrics(specs)
    if not primaries or any(specs[m].fail_threshold is None for m in primaries):
        return None
    outcomes = [
        evidence.judge_metric(metric, v, specs[metric]).outcome
        for metric in primaries
        for v in result.verdicts.get(metric, {}).values()
    ]
    if not outcomes or "unjudged" in outcomes:
        return None
    return (
        "the CI gate can decide: every primary metric regressed beyond its fail_threshold "
        "or could have seen it"
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
