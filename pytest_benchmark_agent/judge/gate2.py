"""Gate 2 for a finished run: verdicts, refusals and caveats, per host, with sequential looks,
the comparison with a baseline, the reproduction check, and the reliability tag.

The session calls :func:`sequential_outcome` and :func:`judge_run` when a run ends (after
``summarize``), and :func:`sequential_stop` after every trial of a ``replicates: {min, max}``
run. The statistics are :mod:`.analysis`'s; this module decides what goes in:

* **Observations** are the passed trials' values of the declared metrics, one per (treatment,
  replicate, seed): the replicate is the block.
* **Hosts** (``trial["host"]``): a block is only ever paired within one host (its replicate is
  renumbered per host), so the paired test compares treatment and control within each host and
  pools the within-host differences: a stratified analysis. Each host is also analysed alone;
  when one host says ``improved`` and another ``regressed``, the run's verdict is
  ``not_comparable`` naming both (the direction is reported, never averaged away), and opposite
  point estimates beyond the noise threshold are a caveat even when neither is significant.
* **Sequential replication**: at each look of :func:`.sequential.look_schedule` that the complete
  blocks reach, :func:`.sequential.sequential_decision` on the first *k* blocks; the first look
  that stops gives the verdicts. A run that ends between looks (a budget) is analysed as a final
  look at its complete blocks; one that ends before ``min`` as a fixed design (no look taken,
  no alpha spent).
* **Nothing to compare** (a cached session measuring one treatment, a smoke run of 1 replicate):
  when every comparison would be refused before a test runs (a side without samples, or fewer
  than ``min_replicates``), :func:`evaluate` writes those refusals itself, by the rules of
  :mod:`.comparability` that the analysis applies too, without importing it.
* **The CI gate** (``run.baseline["gate"]``, read by ``--bench-fail-on``): against a baseline,
  ``regressed`` when a primary metric regressed beyond its ``fail_threshold`` or a guard metric
  regressed, ``unjudged`` when the baseline was not found, not comparable, or no primary could
  be compared, else ``passed``; without one, :func:`ci_gate` judges within the run as before.
* **One configuration** (a file without ``treatment_variable``): no comparison inside the run,
  so no verdict and no refusal; only its guards (floor, ceiling) and caveats. It is compared
  with other runs only, and its tag says so while there is none.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_benchmark_agent.config.gate1 import ALPHA
from pytest_benchmark_agent.config.models import ReplicateRange
from pytest_benchmark_agent.judge import evidence
from pytest_benchmark_agent.judge.baseline import (
    BASELINE_TAGS,
    FINISHED,
    RecordView,
    Reproduction,
    Resolution,
    anchor,
    blocking_reason,
    code_changed,
    cross_verdicts,
    find_reproduction_target,
    fingerprint_diff,
    opposite_verdicts,
    primary_metrics,
    reproduction,
    sides,
)
from pytest_benchmark_agent.judge.evidence import could_never_decide
from pytest_benchmark_agent.judge.observations import measure_stages, observations, sample_table
from pytest_benchmark_agent.judge.tags import compute_tag
from pytest_benchmark_agent.records.run import CAVEAT_NONE, BenchRun
from pytest_benchmark_agent.records.writer import comparison_key
from pytest_benchmark_agent.stats.comparability import (
    Refusal,
    Verdict,
    guard_failures,
    ignored_caveats,
    is_guarded,
    refusal,
    usable,
)
from pytest_benchmark_agent.stats.counter_noise import noise_floor

if TYPE_CHECKING:
    from pytest_benchmark_agent.stats import analysis, sequential

SEED = 0
_UNPAIRED_ACROSS = (
    "the sessions were not interleaved: each comparison with the baseline is "
    "unpaired (Mann-Whitney U; paired by seed where seeds are used), so drift "
    "between the two sessions does not cancel"
)


@dataclass
class SequentialOutcome:
    """Where sequential replication stands: the blocks its verdicts use and why."""

    min_blocks: int
    max_blocks: int
    blocks: int
    stopped: bool
    reason: str
    decision: sequential.SequentialDecision | None
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


@dataclass
class Gate2:
    """The verdict records of a run, per host too, with what the report must show."""

    verdicts: dict[str, dict[str, dict[str, Any]]]
    by_host: dict[str, dict[str, dict[str, dict[str, Any]]]]
    caveats: list[str]
    refusals: list[str]
    #: Caveats that are findings about a treatment (it failed a guard): reported, but they
    #: keep no run from RELIABLE.
    findings: list[str] = field(default_factory=list)
    #: Refusals because hosts disagree on an effect's direction: they qualify the run.
    host_splits: list[str] = field(default_factory=list)
    #: Trials that passed after the sequential stop (xdist workers still busy): not analysed.
    late: int = 0


def stop_text(blocks: int, max_blocks: int, reason: str) -> str:
    return f"sequential replication stopped after {blocks} of {max_blocks} blocks: {reason}"


def _stages(run: BenchRun) -> dict[str, str | None]:
    """The measure stage of each declared metric (:func:`.observations.measure_stages`)."""
    return measure_stages(run.plan.config, run.plan.config.metrics)


def _hosts(trials: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted({t.get("host") or "" for t in trials if t.get("status") == "passed"})


# -- sequential replication -----------------------------------------------------------------------


def planned_blocks(run: BenchRun) -> dict[int, set[str]]:
    """Trial ids of each planned block (replicate), after selection."""
    blocks: dict[int, set[str]] = {}
    for spec in run.planned:
        blocks.setdefault(spec.replicate, set()).add(run.trial_id(spec))
    return blocks


def blocks_done(trials: Sequence[Mapping[str, Any]], blocks: Mapping[int, set[str]]) -> int:
    """How many leading blocks have every planned trial recorded (not ``not_run``)."""
    ran = {t["id"] for t in trials if t.get("status") != "not_run"}
    done = 0
    while done in blocks and blocks[done] <= ran:
        done += 1
    return done


def _decide(
    run: BenchRun, trials: Sequence[Mapping[str, Any]], blocks: int, replicates: ReplicateRange
) -> sequential.SequentialDecision:
    from pytest_benchmark_agent.stats import sequential  # only a sequential run needs it

    specs = run.plan.config.metrics
    obs, _ = observations(
        trials, list(specs), run.treatment_labels, upto=blocks, stage_of=_stages(run)
    )
    decision = sequential.sequential_decision(
        obs,
        specs,
        run.treatment_labels,
        run.control,
        blocks_done=blocks,
        min_blocks=replicates.min,
        max_blocks=replicates.max,
        seed=SEED,
        counter_floors=counter_floors(run),
    )
    if decision.stop or blocks not in sequential.look_schedule(replicates.min, replicates.max):
        return decision
    settled = _gate_settled(run, decision.analysis)
    if settled is None:
        return decision
    return dataclasses.replace(decision, stop=True, reason=f"{settled} after {blocks} blocks")


def _gate_settled(run: BenchRun, result: analysis.RunAnalysis) -> str | None:
    """Why a look may stop for the CI gate although a verdict is open: every primary metric
    declares a ``fail_threshold`` and each comparison already regressed beyond it or could have
    seen it (:func:`.evidence.judge_metric`); None otherwise. Stopping adds no false verdict:
    the looks' levels hold whenever a run stops."""
    specs = run.plan.config.metrics
    primaries = primary_metrics(specs)
    if not primaries or any(specs[m].fail_threshold is None for m in primaries):
        return None
    outcomes = [
        evidence.judge_metric(metric, v.to_dict(), specs[metric]).outcome
        for metric in primaries
        for v in result.verdicts.get(metric, {}).values()
    ]
    if not outcomes or "unjudged" in outcomes:
        return None
    return (
        "the CI gate can decide: every primary metric regressed beyond its fail_threshold "
        "or could have seen it"
    )


