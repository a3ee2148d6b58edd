"""Gate 2 for a finished run: verdicts, refusals and caveats, per host, and the whole judgement
(:func:`judge_run`: those, the comparison with a baseline, the reproduction check, the tag and
the CI gate, returned as a :class:`.Judgement`; the judge never writes on the run).

The engine calls :func:`judge_run` when a run ends (after ``summarize``), with the outcome of
its sequential looks (:mod:`.sequential`). The statistics are :mod:`.analysis`'s; this module
decides what goes in:

* **Observations** are the passed trials' values of the declared metrics, one per (treatment,
  replicate, seed): the replicate is the block.
* **Hosts** (``trial.host``): a block is only ever paired within one host (its replicate is
  renumbered per host), so the paired test compares treatment and control within each host and
  pools the within-host differences: a stratified analysis. Each host is also analysed alone;
  when one host says ``improved`` and another ``regressed``, the run's verdict is
  ``not_comparable`` naming both (the direction is reported, never averaged away), and opposite
  point estimates beyond the noise threshold are a caveat even when neither is significant.
* **Nothing to compare** (a cached session measuring one treatment, a smoke run of 1 replicate):
  when every comparison would be refused before a test runs (a side without samples, or fewer
  than ``min_replicates``), :func:`evaluate` writes those refusals itself, by the rules of
  :mod:`.comparability` that the analysis applies too, without importing it.
* **One configuration** (a file without ``treatment_variable``): no comparison inside the run,
  so no verdict and no refusal; only its guards (floor, ceiling) and caveats. It is compared
  with other runs only, and its tag says so while there is none.
* **Beyond the run**: the comparison with a baseline is :mod:`.comparison`'s, the
  reproduction :mod:`.reproduce`'s, the CI gate :mod:`.ci_gate`'s and the tag :mod:`.tags`'s;
  :func:`judge_run` puts them together.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_benchmark_agent.config.gate1 import ALPHA
from pytest_benchmark_agent.judge.baseline import Resolution, primary_metrics
from pytest_benchmark_agent.judge.ci_gate import ci_gate
from pytest_benchmark_agent.judge.comparison import compare_with_baseline
from pytest_benchmark_agent.judge.evidence import could_never_decide
from pytest_benchmark_agent.judge.observations import counter_floors, observations, sample_table
from pytest_benchmark_agent.judge.reproduce import (
    Reproduction,
    find_reproduction_target,
    opposite_verdicts,
    reproduction,
)
from pytest_benchmark_agent.judge.sequential import SEED, SequentialOutcome, metric_stages
from pytest_benchmark_agent.judge.tags import compute_tag
from pytest_benchmark_agent.records.outcomes import ReproductionRecord
from pytest_benchmark_agent.records.record import BaselineComparison, Judgement, RunRecord
from pytest_benchmark_agent.records.run import CAVEAT_NONE
from pytest_benchmark_agent.records.schema import TrialRecord
from pytest_benchmark_agent.stats.comparability import (
    Refusal,
    Verdict,
    guard_failures,
    ignored_caveats,
    is_guarded,
    refusal,
    usable,
)
from pytest_benchmark_agent.stats.units import ratio

if TYPE_CHECKING:
    from pytest_benchmark_agent.stats import analysis

#: metric -> label -> verdict.
Table = dict[str, dict[str, Verdict]]


@dataclass
class Gate2:
    """The verdicts of a run, per host too, with what the report must show."""

    verdicts: Table
    by_host: dict[str, Table]
    caveats: list[str]
    refusals: list[str]
    #: Caveats that are findings about a treatment (it failed a guard): reported, but they
    #: keep no run from RELIABLE.
    findings: list[str] = field(default_factory=list)
    #: Refusals because hosts disagree on an effect's direction: they qualify the run.
    host_splits: list[str] = field(default_factory=list)
    #: Trials that passed after the sequential stop (xdist workers still busy): not analysed.
    late: int = 0


def _hosts(trials: Sequence[TrialRecord]) -> list[str]:
    return sorted({t.host or "" for t in trials if t.status == "passed"})


# -- gate 2 ---------------------------------------------------------------------------------------


def evaluate(record: RunRecord, sequential: SequentialOutcome | None) -> Gate2:
    """Verdicts of the run (stratified by host), per-host verdicts, caveats and refusals."""
    upto = sequential.blocks if sequential and sequential.decision else None
    if upto is None:
        refused = _nothing_to_compare(record)
        if refused is not None:
            return refused
    return _analysed(record, sequential, upto)


def _analysed(record: RunRecord, sequential: SequentialOutcome | None, upto: int | None) -> Gate2:
    """:func:`evaluate` by :mod:`.analysis` (imported by :func:`_analyze`: only a run with a
    comparison needs it)."""
    specs = record.model.metrics
    labels = record.treatments
    stages = metric_stages(record)
    obs, caveats = observations(record.trials, list(specs), labels, upto=upto, stage_of=stages)
    combined = (
        sequential.decision.analysis
        if sequential and sequential.decision
        else _analyze(obs, record)
    )
    hosts = _hosts(record.trials)
    per_host: dict[str, analysis.RunAnalysis] = {}
    if len(hosts) > 1:
        for host in hosts:
            mine = [t for t in record.trials if (t.host or "") == host]
            host_obs, _ = observations(mine, list(specs), labels, upto=upto, stage_of=stages)
            per_host[host] = _analyze(host_obs, record)
    elif hosts:
        per_host[hosts[0]] = combined
    verdicts, more_refusals, host_caveats = host_conflicts(combined.verdicts, per_host, specs)
    late = sum(
        1
        for t in record.trials
        if upto is not None and t.status == "passed" and int(t.replicate or 0) >= upto
    )
    return Gate2(
        verdicts=verdicts,
        by_host={host: result.verdicts for host, result in per_host.items()},
        caveats=caveats + combined.caveats + host_caveats,
        refusals=combined.refusals + more_refusals,
        findings=combined.findings,
        host_splits=more_refusals,
        late=late,
    )


def _analyze(
    obs: Mapping[str, Sequence[analysis.Observation]], record: RunRecord
) -> analysis.RunAnalysis:
    """Every treatment against the control; under ``--bench-against`` with a treatment variable
    of the file's own, each treatment under the working tree against the same treatment under
    REV (:attr:`.RunRecord.revision_pairs`), each pair at alpha / pairs (Bonferroni over the
    pairs, Holm over the metrics within one)."""
    from pytest_benchmark_agent.stats import analysis

    specs, pairs = record.model.metrics, record.revision_pairs
    floors = counter_floors(record.model, record.trials)
    if len(pairs) <= 1:
        return analysis.analyze_run(
            obs, specs, list(record.treatments), record.control, seed=SEED, counter_floors=floors
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


def _nothing_to_compare(record: RunRecord) -> Gate2 | None:
    """:func:`evaluate` of a fixed-design run whose every comparison is refused before any test,
    or of one configuration (no verdicts at all); None when some comparison would run."""
    combined = _refusals(record.trials, record)
    if combined is None:
        return None
    verdicts, caveats, refusals, findings = combined
    if record.one_configuration:
        return Gate2(verdicts={}, by_host={}, caveats=caveats, refusals=[])
    by_host: dict[str, Table] = {}
    for host in _hosts(record.trials):
        alone = _refusals([t for t in record.trials if (t.host or "") == host], record)
        assert alone is not None  # a host's samples are a subset of the run's
        by_host[host] = alone[0]
    return Gate2(
        verdicts=verdicts, by_host=by_host, caveats=caveats, refusals=refusals, findings=findings
    )


def _refusals(
    trials: Sequence[TrialRecord], record: RunRecord
) -> tuple[Table, list[str], list[str], list[str]] | None:
    """Verdicts, caveats, refusals and findings of :func:`.analysis.analyze_run` when each
    comparison lacks samples on a side or has fewer than ``min_replicates`` (``equal`` metrics
    compare from one sample); None when one would run. The rules are :mod:`.comparability`'s,
    the ones the analysis applies. One configuration has no comparison: only its guards and
    caveats."""
    specs = record.model.metrics
    labels, control = record.treatments, record.control
    others = [label for label in labels if label != control]
    table, caveats = sample_table(trials, list(specs), labels, stage_of=metric_stages(record))
    finite: dict[str, dict[str, list[float]]] = {}
    verdicts: Table = {}
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
        for against, label in record.revision_pairs or [(control, o) for o in others]:
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
    guarded, findings = _guard_failures(record, finite, verdicts)
    return verdicts, caveats + guarded, refusals, findings


def _guard_failures(
    record: RunRecord, finite: Mapping[str, Mapping[str, list[float]]], verdicts: Table
) -> tuple[list[str], list[str]]:
    """The guard failures of each treatment, the control's first (caveats), and those of the
    treatments other than the control (findings about them)."""
    specs = record.model.metrics
    control = record.control
    others = [label for label in record.treatments if label != control]
    guards = [metric for metric, spec in specs.items() if is_guarded(spec)]
    caveats: list[str] = []
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
    return caveats, findings


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
                f"{h} {v.verdict} {ratio(v.ratio, 3)}" for h, v in host_verdicts.items()
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


# -- the whole judgement --------------------------------------------------------------------------


def judge_run(
    record: RunRecord, sequential: SequentialOutcome | None, baseline: Resolution | None = None
) -> Judgement:
    """The run's verdicts, refusals, caveats, baseline comparison and CI gate, reproduction and
    tag, from its record (summarized, its plugins' caveats taken): the engine puts them on the
    run (:meth:`.BenchRun.judged`).

    The baseline is the reference only for a faithful rerun (the same code) or an anchor;
    against other code it is compared (the gate) while the reproduction is searched for among
    earlier runs of this config and code, as without a baseline."""
    gate2 = evaluate(record, sequential)
    this = record.replace(
        verdicts=gate2.verdicts,
        verdicts_by_host=gate2.by_host,
        refusals=gate2.refusals,
        caveats=[*record.caveats, *(c for c in gate2.caveats if c not in record.caveats)],
    )
    failures, limits = gate_failures(this)
    comparison, reference, skipped = _reference(this, baseline)
    cited = reference.run_id if reference is not None else None
    failures += [
        line
        for line in opposite_verdicts(this, this.model.metrics)
        if not line.startswith(f"contradicts {cited}:")  # the reference says so itself
    ]
    tag, reasons = compute_tag(
        failures, limits, qualifying_caveats(this, gate2), reference, skipped
    )
    if this.one_configuration and tag == "EXPLORATORY":
        reasons.insert(0, alone_reason(this))
    return Judgement(
        verdicts=this.verdicts,
        verdicts_by_host=this.verdicts_by_host,
        refusals=this.refusals,
        caveats=tuple(gate2.caveats),
        sequential=None if sequential is None else sequential.as_record(gate2.late),
        baseline=comparison,
        reproduces=(
            reference.as_record(skipped)
            if reference
            else (ReproductionRecord(None, skipped=tuple(skipped)) if skipped else None)
        ),
        tag=tag,
        tag_reasons=tuple(reasons),
        # recorded, so history and the index show it without the run
        ci_gate=ci_gate(this.replace(baseline=comparison)),
    )


def _reference(
    this: RunRecord, baseline: Resolution | None
) -> tuple[BaselineComparison | None, Reproduction | None, list[str]]:
    """The comparison with the baseline (None without one); the run this one reproduces or
    anchors to: the baseline when it may serve, else the newest earlier faithful rerun; and
    why earlier runs of the config were no reruns."""
    comparison, reference = (
        compare_with_baseline(this, baseline) if baseline is not None else (None, None)
    )
    skipped: list[str] = []
    if reference is None:
        prior, diff, skipped = find_reproduction_target(this)
        if prior is not None and diff is not None:
            reference = reproduction(this, prior, this.model.metrics, diff.benign)
    return comparison, reference, skipped


def alone_reason(record: RunRecord) -> str:
    """The first reason of an EXPLORATORY run of one configuration: nothing was compared."""
    return (
        f"one configuration (`{record.control}`), compared with nothing within this run: "
        "only another run can judge it (--bench-baseline REF, or the same config run again "
        "to reproduce it)"
    )


def gate_failures(record: RunRecord) -> tuple[list[str], list[str]]:
    """What makes the run UNRELIABLE before any comparison with another run, and what keeps it
    EXPLORATORY however it compares (too little data for a primary verdict)."""
    failures, limits = [], []
    counts = record.counts
    if record.state in ("interrupted", "failed"):
        failures.append(f"the run did not complete (state {record.state})")
    if not counts.get("passed"):
        failures.append("no trial passed")
    if counts.get("not_comparable"):
        failures.append(
            f"gate 1: {counts['not_comparable']} trial(s) ran with effective params "
            "other than the declared ones"
        )
    for metric in primary_metrics(record.model.metrics):
        for treatment, verdict in record.verdicts.get(metric, {}).items():
            if could_never_decide(verdict):
                limits.append(f"`{metric}` [{treatment}] {verdict.reason}")
                continue
            if not verdict.not_comparable or verdict.refused == Refusal.FINDING:
                continue
            (limits if verdict.refused == Refusal.TOO_SMALL else failures).append(
                f"gate 2 refused `{metric}` [{treatment}]: {verdict.reason}"
            )
    overlaps = record.overlapping_measurements()
    if overlaps and CAVEAT_NONE not in record.caveats:
        failures.append(
            f"{len(overlaps)} pair(s) of measurements overlapped on a host under isolation 'host'"
        )
    return failures, limits


def qualifying_caveats(record: RunRecord, gate2: Gate2) -> list[str]:
    """Caveats that keep a reproduced run from RELIABLE (a treatment failing its guard is a
    finding about that treatment, not a caveat of the run)."""
    findings = set(gate2.findings)
    caveats = [c for c in record.caveats if c not in findings]
    counts = record.counts
    bad = {s: n for s, n in counts.items() if s not in ("passed", "not_run")}
    if bad:
        caveats.append(
            f"{sum(bad.values())} of {sum(counts.values())} trials did not pass ("
            + ", ".join(f"{s}: {n}" for s, n in sorted(bad.items()))
            + ")"
        )
    if record.state == "halted":
        caveats.append(f"stopped early: {record.stop_reason}")
    caveats += gate2.host_splits
    return caveats
