"""The comparison with ``--bench-baseline``: a :class:`.BaselineComparison` of the run against
the run its REF resolved to, with the CI gate on it, and the reproduction or anchor it gives.

The baseline is the reference only for a faithful rerun (the same code, the same frozen config:
a reproduction) or, with the same code and other treatments, an anchor; against other code it
is compared (the gate) and the run's reproduction is searched for among earlier runs of its
config and code, as without a baseline (``judge.gate2.judge_run``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.judge import evidence
from pytest_benchmark_agent.judge.across import (
    blocking_reason,
    code_changed,
    cross_verdicts,
    fingerprint_diff,
    sides,
)
from pytest_benchmark_agent.judge.baseline import BASELINE_TAGS, FINISHED, Resolution
from pytest_benchmark_agent.judge.ci_gate import baseline_gate, unjudged
from pytest_benchmark_agent.judge.reproduce import Reproduction, anchor, reproduction
from pytest_benchmark_agent.records.frozen import freeze
from pytest_benchmark_agent.records.record import BaselineComparison, RunRecord, load_run
from pytest_benchmark_agent.records.writer import comparison_key
from pytest_benchmark_agent.stats.comparability import Verdict

_UNPAIRED_ACROSS = (
    "the sessions were not interleaved: each comparison with the baseline is "
    "unpaired (Mann-Whitney U; paired by seed where seeds are used), so drift "
    "between the two sessions does not cancel"
)


def compare_with_baseline(
    this: RunRecord, resolution: Resolution
) -> tuple[BaselineComparison, Reproduction | None]:
    """The comparison with the baseline ``resolution`` names (its CI gate included), and the
    reproduction or anchor when the baseline measured the same code and gate 2 allows it."""
    specs = this.model.metrics
    if resolution.run_dir is None or resolution.problem:
        return (
            BaselineComparison(
                run_id=resolution.run_id,
                ref=resolution.ref,
                resolved=resolution.how,
                refused=resolution.problem,
                code=freeze({"baseline": None, "this": this.code, "changed": None}),
                gate=unjudged([f"baseline `{resolution.ref}`: {resolution.problem}"]),
            ),
            None,
        )
    base = load_run(resolution.run_dir)
    diff = fingerprint_diff(base, this)
    refusal = blocking_reason(diff) if diff.blocking else None
    if base.state not in FINISHED or base.tag not in BASELINE_TAGS:
        refusal = refusal or f"the baseline is now {base.tag} ({base.state})"
    changed = code_changed(base, this, diff)
    verdicts, notes = cross_verdicts(this, base, specs, refusal)
    notes = _exploratory(base) + notes
    judged, run_to_run = _across(this, base, verdicts) if not refusal else ({}, None)
    reference = None
    if refusal is None and changed:
        notes.append(
            f"the baseline measured other code ({sides(base, this)}): this "
            "is a comparison of code, not a rerun of it"
        )
    elif refusal is None:
        reference, note = _reference(this, base, diff.benign)
        notes += note
    extra: dict[str, Any] = {
        "tag": base.tag,
        "caveats": [*base.caveats, *base.flagged] if base.tag == "QUALIFIED" else [],
        "fingerprint": {"blocking": diff.blocking, "benign": diff.benign, "code": list(diff.code)},
        "notes": ([] if refusal else [_UNPAIRED_ACROSS]) + notes,
    }
    if run_to_run is not None:
        extra["run_to_run"] = run_to_run
    comparison = BaselineComparison(
        run_id=resolution.run_id,
        ref=resolution.ref,
        resolved=resolution.how,
        refused=refusal,
        verdicts=freeze(verdicts),
        code=freeze({"baseline": base.code, "this": this.code, "changed": changed}),
        extra=freeze(extra),
        judged=freeze(judged),
    )
    return dataclasses.replace(comparison, gate=baseline_gate(comparison, specs)), reference


def _exploratory(base: RunRecord) -> list[str]:
    """The note an EXPLORATORY baseline gets: its figures are one session's."""
    if base.tag != "EXPLORATORY":
        return []
    return [
        f"the baseline {base.run_id} is EXPLORATORY: one session, never reproduced, so its "
        "figures are that session's alone"
    ]


def _reference(
    this: RunRecord, base: RunRecord, benign: list[str]
) -> tuple[Reproduction | None, list[str]]:
    """A baseline of the same code: a reproduction when it is the same frozen config, else an
    anchor through the treatments both ran (or a note that none anchors this run to it)."""
    specs = this.model.metrics
    if base.config_hash == this.config_hash:
        return reproduction(this, base, specs, benign), []
    anchored = anchor(this, base, specs, benign)
    if anchored is None:
        return None, [f"no treatment in common with {base.run_id}: nothing anchors this run to it"]
    return anchored, []


def _across(
    this: RunRecord, base: RunRecord, verdicts: Mapping[str, Mapping[str, Verdict]]
) -> tuple[dict[str, dict[str, Verdict]], dict[str, Any]]:
    """The comparison with the baseline judged with the session as the unit, and the spreads
    used (:func:`.evidence.judge_across`), from the recorded runs of the baseline's revision."""
    assert this.home is not None  # a run being judged has its folder
    history, source = evidence.recorded_history(
        this.home,
        this.name,
        comparison_key(this.model),
        (base.fingerprint.get("code_identity") or {}).get("commit"),
        this.run_id,
        Path(this.config_file or ".").parent,
    )
    return evidence.judge_across(this, base, history, source, verdicts, this.model.metrics)