def sequential_stop(
    run: BenchRun, trials: Sequence[Mapping[str, Any]], looked: set[int]
) -> str | None:
    """After a trial: the stop reason when a look not taken yet says stop before ``max``."""
    replicates = run.plan.config.replicates
    if not isinstance(replicates, ReplicateRange):
        return None
    from pytest_benchmark_agent.stats import sequential  # only a sequential run needs it

    done = blocks_done(trials, planned_blocks(run))
    for look in sequential.look_schedule(replicates.min, replicates.max):
        if look > done or look >= replicates.max:
            break
        if look in looked:
            continue
        looked.add(look)
        decision = _decide(run, trials, look, replicates)
        if decision.stop:
            return stop_text(look, replicates.max, decision.reason)
    return None


def sequential_outcome(run: BenchRun) -> SequentialOutcome | None:
    """The looks a finished run reached, from its records (None for a fixed design)."""
    replicates = run.plan.config.replicates
    if not isinstance(replicates, ReplicateRange):
        return None
    from pytest_benchmark_agent.stats import sequential  # only a sequential run needs it

    trials = run.trials
    done = blocks_done(trials, planned_blocks(run))
    looks: list[dict[str, Any]] = []
    last: sequential.SequentialDecision | None = None
    for look in sequential.look_schedule(replicates.min, replicates.max):
        if look > done:
            break
        last = _decide(run, trials, look, replicates)
        looks.append(
            {"blocks": look, "stop": last.stop, "level": last.level, "reason": last.reason}
        )
        if last.stop:
            return SequentialOutcome(
                replicates.min, replicates.max, look, True, last.reason, last, looks
            )
    if done < replicates.min:
        return SequentialOutcome(
            replicates.min,
            replicates.max,
            done,
            False,
            f"only {done} complete block(s), fewer than replicates.min "
            f"{replicates.min}: analysed as a fixed design",
            None,
            looks,
        )
    if last is None or last.look != done:
        last = _decide(run, trials, done, replicates)
    return SequentialOutcome(
        replicates.min,
        replicates.max,
        done,
        False,
        f"ended after {done} complete blocks, between looks: analysed as a "
        f"final look ({last.reason})",
        last,
        looks,
    )


