"""Selection: what gate 2 says about a round's candidates, and which one the round supports.

A candidate is *eligible* only when gate 2 (:func:`.analysis.analyze_run`, the objective as
the primary metric plus the file's guard metrics) calls it ``improved`` on the objective, none
of its trials was non-comparable, and every constraint holds on every one of its passed
samples. Among several eligible candidates the best ratio wins unless another is *tied* with
it (gate 2 between the two says no change and the estimated difference is inside the noise
threshold): then the simplest move (fewest params changed, then fewest lattice steps, then
earliest). Pure functions of a round's record; the tuner keeps the state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pytest_benchmark_agent.config.models import BenchmarkConfig, ReplicateRange
from pytest_benchmark_agent.judge.observations import measure_stages, observations
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.records.schema import TrialRecord
from pytest_benchmark_agent.stats import analysis, sequential
from pytest_benchmark_agent.stats.comparability import Verdict, is_guarded
from pytest_benchmark_agent.stats.describe import describe
from pytest_benchmark_agent.tune.space import Point, SearchSpace

#: Verdicts of the objective per candidate label, of ``labels[1:]`` against ``labels[0]``.
Compare = Callable[[Sequence[str], dict[str, Any]], dict[str, Verdict]]


@dataclass
class Candidate:
    """One point judged against the incumbent of its round."""

    round: int
    label: str
    point: Point
    incumbent: str
    decision: str  # selected | tied | no_change | worse | constraint_failed | not_comparable
    reason: str
    verdict: dict[str, Any] | None = None
    median: float | None = None
    observed_better: bool = False
    constraints: list[dict[str, Any]] = field(default_factory=list)

    def as_record(self) -> dict[str, Any]:
        return asdict(self)


def metric_specs(config: BenchmarkConfig, space: SearchSpace) -> dict[str, Any]:
    """The objective as the primary metric, plus every declared guard (gate 2 applies them)."""
    base = config.metrics.get(space.objective)
    defaults = analysis.PlainMetricRule()
    specs: dict[str, Any] = {
        space.objective: analysis.PlainMetricRule(
            direction=space.direction,
            primary=True,
            guard=False,
            floor=base.floor if base else None,
            ceiling=base.ceiling if base else None,
            noise_threshold=base.noise_threshold if base else defaults.noise_threshold,
            min_replicates=base.min_replicates if base else defaults.min_replicates,
        )
    }
    for name, spec in config.metrics.items():
        if name != space.objective and is_guarded(spec):
            specs[name] = spec
    return specs


def comparer(record: RunRecord, config: BenchmarkConfig, objective: str) -> Compare:
    """Gate 2 on ``record``: the objective's verdicts of some labels against the first, with
    ``specs`` (the objective and the metrics whose comparisons join Holm's family).

    The samples are the shared extractor's (:func:`.observations.observations`: passed trials,
    each metric from its own measure stage, blocks per host). A round of a ``replicates: {min,
    max}`` file is judged at the look its session stopped at, with the same alpha spending
    (:func:`.sequential.sequential_decision`); one that ended before ``min`` as a fixed design.
    """
    trials = record.trials
    replicates = config.replicates
    look = None
    if isinstance(replicates, ReplicateRange):
        looked = record.sequential
        blocks = looked.blocks_used if looked is not None else _complete_blocks(trials)
        look = blocks if blocks >= replicates.min else None

    def compare(labels: Sequence[str], specs: dict[str, Any]) -> dict[str, Verdict]:
        stages = measure_stages(config, list(specs))
        drawn, _ = observations(trials, list(specs), labels, upto=look, stage_of=stages)
        if look is None or not isinstance(replicates, ReplicateRange):
            result = analysis.analyze_run(drawn, specs, list(labels), labels[0])
        else:
            result = sequential.sequential_decision(
                drawn,
                specs,
                list(labels),
                labels[0],
                blocks_done=look,
                looks=sequential.Looks(replicates.min, replicates.max),
            ).analysis
        return result.verdicts[objective]

    return compare


def _complete_blocks(trials: Sequence[TrialRecord]) -> int:
    """Leading blocks (replicates) in which no trial is ``not_run``."""
    skipped = {t.replicate for t in trials if t.status == "not_run"}
    ran = {t.replicate for t in trials if t.status != "not_run"}
    done = 0
    while done in ran and done not in skipped:
        done += 1
    return done


def objective_stage(config: BenchmarkConfig, objective: str) -> str | None:
    """The measure stage whose trials carry the objective (None: any measure stage)."""
    return measure_stages(config, [objective])[objective]


def trials_by_label(record: RunRecord, labels: list[str]) -> dict[str, list[TrialRecord]]:
    """The trials of each label that ran (``not_run`` left out)."""
    table: dict[str, list[TrialRecord]] = {label: [] for label in labels}
    for trial in record.trials:
        if trial.treatment in table and trial.status != "not_run":
            table[trial.treatment].append(trial)
    return table


def constraint_checks(space: SearchSpace, trials: Sequence[TrialRecord]) -> list[dict]:
    """Each constraint against every passed sample: ok only when all of them meet it."""
    checks = []
    for constraint in space.constraints:
        values = [
            float(t.metrics[constraint.metric])
            for t in trials
            if t.status == "passed" and constraint.metric in t.metrics
        ]
        if not values:
            checks.append(
                {
                    "constraint": constraint.text,
                    "ok": False,
                    "worst": None,
                    "detail": "no passed sample reports it",
                }
            )
            continue
        worst = constraint.worst(values)
        bad = sum(1 for v in values if not constraint.holds(v))
        detail = (
            f"all {len(values)} samples meet it (worst {worst:g})"
            if not bad
            else f"{bad} of {len(values)} samples break it (worst {worst:g})"
        )
        checks.append(
            {"constraint": constraint.text, "ok": not bad, "worst": worst, "detail": detail}
        )
    return checks


def classify(
    space: SearchSpace,
    index: int,
    label: str,
    point: Point,
    incumbent: str,
    trials: list[TrialRecord],
    verdict: Verdict,
) -> Candidate:
    """The candidate ``label`` of round ``index``: eligible, or why it is not."""
    values = [
        t.metrics[space.objective]
        for t in trials
        if t.status == "passed" and space.objective in t.metrics
    ]
    better = verdict.ratio is not None and (
        verdict.ratio < 1 if space.direction == "lower" else verdict.ratio > 1
    )
    constraints = constraint_checks(space, trials)
    decision, reason = _decision(trials, verdict, constraints, incumbent)
    return Candidate(
        index,
        label,
        dict(point),
        incumbent,
        decision,
        reason,
        verdict.to_dict(),
        describe(values).get("median"),
        better,
        constraints,
    )


def _decision(
    trials: list[TrialRecord],
    verdict: Verdict,
    constraints: list[dict[str, Any]],
    incumbent: str,
) -> tuple[str, str]:
    """A candidate's decision and why: not comparable (a trial or gate 2 refused), a constraint
    broken, eligible (a supported improvement), worse, or not shown to differ."""
    broken = [t for t in trials if t.status == "not_comparable"]
    failed = [t for t in trials if t.status not in ("passed", "not_comparable")]
    if broken:
        return "not_comparable", gist(broken[0].reason)
    if verdict.verdict == "not_comparable":
        reason = verdict.reason or "gate 2 refused the comparison"
        if failed:
            reason = (
                f"{len(failed)} of {len(trials)} trials did not pass "
                f"({gist(failed[0].reason)}); "
                f"{reason}"
            )
        return "not_comparable", reason
    if any(not c["ok"] for c in constraints):
        return "constraint_failed", "; ".join(
            f"{c['constraint']}: {c['detail']}" for c in constraints if not c["ok"]
        )
    if verdict.verdict == "improved":
        return "eligible", "supported improvement"
    if verdict.verdict == "regressed":
        return "worse", "significantly worse than the incumbent"
    return "no_change", (
        f"not shown to differ from {incumbent}: {verdict.reason or 'no supported difference'}"
    )


def choose(
    space: SearchSpace,
    index: int,
    incumbent: Point,
    incumbent_label: str,
    judged: list[Candidate],
    compare: Compare,
    spec: Any,
) -> tuple[Candidate | None, list[str]]:
    """The round's supported move among ``judged`` (decisions updated) and the ties it broke.

    Tied means gate 2 finds no change between the two and the estimated difference is
    inside the noise threshold; an underpowered comparison alone is not a tie.
    """
    eligible = [c for c in judged if c.decision == "eligible"]
    if not eligible:
        return None, []
    sign = 1 if space.direction == "lower" else -1
    best = min(eligible, key=lambda c: sign * c.verdict["ratio"])
    tied = [best]
    others = [c for c in eligible if c is not best]
    if others:
        versus = compare([best.label, *(c.label for c in others)], {space.objective: spec})
        tied += [
            c
            for c in others
            if versus[c.label].verdict == "no_change"
            and abs(versus[c.label].ratio - 1) <= spec.noise_threshold
        ]
    order = {c.label: i for i, c in enumerate(judged)}
    chosen = min(tied, key=lambda c: (space.distance(incumbent, c.point), order[c.label]))
    ties: list[str] = []
    for candidate in eligible:
        if candidate is chosen:
            candidate.decision, candidate.reason = "selected", "supported improvement"
        elif candidate in tied:
            candidate.decision = "tied"
            candidate.reason = (
                f"improved on {incumbent_label} but not shown to differ from "
                f"{chosen.label}; kept the simpler {chosen.label}"
            )
            ties.append(
                f"round {index}: {candidate.label} and {chosen.label} both "
                f"improved on {incumbent_label} and were not shown to differ from each "
                f"other; selected the simpler {chosen.label}."
            )
        else:
            candidate.decision = "worse"
            candidate.reason = f"improved on {incumbent_label}, but less than {best.label}"
    return chosen, ties


def gist(text: Any) -> str:
    """One line of a trial's reason: its first line, what differed, and the last stderr line."""
    lines = [line.strip() for line in str(text or "").strip().splitlines() if line.strip()]
    if not lines:
        return "no reason recorded"
    parts = [lines[0]]
    parts += [line for line in lines[1:] if line.startswith("effective params differ")]
    if any(line.startswith("stderr (last lines)") for line in lines) and not lines[-1].startswith(
        "stderr (last lines)"
    ):
        parts.append(f"stderr: {lines[-1]}")
    return "; ".join(parts)
