"""Does a run reproduce an earlier one? The reproduction, the anchor, and contradictions.

Only a faithful rerun may reproduce: the same frozen config *and* the same code. Every primary
verdict must be the same (else B contradicts A), and a decided effect must agree in size: its
95% interval overlaps A's, or its ratio is within the metric's ``reproduce_tolerance`` of A's
(else a caveat). A run of one configuration has no verdict of its own: it reproduces A when
every primary metric is ``no_change`` against A. With other treatments and the same code (a
baseline), the treatments both ran, compared by median, are an *anchor*, weaker than a
reproduction. :func:`find_reproduction_target` finds the earlier run, :func:`opposite_verdicts`
every earlier faithful run that decided a verdict the other way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.judge.across import (
    blocking_reason,
    code_changed,
    cross_verdicts,
    fingerprint_diff,
    sides,
)
from pytest_benchmark_agent.judge.baseline import REPRODUCIBLE_TAGS, primary_metrics
from pytest_benchmark_agent.records.fingerprint import FingerprintDiff
from pytest_benchmark_agent.records.index import IndexEntry
from pytest_benchmark_agent.records.outcomes import ReproductionRecord
from pytest_benchmark_agent.records.reader import UnreadableRecord, skip_unreadable
from pytest_benchmark_agent.records.record import RunRecord, load_run
from pytest_benchmark_agent.records.writer import load_index
from pytest_benchmark_agent.stats.comparability import Verdict
from pytest_benchmark_agent.stats.units import interval, number, pct, ratio

_DECIDED = ("improved", "regressed")


@dataclass
class Reproduction:
    """Whether a run reproduced (or, for a baseline of other treatments, anchored to) another.

    ``problems`` contradict the earlier run (UNRELIABLE), ``caveats`` qualify the agreement,
    ``limits`` say the comparison could not be made (too little data: EXPLORATORY)."""

    run_id: str
    kind: str  # "reproduction" | "anchor"
    lines: list[str]
    problems: list[str]
    tag: str
    caveats: list[str] = field(default_factory=list)
    benign: list[str] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.limits

    def as_record(self, skipped: list[str]) -> ReproductionRecord:
        """The reproduction as a run's record holds it, with why earlier runs of the config
        were no reruns (``skipped``)."""
        return ReproductionRecord(
            run_id=self.run_id,
            kind=self.kind,
            ok=self.ok,
            lines=tuple(self.lines),
            problems=tuple(self.problems),
            tag=self.tag,
            caveats=tuple(self.caveats),
            benign_differences=tuple(self.benign),
            limits=tuple(self.limits),
            skipped=tuple(skipped),
        )


def reproduction(
    this: RunRecord, prior: RunRecord, specs: Mapping[str, Any], benign: list[str]
) -> Reproduction:
    """A faithful rerun (same frozen config and code), judged by evidence, not verdict equality.

    It *contradicts* the prior run (UNRELIABLE) only when both are decided in opposite
    directions, or their 95% intervals exclude each other with ratios beyond
    ``reproduce_tolerance``. One decided and one undecided is *inconclusive* (QUALIFIED, both
    MDEs shown): underpowered is not contradictory. Two ``no_change`` reproduce only when both
    show that no effect beyond the noise band is there (:func:`_resolved`; else QUALIFIED: they
    could not have seen the effect). A refusal on either side keeps the old rule: the same
    verdict, or a contradiction. A run of one configuration is compared with the prior run
    instead (:func:`_rerun`)."""
    if not [label for label in this.treatments if label != this.control]:
        return _rerun(this, prior, specs, benign)
    found = Reproduction(prior.run_id, "reproduction", [], [], prior.tag, _carried(prior), benign)
    for metric in primary_metrics(specs):
        for label in this.treatments:
            if label != this.control:
                _judge_pair(
                    found,
                    metric,
                    label,
                    specs[metric],
                    this.verdicts.get(metric, {}).get(label),
                    prior.verdicts.get(metric, {}).get(label),
                )
    return found


def _judge_pair(
    found: Reproduction,
    metric: str,
    label: str,
    spec: Any,
    mine: Verdict | None,
    theirs: Verdict | None,
) -> None:
    """One primary verdict of the rerun against the prior run's: its line, and the problem or
    caveat it adds to ``found``."""
    tolerance, threshold = spec.reproduce_tolerance, spec.noise_threshold
    ours, prior_verdict = _word(mine), _word(theirs)
    line = (
        f"`{metric}` [{label}]: {ours} {ratio(_ratio(mine))} {_interval(_ci(mine))} here, "
        f"{prior_verdict} {ratio(_ratio(theirs))} {_interval(_ci(theirs))} in {found.run_id}"
    )
    mdes = f"MDE {pct(_mde(mine))} here, {pct(_mde(theirs))} there"
    apart = (
        _ci(mine)
        and _ci(theirs)
        and not _overlap(_ci(mine), _ci(theirs))
        and not _within(_ratio(mine), _ratio(theirs), tolerance)
    )
    if "not_comparable" in (ours, prior_verdict) or None in (ours, prior_verdict):
        if ours == prior_verdict:
            found.lines.append(f"{line}: reproduced (the same verdict)")
        else:
            found.problems.append(line)
            found.lines.append(f"{line}: NOT reproduced")
    elif ours in _DECIDED and prior_verdict in _DECIDED and ours != prior_verdict:
        found.problems.append(f"{line}: decided in opposite directions")
        found.lines.append(f"{line}: NOT reproduced (opposite directions)")
    elif apart:
        found.problems.append(f"{line}: the 95% intervals exclude each other")
        found.lines.append(f"{line}: NOT reproduced (the intervals exclude each other)")
    elif (ours in _DECIDED) != (prior_verdict in _DECIDED):
        found.caveats.append(
            f"inconclusive against {found.run_id}: {line}; one run decided and the "
            f"other did not ({mdes})"
        )
        found.lines.append(f"{line}: inconclusive (one decided, one not; {mdes})")
    elif ours in _DECIDED:
        agree = (
            "intervals overlap"
            if _overlap(_ci(mine), _ci(theirs))
            else f"ratios within {tolerance:.0%}"
        )
        found.lines.append(f"{line}: reproduced (the same direction, {agree})")
    elif _resolved(mine, threshold) and _resolved(theirs, threshold):
        found.lines.append(
            f"{line}: reproduced (no change; both intervals inside the noise band "
            f"+-{threshold:.0%}; {mdes})"
        )
    else:
        found.caveats.append(
            f"could not have seen the effect: {line}; {mdes}, and the intervals "
            f"reach beyond the noise band +-{threshold:.0%}"
        )
        found.lines.append(f"{line}: not shown (no change, but {mdes})")


def _word(verdict: Verdict | None) -> str | None:
    return verdict.verdict if verdict is not None else None


def _ratio(verdict: Verdict | None) -> float | None:
    return verdict.ratio if verdict is not None else None


def _ci(verdict: Verdict | None) -> tuple[float, float] | None:
    return verdict.ci if verdict is not None else None


def _mde(verdict: Verdict | None) -> float | None:
    return verdict.mde if verdict is not None else None


def _resolved(verdict: Verdict | None, threshold: float) -> bool:
    """Whether a ``no_change`` shows that any effect is one that does not matter: its interval
    lies inside the noise band, or its MDE is the band itself (no noise at all). The MDE counts
    the band (an effect is decided only once the interval clears it), so with any noise it is
    above the band, and the evidence of "no effect that matters" is the interval."""
    return _inside(_ci(verdict), threshold) or _below(_mde(verdict), threshold)


def _below(mde: Any, threshold: float) -> bool:
    """Whether a recorded MDE is at most the noise threshold (an exact comparison has none)."""
    return mde is not None and mde <= threshold + 1e-12


def _rerun(
    this: RunRecord, prior: RunRecord, specs: Mapping[str, Any], benign: list[str]
) -> Reproduction:
    """One configuration, no verdict of its own: it reproduces the prior run when every primary
    metric is ``no_change`` against it with its 95% interval inside ``reproduce_tolerance`` or
    its MDE below the noise threshold (evidence of agreement, not a shared miss: otherwise the
    run could not have seen a difference, QUALIFIED). A change contradicts it; a comparison
    refused for want of data limits it."""
    verdicts, _ = cross_verdicts(this, prior, specs)
    found = Reproduction(prior.run_id, "reproduction", [], [], prior.tag, _carried(prior), benign)
    for metric in primary_metrics(specs):
        tolerance = specs[metric].reproduce_tolerance
        threshold = specs[metric].noise_threshold
        for label, v in verdicts.get(metric, {}).items():
            line = (
                f"`{metric}` [{label}] against {v.extra.get('against')}: {v.verdict} "
                f"{ratio(v.ratio)} {_interval(v.ci)}"
            )
            shown = _inside(v.ci, tolerance) or _below(v.mde, threshold)
            if v.no_change and not shown:
                found.caveats.append(
                    f"could not have seen a difference from {prior.run_id}: {line} reaches "
                    f"beyond reproduce_tolerance {tolerance:.0%} and its MDE "
                    f"{pct(v.mde)} is above the noise threshold {threshold:.0%} "
                    "(add replicates)"
                )
                found.lines.append(f"{line}: not shown (MDE {pct(v.mde)})")
            elif v.no_change:
                found.lines.append(f"{line}: reproduced (no change, within {tolerance:.0%})")
            elif v.not_comparable:
                found.limits.append(f"could not compare with {prior.run_id}: {line} ({v.reason})")
                found.lines.append(f"{line}: not compared ({v.reason})")
            else:
                found.problems.append(f"{line}: the same config and code measured differently")
                found.lines.append(f"{line}: NOT reproduced")
    return found


def _inside(ci: Any, tolerance: float) -> bool:
    """Whether a ratio's interval lies within ``1 +- tolerance`` (no interval: an exact
    comparison, whose ``no_change`` is itself exact)."""
    return not ci or (1 - tolerance - 1e-12 <= ci[0] and ci[1] <= 1 + tolerance + 1e-12)


def _overlap(a: Any, b: Any) -> bool:
    return bool(a and b) and a[0] <= b[1] and b[0] <= a[1]


def _interval(ci: Any) -> str:
    return interval(ci) if ci else "[-]"


def anchor(
    this: RunRecord, baseline: RunRecord, specs: Mapping[str, Any], benign: list[str]
) -> Reproduction | None:
    """Other treatments: the treatments both runs measured, compared by median (a median that
    moved beyond ``reproduce_tolerance`` is a caveat). None when no treatment is shared."""
    shared = [label for label in this.treatments if label in baseline.treatments]
    if not shared:
        return None
    lines, caveats = [], _carried(baseline)
    for metric in primary_metrics(specs):
        tolerance = specs[metric].reproduce_tolerance
        for label in shared:
            mine = this.stats(metric).get(label, {}).get("median")
            theirs = baseline.stats(metric).get(label, {}).get("median")
            line = (
                f"`{metric}` [{label}]: median {number(mine)} here, {number(theirs)} in "
                f"{baseline.run_id} (tolerance {tolerance:.0%})"
            )
            if mine is not None and _within(mine, theirs, tolerance):
                lines.append(f"{line}: agrees")
            else:
                lines.append(f"{line}: differs")
                caveats.append(
                    f"the treatments shared with baseline {baseline.run_id} moved: {line}"
                )
    return Reproduction(baseline.run_id, "anchor", lines, [], baseline.tag, caveats, benign)


def _carried(reference: RunRecord) -> list[str]:
    """What a QUALIFIED reference passes on to the run that relies on it (its caveats, and the
    flags a reclassification left on it)."""
    if reference.tag != "QUALIFIED":
        return []
    return [
        f"relies on QUALIFIED run {reference.run_id}: "
        + ("; ".join((*reference.caveats, *reference.flagged)) or "see its report")
    ]


def _within(a: Any, b: Any, tolerance: float) -> bool:
    if a is None and b is None:
        return True
    if a is None or b is None or b == 0:
        return False
    return abs(a / b - 1) <= tolerance + 1e-12


def _same_config_runs(
    this: RunRecord,
) -> tuple[list[tuple[Path, IndexEntry]], list[str]]:
    """Earlier finished runs of the same frozen config and code as ``this`` (newest first) with
    their index entries, told apart by those entries; and the code labels of the same-config
    runs of other code."""
    candidates = []
    label = this.code
    commit = (this.fingerprint.get("code_identity") or {}).get("commit")
    other_code: list[str] = []
    for run_dir, entry in load_index(this.home):
        if (
            run_dir.name != this.run_id
            and entry.name == this.name
            and entry.config_hash == this.config_hash
            and entry.state == "complete"
            and entry.tag in REPRODUCIBLE_TAGS
            and (entry.ended or "") < (this.started or "~")
        ):
            code = entry.code
            if code is not None and (code.get("label"), code.get("commit")) != (label, commit):
                other_code.append(str(code.get("label")))
                continue
            candidates.append((entry.ended or "", run_dir, entry))
    newest = sorted(candidates, key=lambda c: (c[0], c[1]), reverse=True)
    return [(run_dir, entry) for _, run_dir, entry in newest], other_code


def find_reproduction_target(
    this: RunRecord,
) -> tuple[RunRecord | None, FingerprintDiff | None, list[str]]:
    """The newest earlier run of the same frozen config and code as ``this`` (in its data home)
    with a comparable fingerprint: a run of other code is no rerun (it is compared as a
    baseline instead).

    Returns it, its fingerprint differences, and a note per newer same-config run skipped
    because its fingerprint differs where it matters, and one for the runs of other code (told
    apart by their index entries, so they are never opened).
    """
    skipped: list[str] = []
    candidates, other_code = _same_config_runs(this)
    if other_code:
        skipped.append(
            f"{len(other_code)} earlier run(s) of this frozen config measured other "
            f"code (e.g. {other_code[-1]}; this run {this.code}): a rerun needs the "
            "same code"
        )
    for run_dir, _ in candidates:
        try:
            prior = load_run(run_dir)
        except UnreadableRecord as error:  # an earlier record never breaks a later run
            skip_unreadable(error)
            skipped.append(f"{run_dir.name} (same config) skipped: {error.path} is unreadable")
            continue
        diff = fingerprint_diff(prior, this)
        if code_changed(prior, this, diff):
            skipped.append(
                f"{prior.run_id} (same config) measured other code "
                f"({sides(prior, this)}): not a rerun"
            )
            continue
        if diff.blocking:
            skipped.append(
                f"{prior.run_id} (same config) is not comparable: " + blocking_reason(diff)
            )
            continue
        return prior, diff, skipped
    return None, None, skipped


def _may_oppose(entry: IndexEntry, verdicts: Mapping[str, Mapping[str, Verdict]]) -> bool:
    """Whether an index entry's primary verdicts (metric -> label -> verdict) may hold one
    decided opposite to ``verdicts`` (an entry without them may: its record is read)."""
    listed = entry.verdicts
    if listed is None:
        return True
    flip = {"improved": "regressed", "regressed": "improved"}
    return any(
        (per := listed.get(metric)) is not None and per.get(label) == flip.get(mine.verdict)
        for metric, labels in verdicts.items()
        for label, mine in labels.items()
    )


def opposite_verdicts(this: RunRecord, specs: Mapping[str, Any]) -> list[str]:
    """Every primary verdict of ``this`` decided opposite to the same verdict of ANY earlier
    faithful run (same frozen config and code, comparable fingerprint), naming that run: a
    contradiction with one run is not undone by a later run that happened to agree (issue 35:
    regressed, then no_change, then improved must not pass as inconclusive)."""
    found = []
    for run_dir, entry in _same_config_runs(this)[0]:
        if not _may_oppose(entry, this.verdicts):
            continue  # its index entry shows no decided verdict opposite to ours: never opened
        try:
            prior = load_run(run_dir)
        except UnreadableRecord as error:
            skip_unreadable(error)
            continue
        diff = fingerprint_diff(prior, this)
        if code_changed(prior, this, diff) or diff.blocking:
            continue
        for metric in primary_metrics(specs):
            for label, mine in this.verdicts.get(metric, {}).items():
                theirs = prior.verdicts.get(metric, {}).get(label)
                ours, their_verdict = mine.verdict, _word(theirs)
                if ours in _DECIDED and their_verdict in _DECIDED and ours != their_verdict:
                    found.append(
                        f"contradicts {prior.run_id}: `{metric}` [{label}] {ours} "
                        f"{ratio(mine.ratio)} {_interval(mine.ci)} here, "
                        f"{their_verdict} {ratio(_ratio(theirs))} "
                        f"{_interval(_ci(theirs))} in {prior.run_id} (the same config "
                        "and code, decided in opposite directions)"
                    )
    return found