# -- gate 2 ---------------------------------------------------------------------------------------


def evaluate(run: BenchRun, sequential: SequentialOutcome | None) -> Gate2:
    """Verdicts of the run (stratified by host), per-host verdicts, caveats and refusals."""
    upto = sequential.blocks if sequential and sequential.decision else None
    if upto is None:
        refused = _nothing_to_compare(run)
        if refused is not None:
            return refused
    return _analysed(run, sequential, upto)


def _analysed(run: BenchRun, sequential: SequentialOutcome | None, upto: int | None) -> Gate2:
    """:func:`evaluate` by :mod:`.analysis` (imported by :func:`_analyze`: only a run with a
    comparison needs it)."""
    specs = run.plan.config.metrics
    labels = run.treatment_labels
    obs, caveats = observations(run.trials, list(specs), labels, upto=upto, stage_of=_stages(run))
    pairs = run.plan.revision_pairs
    combined = (
        sequential.decision.analysis
        if sequential and sequential.decision and len(pairs) <= 1
        else _analyze(obs, run)
    )
    trials_by_host: dict[str, list[Mapping[str, Any]]] = {}
    for trial in run.trials:
        trials_by_host.setdefault(trial.get("host") or "", []).append(trial)
    hosts = _hosts(run.trials)
    per_host: dict[str, analysis.RunAnalysis] = {}
    if len(hosts) > 1:
        for host in hosts:
            host_obs, _ = observations(
                trials_by_host[host], list(specs), labels, upto=upto, stage_of=_stages(run)
            )
            per_host[host] = _analyze(host_obs, run)
    elif hosts:
        per_host[hosts[0]] = combined
    verdicts, more_refusals, host_caveats = host_conflicts(combined.verdicts, per_host, specs)
    late = sum(
        1
        for t in run.trials
        if upto is not None and t.get("status") == "passed" and int(t.get("replicate") or 0) >= upto
    )
    return Gate2(
        verdicts={m: {t: v.to_dict() for t, v in per.items()} for m, per in verdicts.items()},
        by_host={
            host: {
                m: {t: v.to_dict() for t, v in per.items()} for m, per in result.verdicts.items()
            }
            for host, result in per_host.items()
        },
        caveats=caveats + combined.caveats + host_caveats,
        refusals=combined.refusals + more_refusals,
        findings=combined.findings,
        host_splits=more_refusals,
        late=late,
    )


