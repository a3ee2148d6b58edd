"""Two recorded runs side by side: gate 2 on their fingerprints, the code each measured, and
every treatment of one against the other.

* **Gate 2 across runs** (:func:`fingerprint_diff`, :func:`.fingerprint.compare_fingerprints`):
  a blocking difference (environment, accelerator, declared variables) refuses the comparison,
  naming the fields; a difference of code is no refusal but the comparison's axis, shown as
  ``a1b2c3d -> e4f5a6b`` (:func:`sides`).
* **What does B measure against A?** (:func:`cross_verdicts`) Each treatment of B against the
  same treatment of A, or against A's control when A did not run it, under the rule of
  :mod:`.analysis`. The sessions were not interleaved, so this is unpaired (Mann-Whitney U;
  paired by seed when seeds are used): drift between the sessions does not cancel, and the
  report says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_benchmark_agent.judge.observations import observations
from pytest_benchmark_agent.records.fingerprint import FingerprintDiff, compare_fingerprints
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.stats.comparability import Verdict

if TYPE_CHECKING:
    from pytest_benchmark_agent.stats import analysis

_REFERENCE = "<reference>"
_OFFSET = 1_000_000  # keeps the two sessions' replicates from pairing as if they were blocks
_UNPAIRED_NOTE = "compared unpaired with Mann-Whitney U"


def fingerprint_diff(reference: RunRecord, subject: RunRecord) -> FingerprintDiff:
    uses_gpu = reference.uses_gpu or subject.uses_gpu
    return compare_fingerprints(reference.fingerprint, subject.fingerprint, uses_gpu=uses_gpu)


def blocking_reason(diff: FingerprintDiff) -> str:
    fields = sorted({entry.split(": ", 1)[0] for entry in diff.blocking})
    return "fingerprints differ in fields that matter: " + ", ".join(fields)


def _code_key(identity: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
    """What makes two code identities the same code (a branch name does not)."""
    if not identity:
        return None
    if identity.get("vcs") == "git":
        return (
            "git",
            identity.get("commit"),
            bool(identity.get("dirty")),
            identity.get("diff_hash"),
        )
    return ("content", identity.get("content_hash"))


def code_changed(reference: RunRecord, subject: RunRecord, diff: FingerprintDiff) -> bool:
    """Whether the two runs measured different code: their code identities differ (for records
    without one, any difference gate 2 files under code)."""
    a = _code_key(reference.fingerprint.get("code_identity"))
    b = _code_key(subject.fingerprint.get("code_identity"))
    if a is not None and b is not None:
        return a != b
    return bool(diff.code)


def sides(reference: RunRecord, subject: RunRecord) -> str:
    """Both sides of a comparison by their code: ``a1b2c3d -> e4f5a6b``."""
    return f"{reference.code} -> {subject.code}"


def cross_verdicts(
    subject: RunRecord, reference: RunRecord, specs: Mapping[str, Any], refusal: str | None = None
) -> tuple[dict[str, dict[str, Verdict]], list[str]]:
    """Every treatment of ``subject`` against ``reference`` (its same treatment, else its
    control), per metric, each naming what it was compared with (``against``); all
    ``not_comparable`` with ``refusal`` when gate 2 refused."""
    against = {
        label: label if label in reference.treatments else reference.control
        for label in subject.treatments
    }
    verdicts: dict[str, dict[str, Verdict]] = {metric: {} for metric in specs}
    caveats: list[str] = []
    for ref_label in sorted(set(against.values())):
        labels = [label for label, target in against.items() if target == ref_label]
        where = f"{reference.run_id} `{ref_label}`"
        if refusal is not None:
            for metric in specs:
                for label in labels:
                    verdicts[metric][label] = Verdict(
                        "not_comparable", reason=refusal, extra={"against": where}
                    )
            continue
        result = _analysed(subject, reference, specs, ref_label, labels)
        for metric, per in result.verdicts.items():
            for label, verdict in per.items():
                verdicts[metric][label] = _against(verdict, where)
        caveats += [c.replace(_REFERENCE, where) for c in result.caveats if _UNPAIRED_NOTE not in c]
    return verdicts, caveats


def _analysed(
    subject: RunRecord,
    reference: RunRecord,
    specs: Mapping[str, Any],
    ref_label: str,
    labels: list[str],
) -> analysis.RunAnalysis:
    """``labels`` of ``subject`` against ``ref_label`` of ``reference``, the two sessions'
    blocks kept apart."""
    from pytest_benchmark_agent.stats import analysis  # numpy: imported only when runs are compared

    obs_by_metric: dict[str, list[analysis.Observation]] = {}
    for metric in specs:
        theirs, _ = observations(reference.trials, [metric], [], rename={ref_label: _REFERENCE})
        mine, _ = observations(
            subject.trials, [metric], [], rename={label: label for label in labels}, offset=_OFFSET
        )
        obs_by_metric[metric] = theirs[metric] + mine[metric]
    return analysis.analyze_run(obs_by_metric, specs, [_REFERENCE, *labels], _REFERENCE)


def _against(verdict: Verdict, where: str) -> Verdict:
    """``verdict`` naming what it was compared with."""
    return dataclasses.replace(verdict, extra={**verdict.extra, "against": where})
