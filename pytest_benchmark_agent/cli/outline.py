"""The outline of a skeptical reading that ``analyze`` prints after a run's report: what was
claimed, why it might be wrong (noise, failed trials, guards, fingerprints, the cache, the
order inside blocks), What Went Wrong, and what the tag means; each filled from the record."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from pytest_benchmark_agent.config.metric import MetricSpec
from pytest_benchmark_agent.judge.baseline import primary_metrics
from pytest_benchmark_agent.records.record import BaselineComparison, RunRecord
from pytest_benchmark_agent.records.schema import TrialRecord
from pytest_benchmark_agent.stats.comparability import is_guarded
from pytest_benchmark_agent.stats.units import interval, number, pct

_MEANS = {
    "RELIABLE": "reproduced with no caveat: it may be stated as a result, within the controls "
    "it held fixed and on this kind of machine.",
    "QUALIFIED": "a result only together with its caveats: state each one beside the claim.",
    "EXPLORATORY": "a lead, not a conclusion: say 'suggests', not 'shows', and reproduce it "
    "(run the same config again) before relying on it.",
    "UNRELIABLE": "not a result: a gate failed (see What Went Wrong); fix that and run again.",
}


def order_outline(trials: Sequence[TrialRecord], control: str) -> str:
    """What the recorded positions say about the order inside blocks: how often each
    treatment ran first, and whether a warm-up or position effect could pose as an effect."""
    ran = [t for t in trials if t.status != "not_run"]
    blocks = {(t.host, t.stage, t.replicate, t.seed) for t in ran}
    firsts = Counter(t.treatment for t in ran if t.position == 0)
    if not any(t.position is not None for t in ran):
        return (
            "no trial records its position in its block, so the order inside blocks is "
            "unknown: a warm-up or position effect cannot be ruled out."
        )
    shares = ", ".join(f"`{label}` in {count}" for label, count in sorted(firsts.items()))
    said = f"by the recorded positions, the first trial of a block was {shares} of {len(blocks)}"
    if firsts.get(control, 0) == len(blocks):
        return (
            f"{said}: the control `{control}` ran first in every block, so a warm-up or "
            "position effect would look like a treatment effect."
        )
    return (
        f"{said}: the order varied, so a warm-up or position effect falls on both sides and "
        "the paired test does not read it as a treatment effect."
    )


def skeptical_outline(record: RunRecord) -> list[str]:
    """The four parts of the skeptical reading, filled with what the record says."""
    try:
        specs: Mapping[str, MetricSpec] = record.model.metrics
    except ValueError:
        specs = {}
    return [
        "## Skeptical reading (outline)",
        *_claimed(record, specs),
        *_doubts(record, specs),
        "",
        "### 3. What Went Wrong",
        "",
        *(f"- {item}" for item in record.what_went_wrong or _NOTHING_LISTED),
        "",
        "### 4. What it means",
        "",
        f"- {record.tag}: {_MEANS.get(record.tag, '')}",
        *(f"  - {reason}" for reason in record.tag_reasons),
    ]


_NOTHING_LISTED = (
    "This record holds no What Went Wrong list: read the report's section above; at the "
    "least, this run cannot rule out machine load, a single dataset and a single seed.",
)


def _alone(record: RunRecord) -> bool:
    """One configuration: no treatment but the control, so nothing compared inside the run."""
    return not [t for t in record.treatments if t != record.control]


def _claimed(record: RunRecord, specs: Mapping[str, MetricSpec]) -> list[str]:
    """Part 1: the hypothesis and each primary verdict with its interval and MDE."""
    control = record.control
    lines = [
        "",
        "### 1. What was claimed",
        "",
        f"- Hypothesis: {record.config.get('hypothesis') or '(none stated)'}",
    ]
    if _alone(record):
        lines.append(
            f"- One configuration (`{control}`): nothing was compared within the run, "
            "so it claims nothing by itself; only a comparison with another run can."
        )
    for metric in primary_metrics(specs):
        for label, v in (record.verdicts.get(metric) or {}).items():
            lines.append(
                f"- `{metric}` [{label} against {control}]: {v.word}, ratio {number(v.ratio)}"
                + (f", 95% CI {interval(v.ci)}" if v.ci else "")
                + f", p (Holm) {number(v.p_holm)}, MDE {pct(v.mde)}"
                + (f": {v.reason}" if v.reason else "")
            )
    return lines


def _doubts(record: RunRecord, specs: Mapping[str, MetricSpec]) -> list[str]:
    """Part 2: why the claim might be wrong, each check filled from the record."""
    lines = ["", "### 2. Why it might be wrong (check each)", ""]
    lines += _noise_lines(record, specs)
    bad = {s: n for s, n in record.counts.items() if s not in ("passed", "not_run")}
    lines.append(
        "- Trials that did not pass: "
        + (", ".join(f"{s} {n}" for s, n in sorted(bad.items())) or "none")
        + "."
    )
    none = (
        "no in-run verdict (one configuration: checked against other runs only)"
        if _alone(record)
        else "no verdict"
    )
    for metric in [m for m, s in specs.items() if is_guarded(s)]:
        per = record.verdicts.get(metric) or {}
        said = ", ".join(f"{t} {v.word}" for t, v in per.items())
        lines.append(f"- Guard `{metric}`: {said or none}.")
    lines.append(f"- Caveats: {len(record.caveats)} (each under What Went Wrong).")
    lines += _fingerprint_checks(record)
    rebuilt = [p for p in record.preps if p.rebuild_reason not in (None, "no cache entry")]
    lines.append(
        f"- Cache: {sum(p.action == 'built' for p in record.preps)} prep(s) built, "
        f"{sum(p.action == 'reused' for p in record.preps)} reused, {len(rebuilt)} "
        "rebuilt because an entry was damaged."
    )
    lines.append(
        "- Warm against cold: "
        + (
            "one configuration, its replicates ran one after another; a warm-up would show as a "
            "drift across them."
            if _alone(record)
            else order_outline(record.trials, record.control)
        )
    )
    return lines


def _noise_lines(record: RunRecord, specs: Mapping[str, MetricSpec]) -> list[str]:
    """Per primary verdict: its effect against the noise threshold, MDE and control CV."""
    lines = []
    for metric in primary_metrics(specs):
        cv = (record.stats(metric).get(record.control) or {}).get("cv")
        for label, v in (record.verdicts.get(metric) or {}).items():
            effect = None if v.ratio is None else v.ratio - 1
            lines.append(
                f"- Noise against the effect, `{metric}` [{label}]: effect "
                f"{pct(effect, '+')} against the noise threshold "
                f"{pct(specs[metric].noise_threshold)}, MDE {pct(v.mde)}, control CV "
                f"{pct(cv)}; n per side "
                + (" / ".join(map(str, v.n)) if any(v.n) else "-")
                + f" (needed {specs[metric].min_replicates})."
            )
    return lines


def _fingerprint_checks(record: RunRecord) -> list[str]:
    """The fingerprint checks against the run reproduced and the baseline, and control drift."""
    lines = []
    reproduces = record.reproduces
    checked = reproduces.run_id if reproduces is not None else None
    baseline = record.baseline
    if reproduces is not None and checked:
        benign = reproduces.benign_differences
        lines.append(
            f"- Fingerprint against {checked}: equal where it matters"
            + (f"; benign differences: {'; '.join(benign)}" if benign else "")
            + "."
        )
    if baseline is not None:
        lines += _baseline_checks(record, baseline)
    else:
        lines.append("- Control drift across sessions: not checked (no baseline).")
    if not checked and baseline is None:
        lines.append(
            "- Fingerprints: compared with no other run; environment differences "
            "between sessions are not checked."
        )
    return lines


def _baseline_checks(record: RunRecord, baseline: BaselineComparison) -> list[str]:
    """The fingerprint against the baseline, and this session's control against its own."""
    fingerprint = baseline.extra.get("fingerprint") or {}
    lines = [
        f"- Fingerprint against baseline {baseline.run_id or 'none found'} "
        f"(`{baseline.ref}`): "
        + ("; ".join(fingerprint.get("blocking") or []) or "equal where it matters")
        + f"; code {baseline.code.get('baseline')} -> {baseline.code.get('this')}."
    ]
    control = next(
        (
            v
            for per in baseline.verdicts.values()
            for label, v in per.items()
            if label == record.control
        ),
        None,
    )
    if control is not None:
        lines.append(
            f"- Control drift: this session's control against {control.extra.get('against')}"
            f": {control.word}, ratio {number(control.ratio)}."
        )
    return lines