def counter_floors(run: BenchRun) -> dict[str, float]:
    """The metrics of ``run`` that a counting backend counted, each with that backend's noise
    floor (engine/counters.py): the analysis judges them by the counters' t rule."""
    counted = {stage.name: stage.counters for stage in run.plan.config.stages if stage.counters}
    floors: dict[str, float] = {}
    for trial in run.trials:
        floor = noise_floor(trial.get("counted_by"))
        for metric in counted.get(trial.get("stage"), ()):
            if floor is not None and metric in run.plan.config.metrics:
                floors[metric] = max(floor, floors.get(metric, 0.0))
    return floors


def _analyze(
    obs: Mapping[str, Sequence[analysis.Observation]], run: BenchRun
) -> analysis.RunAnalysis:
    """Every treatment against the control; under ``--bench-against`` with a treatment variable
    of the file's own, each treatment under the working tree against the same treatment under
    REV (:attr:`.BenchPlan.revision_pairs`), each pair at alpha / pairs (Bonferroni over the
    pairs, Holm over the metrics within one)."""
    from pytest_benchmark_agent.stats import analysis

    specs, pairs = run.plan.config.metrics, run.plan.revision_pairs
    floors = counter_floors(run)
    if len(pairs) <= 1:
        return analysis.analyze_run(
            obs, specs, run.treatment_labels, run.control, seed=SEED, counter_floors=floors
        )
    alpha = ALPHA / len(pairs)
    merged = analysis.RunAnalysis(verdicts={metric: {} for metric in specs})
    for control, treatment in pairs:
        both = {
            m: [o for o in group if o.treatment in (control, treatment)] for m, group in obs.items()
        }
        one = analysis.analyze_run(
            both, specs, [control, treatment], control, alpha, SEED, counter_floors=floors
        )
        for metric, per in one.verdicts.items():
            merged.verdicts.setdefault(metric, {}).update(per)
        merged.caveats += one.caveats
        merged.refusals += one.refusals
        merged.findings += one.findings
    return merged


def _nothing_to_compare(run: BenchRun) -> Gate2 | None:
    """:func:`evaluate` of a fixed-design run whose every comparison is refused before any test,
    or of one configuration (no verdicts at all); None when some comparison would run."""
    combined = _refusals(run.trials, run)
    if combined is None:
        return None
    verdicts, caveats, refusals, findings = combined
    if run.one_configuration:
        return Gate2(verdicts={}, by_host={}, caveats=caveats, refusals=[])
    by_host: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for host in _hosts(run.trials):
        alone = _refusals([t for t in run.trials if (t.get("host") or "") == host], run)
        assert alone is not None  # a host's samples are a subset of the run's
        by_host[host] = alone[0]
    return Gate2(
        verdicts=verdicts, by_host=by_host, caveats=caveats, refusals=refusals, findings=findings
    )


def _refusals(
    trials: Sequence[Mapping[str, Any]],
    run: BenchRun,
) -> tuple[dict[str, dict[str, dict[str, Any]]], list[str], list[str], list[str]] | None:
    """Verdict records, caveats, refusals and findings of :func:`.analysis.analyze_run` when each
    comparison lacks samples on a side or has fewer than ``min_replicates`` (``equal`` metrics
    compare from one sample); None when one would run. The rules are :mod:`.comparability`'s,
    the ones the analysis applies. One configuration has no comparison: only its guards and
    caveats."""
    specs = run.plan.config.metrics
    labels, control = run.treatment_labels, run.control
    others = [label for label in labels if label != control]
    table, caveats = sample_table(trials, list(specs), labels, stage_of=_stages(run))
    finite: dict[str, dict[str, list[float]]] = {}
    verdicts: dict[str, dict[str, Verdict]] = {}
    refusals: list[str] = []
    for metric, spec in specs.items():
        values: dict[str, list[float]] = {label: [] for label in labels}
        for (label, _, _), drawn in table[metric].items():
            values[label].append(drawn.value)
        finite[metric] = {
            label: [u for v in vs if (u := usable(spec, v)) is not None]
            for label, vs in values.items()
        }
        caveats += ignored_caveats(
            metric, [v for vs in values.values() for v in vs if usable(spec, v) is None]
        )
        verdicts[metric] = {}
        for against, label in run.plan.revision_pairs or [(control, o) for o in others]:
            n = (len(finite[metric][against]), len(finite[metric][label]))
            refused = refusal(spec, n)
            if refused is None:
                return None
            verdicts[metric][label] = Verdict(
                "not_comparable", reason=refused.text, n=n, refused=refused.kind
            )
            refusals.append(f"{metric} [{label}]: not comparable: {refused.text}")
        if spec.direction == "equal" and len(set(finite[metric][control])) > 1:
            whose = "the control's own values" if others else "its values"
            caveats.append(f"{metric}: {whose} are not all identical")
    guards = [metric for metric, spec in specs.items() if is_guarded(spec)]
    findings: list[str] = []
    for label in [control, *others]:
        who = f"control {label}" if label == control and others else label
        for metric in guards:
            failed = [
                f"{who}: {failure}"
                for failure in guard_failures(
                    metric, specs[metric], finite[metric][label], verdicts[metric].get(label)
                )
            ]
            caveats += failed
            if label != control:
                findings += failed
    return (
        {
            metric: {label: verdict.to_dict() for label, verdict in per.items()}
            for metric, per in verdicts.items()
        },
        caveats,
        refusals,
        findings,
    )


