"""Reliability tags: computed by the engine from a run's gates, caveats and reproduction, never
typed by a user, except through ``reclassify``.

The rules, the first that applies:

* **UNRELIABLE**: a gate failed: the run did not complete, nothing passed, a trial ran with
  effective params other than the declared ones (gate 1 after the run), gate 2 refused a primary
  metric (too few replicates, no samples, fingerprints differing from the baseline's), two
  measurements overlapped on a host that promised isolation, the baseline was no longer fit to
  be one, or a primary verdict is decided opposite to that of ANY earlier faithful run of its
  config and code (naming that run).
* **EXPLORATORY**: too little data for a primary verdict (too few replicates or seeds), or no
  earlier run of the same frozen config and code to reproduce (a baseline of other code is
  compared, not reproduced): a first run, and every CI run of a new commit. Its caveats are
  listed, but they do not lift it above EXPLORATORY.
* **QUALIFIED**: it reproduced (or anchored to a baseline of other treatments) but carries a
  stated caveat: ``--bench-isolation none``, accepted preflight risk, an accepted deviation
  ("comparability limited"), failed trials, a budget that stopped it, a caveat of the analysis,
  an effect whose size moved beyond ``reproduce_tolerance``, a QUALIFIED reference, a flag left
  by a reclassification, or the anchor itself.
* **RELIABLE**: it reproduced an earlier run of the same frozen config and code (the same
  primary verdicts, each decided effect's interval overlapping the earlier one's or its ratio
  within ``reproduce_tolerance``), with no caveat.

``reclassify`` (:mod:`.engine.reclassify`, which writes it) may only lower a tag, unless a later
run reproduced the run (the new evidence a higher tag needs). Every run that cited a lowered run
(as its baseline or the run it reproduced) is flagged; a flagged RELIABLE run becomes QUALIFIED,
and the flag cascades from it in turn.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_benchmark_agent.judge.reproduce import Reproduction

#: The tags from lowest to highest: ``reclassify`` raises one only with a reproduction.
RANK = {"UNRELIABLE": 0, "EXPLORATORY": 1, "QUALIFIED": 2, "RELIABLE": 3}


def compute_tag(
    failures: list[str],
    limits: list[str],
    caveats: list[str],
    reference: Reproduction | None,
    skipped: Sequence[str] = (),
) -> tuple[str, list[str]]:
    """The tag and the reasons behind it (shown in the report and stored as ``tag_reasons``).

    ``failures`` are failed gates, ``limits`` what keeps the run EXPLORATORY (too little data for
    a primary verdict, or for the comparison with the earlier run), ``caveats`` what keeps a
    reproduced run from RELIABLE, ``skipped`` why earlier runs of the config were no reruns.
    """
    failures = list(failures)
    limits = [*limits, *(reference.limits if reference is not None else [])]
    if reference is not None and not limits:
        failures += [f"contradicts {reference.run_id}: {p}" for p in reference.problems]
    if failures:
        return "UNRELIABLE", failures
    also = [f"caveat: {c}" for c in caveats]
    if limits:
        return "EXPLORATORY", [*limits, *also]
    if reference is None:
        why = (
            "no earlier run of this frozen config and code to reproduce"
            + (f" ({'; '.join(skipped)})" if skipped else "")
            + ": run the same config on the same code again to reproduce it"
        )
        return "EXPLORATORY", [why, *also]
    qualifiers = list(caveats) + reference.caveats
    if reference.kind == "anchor":
        qualifiers.insert(
            0,
            f"anchored to baseline {reference.run_id} through the treatments "
            "both ran; this config itself was not reproduced",
        )
    if qualifiers:
        return "QUALIFIED", qualifiers
    return "RELIABLE", [
        f"reproduces {reference.run_id} (same config and code: every primary "
        "verdict the same, each effect's size agreeing), with no caveat"
    ]