def host_conflicts(
    verdicts: dict[str, dict[str, Verdict]],
    per_host: Mapping[str, analysis.RunAnalysis],
    specs: Mapping[str, Any],
) -> tuple[dict[str, dict[str, Verdict]], list[str], list[str]]:
    """Refuse a combined verdict whose direction differs between hosts; caveat weaker splits.

    A treatment whose guard metric splits by host cannot be called improved either.
    """
    if len(per_host) < 2:
        return verdicts, [], []
    out = {metric: dict(per) for metric, per in verdicts.items()}
    refusals: list[str] = []
    caveats: list[str] = []
    split_guards: dict[str, list[str]] = {}
    for metric, per in verdicts.items():
        spec = specs[metric]
        for treatment, verdict in per.items():
            host_verdicts = {h: r.verdicts[metric][treatment] for h, r in per_host.items()}
            decided = {
                h: v.verdict
                for h, v in host_verdicts.items()
                if v.verdict in ("improved", "regressed")
            }
            listing = ", ".join(
                f"{h} {v.verdict} x{_ratio(v.ratio)}" for h, v in host_verdicts.items()
            )
            if len(set(decided.values())) > 1:
                reason = f"direction differs between hosts: {listing}; read the per-host rows"
                out[metric][treatment] = dataclasses.replace(
                    verdict, verdict="not_comparable", reason=reason, refused=Refusal.FINDING
                )
                refusals.append(f"{metric} [{treatment}]: not comparable: {reason}")
                if is_guarded(spec):
                    split_guards.setdefault(treatment, []).append(metric)
                continue
            threshold = spec.noise_threshold
            above = [v.ratio for v in host_verdicts.values() if v.ratio is not None]
            if any(r > 1 + threshold for r in above) and any(r < 1 - threshold for r in above):
                caveats.append(
                    f"{metric} [{treatment}]: the effect's direction differs between "
                    f"hosts, significant on at most one of them: {listing}"
                )
    for treatment, guards in split_guards.items():
        for metric in out:
            verdict = out[metric][treatment]
            if specs[metric].primary and verdict.verdict == "improved":
                reason = f"guard {', '.join(guards)}: direction differs between hosts"
                out[metric][treatment] = dataclasses.replace(
                    verdict, verdict="not_comparable", reason=reason, refused=Refusal.FINDING
                )
                refusals.append(f"{metric} [{treatment}]: not comparable: {reason}")
    return out, refusals, caveats


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


# -- the whole judgement --------------------------------------------------------------------------


def judge_run(
    run: BenchRun, sequential: SequentialOutcome | None, baseline: Resolution | None = None
) -> None:
    """Fill the run's verdicts, refusals, caveats, baseline comparison and CI gate,
    reproduction and tag.

    The baseline is the reference only for a faithful rerun (the same code) or an anchor;
    against other code it is compared (the gate) while the reproduction is searched for among
    earlier runs of this config and code, as without a baseline."""
    specs = run.plan.config.metrics
    gate2 = evaluate(run, sequential)
    run.verdicts = gate2.verdicts
    run.verdicts_by_host = gate2.by_host
    run.refusals = gate2.refusals
    if sequential is not None:
        run.sequential = {**sequential.as_record(), "late_trials": gate2.late}
    run.caveats += [c for c in gate2.caveats if c not in run.caveats]
    this = RecordView.of_run(run)
    failures, limits = gate_failures(run)
    reference = compare_with_baseline(run, this, baseline) if baseline is not None else None
    skipped: list[str] = []
    if reference is None:
        prior, diff, skipped = find_reproduction_target(run.home, this, run.config_hash)
        if prior is not None and diff is not None:
            reference = reproduction(this, prior, specs, diff.benign)
    run.reproduces = (
        {**reference.as_record(), "skipped": skipped}
        if reference
        else ({"run_id": None, "skipped": skipped} if skipped else None)
    )
    cited = reference.run_id if reference is not None else None
    failures += [
        line
        for line in opposite_verdicts(run.home, this, run.config_hash, specs)
        if not line.startswith(f"contradicts {cited}:")  # the reference says so itself
    ]
    run.tag, run.tag_reasons = compute_tag(
        failures, limits, qualifying_caveats(run, gate2), reference, skipped
    )
    if run.one_configuration and run.tag == "EXPLORATORY":
        run.tag_reasons.insert(0, alone_reason(run))
    run.ci_gate = ci_gate(run)  # recorded, so history and the index show it without the run


def compare_with_baseline(
    run: BenchRun, this: RecordView, resolution: Resolution
) -> Reproduction | None:
    """Fill ``run.baseline`` (the comparison and its CI gate); returns the reproduction or anchor
    when the baseline measured the same code and gate 2 allows the comparison."""
    specs = run.plan.config.metrics
    record: dict[str, Any] = {
        "run_id": resolution.run_id,
        "ref": resolution.ref,
        "resolved": resolution.how,
    }
    run.baseline = record
    if resolution.run_dir is None or resolution.problem:
        record.update(
            refused=resolution.problem,
            verdicts={},
            code={"baseline": None, "this": this.code, "changed": None},
            gate=unjudged([f"baseline `{resolution.ref}`: {resolution.problem}"]),
        )
        return None
    base = RecordView.load(resolution.run_dir)
    diff = fingerprint_diff(base, this)
    refusal = blocking_reason(diff) if diff.blocking else None
    if base.state not in FINISHED or base.tag not in BASELINE_TAGS:
        refusal = refusal or f"the baseline is now {base.tag} ({base.state})"
    changed = code_changed(base, this, diff)
    verdicts, notes = cross_verdicts(this, base, specs, refusal)
    if base.tag == "EXPLORATORY":
        notes.insert(
            0,
            f"the baseline {base.run_id} is EXPLORATORY: one session, never "
            "reproduced, so its figures are that session's alone",
        )
    record.update(
        tag=base.tag,
        refused=refusal,
        caveats=base.caveats if base.tag == "QUALIFIED" else [],
        code={"baseline": base.code, "this": this.code, "changed": changed},
        fingerprint={"blocking": diff.blocking, "benign": diff.benign, "code": list(diff.code)},
        notes=([] if refusal else [_UNPAIRED_ACROSS]) + notes,
        verdicts=verdicts,
    )
    if not refusal:
        record["judged"], record["run_to_run"] = _across(run, this, base, verdicts)
    record["gate"] = baseline_gate(record, specs)
    if refusal:
        return None
    if changed:
        record["notes"].append(
            f"the baseline measured other code ({sides(base, this)}): this "
            "is a comparison of code, not a rerun of it"
        )
        return None
    if base.config_hash == run.config_hash:
        return reproduction(this, base, specs, diff.benign)
    anchored = anchor(this, base, specs, diff.benign)
    if anchored is None:
        record["notes"].append(
            f"no treatment in common with {base.run_id}: nothing anchors this run to it"
        )
    return anchored


def _across(
    run: BenchRun, this: RecordView, base: RecordView, verdicts: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The comparison with the baseline judged with the session as the unit, and the spreads
    used (:func:`.evidence.judge_across`), from the recorded runs of the baseline's revision."""
    history, source = evidence.recorded_history(
        run.home,
        run.name,
        comparison_key(run.plan.config),
        (base.fingerprint.get("code_identity") or {}).get("commit"),
        run.run_id,
        run.plan.path.parent,
    )
    return evidence.judge_across(this, base, history, source, verdicts, run.plan.config.metrics)


# -- the CI gate ----------------------------------------------------------------------------------


def unjudged(reasons: list[str]) -> dict[str, Any]:
    return {"outcome": "unjudged", "reasons": reasons}


def baseline_gate(baseline: Mapping[str, Any], specs: Mapping[str, Any]) -> dict[str, Any]:
    """The CI gate against a baseline, each primary metric by :func:`.evidence.judge_metric` on
    its verdict judged with the session as the unit (``judged``; ``verdicts`` for a record
    without one): ``regressed`` when one regressed beyond its ``fail_threshold`` or a guard
    metric regressed (for an ``equal`` guard: changed); ``unjudged`` when one could not have
    seen its threshold or could not be compared; ``passed`` when each could and did not.
    Each outcome gives its reasons; the first says how it was judged."""
    where = f"baseline {baseline['run_id']}"
    code = baseline.get("code") or {}
    both = f"{code.get('baseline')} -> {code.get('this')}"
    if baseline.get("refused"):
        return unjudged([f"not comparable with {where} ({both}): {baseline['refused']}"])
    verdicts = baseline.get("judged") or baseline.get("verdicts") or {}
    primaries = primary_metrics(specs)
    judged: list[evidence.MetricGate] = []
    for metric in primaries:
        for label, v in (verdicts.get(metric) or {}).items():
            said = (
                f"`{metric}` [{label}] {v['verdict']} x{_ratio(v.get('ratio'))} "
                f"against {v['against']} ({both})"
            )
            judged.append(evidence.judge_metric(said, v, specs[metric]))
    guards = [
        f"guard `{metric}` [{label}] changed against {v['against']} "
        f"({both}): " + (v.get("reason") or f"x{_ratio(v.get('ratio'))}")
        for metric, spec in specs.items()
        if spec.guard and metric not in primaries
        for label, v in (verdicts.get(metric) or {}).items()
        if v["verdict"] == "regressed"
    ]
    mode = _across_mode(baseline, primaries)
    if guards:
        failed = [g.text for g in judged if g.outcome == "regressed"]
        return {"outcome": "regressed", "reasons": _first(failed + guards, mode)}
    return _gate(judged, f"against {where} ({both})", mode)


def _across_mode(baseline: Mapping[str, Any], primaries: Sequence[str]) -> str:
    """How a comparison with a recorded baseline was judged (the first primary's spread)."""
    for metric in primaries:
        for spread in ((baseline.get("run_to_run") or {}).get(metric) or {}).values():
            view = evidence.Spread(
                spread["runs"],
                spread.get("sd"),
                spread.get("allowance") or 0.0,
                spread["source"],
                spread.get("df") or 0,
            )
            return f"judged across runs, one session each: {view.words()}"
    return "judged across runs, one session each"


def _gate(judged: Sequence[evidence.MetricGate], where: str, mode: str) -> dict[str, Any]:
    """The gate's record from its primary comparisons: the failures, else the comparisons that
    could not see their threshold, else the pass; then every other comparison's line."""
    outcome = evidence.gate_outcome(judged)
    lines = [g.text for g in judged if g.outcome == outcome]
    rest = [g.text for g in judged if g.outcome != outcome]
    if not judged:
        return unjudged([f"no primary metric could be compared {where}"])
    if outcome == "passed":
        lines = [
            f"no primary metric regressed beyond its fail_threshold {where}, and each could "
            "have seen it",
            *lines,
        ]
    return {"outcome": outcome, "reasons": _first(lines + rest, mode)}


def _first(reasons: list[str], mode: str) -> list[str]:
    """The reasons with the mode that judged them appended to the first (the gate line)."""
    return [f"{reasons[0]}; {mode}", *reasons[1:]] if reasons else [mode]


def ci_gate(run: BenchRun) -> dict[str, Any]:
    """The outcome ``--bench-fail-on`` acts on: against the baseline when one was given, else
    within the run, each primary metric of each treatment against the control by
    :func:`.evidence.judge_metric` (unjudged when the run had no primary comparison)."""
    if run.baseline is not None and run.baseline.get("gate"):
        return run.baseline["gate"]
    specs = run.plan.config.metrics
    primaries = primary_metrics(specs)
    judged = []
    for metric in primaries:
        per = run.summary.get(metric) or {}
        for label, v in (run.verdicts.get(metric) or {}).items():
            cv = [(per.get(side) or {}).get("cv") for side in (run.control, label)]
            said = (
                f"`{metric}` [{label}] {v['verdict']} x{_ratio(v.get('ratio'))} "
                f"against the control {run.control}"
            )
            judged.append(evidence.judge_metric(said, {**v, "cv": cv}, specs[metric]))
    if judged:
        mode = (
            "judged within one session: the treatments ran interleaved in blocks, "
            "compared block by block"
        )
        return _gate(judged, f"against the control {run.control}", mode)
    refused = [r for r in run.refusals if r.split(" [", 1)[0] in primaries]
    return unjudged(
        [
            "no baseline (--bench-baseline) and no comparison within the run that could be made",
            *refused,
        ]
    )


def alone_reason(run: BenchRun) -> str:
    """The first reason of an EXPLORATORY run of one configuration: nothing was compared."""
    return (
        f"one configuration (`{run.control}`), compared with nothing within this run: "
        "only another run can judge it (--bench-baseline REF, or the same config run again "
        "to reproduce it)"
    )


def gate_failures(run: BenchRun) -> tuple[list[str], list[str]]:
    """What makes the run UNRELIABLE before any comparison with another run, and what keeps it
    EXPLORATORY however it compares (too little data for a primary verdict)."""
    failures, limits = [], []
    counts = run.counts()
    if run.state in ("interrupted", "failed"):
        failures.append(f"the run did not complete (state {run.state})")
    if not counts.get("passed"):
        failures.append("no trial passed")
    if counts.get("not_comparable"):
        failures.append(
            f"gate 1: {counts['not_comparable']} trial(s) ran with effective params "
            "other than the declared ones"
        )
    for metric in primary_metrics(run.plan.config.metrics):
        for treatment, verdict in run.verdicts.get(metric, {}).items():
            if could_never_decide(verdict):
                limits.append(f"`{metric}` [{treatment}] {verdict.get('reason')}")
                continue
            kind = verdict.get("refused")
            if verdict["verdict"] != "not_comparable" or kind == Refusal.FINDING:
                continue
            (limits if kind == Refusal.TOO_SMALL else failures).append(
                f"gate 2 refused `{metric}` [{treatment}]: {verdict.get('reason')}"
            )
    overlaps = run.overlapping_measurements()
    if overlaps and CAVEAT_NONE not in run.caveats:
        failures.append(
            f"{len(overlaps)} pair(s) of measurements overlapped on a host under isolation 'host'"
        )
    return failures, limits


def qualifying_caveats(run: BenchRun, gate2: Gate2) -> list[str]:
    """Caveats that keep a reproduced run from RELIABLE (a treatment failing its guard is a
    finding about that treatment, not a caveat of the run)."""
    findings = set(gate2.findings)
    caveats = [c for c in run.caveats if c not in findings]
    counts = run.counts()
    bad = {s: n for s, n in counts.items() if s not in ("passed", "not_run")}
    if bad:
        caveats.append(
            f"{sum(bad.values())} of {sum(counts.values())} trials did not pass ("
            + ", ".join(f"{s}: {n}" for s, n in sorted(bad.items()))
            + ")"
        )
    if run.state == "halted":
        caveats.append(f"stopped early: {run.stop_reason}")
    caveats += gate2.host_splits
    return caveats


def regressions(run: BenchRun) -> list[str]:
    """Every primary metric that regressed, in the run and against its baseline."""
    out = []
    for metric in primary_metrics(run.plan.config.metrics):
        for treatment, verdict in run.verdicts.get(metric, {}).items():
            if verdict["verdict"] == "regressed":
                out.append(
                    f"`{metric}` regressed for {treatment} (x{_ratio(verdict['ratio'])} "
                    f"of the control {run.control})"
                )
        base = run.baseline or {}
        code = base.get("code") or {}
        across = base.get("judged") or base.get("verdicts") or {}
        for treatment, verdict in across.get(metric, {}).items():
            if verdict["verdict"] == "regressed":
                out.append(
                    f"`{metric}` regressed for {treatment} against baseline "
                    f"{verdict['against']} (x{_ratio(verdict.get('ratio'))}, "
                    f"{code.get('baseline')} -> {code.get('this')})"
                )
    return out
