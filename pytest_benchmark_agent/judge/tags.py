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

``reclassify`` may only lower a tag, unless a later run reproduced the run (the new evidence a
higher tag needs). Every run that cited a lowered run (as its baseline or the run it reproduced)
is flagged; a flagged RELIABLE run becomes QUALIFIED, and the flag cascades from it in turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.judge.reproduce import Reproduction
from pytest_benchmark_agent.records.reader import load_results
from pytest_benchmark_agent.records.record import load_run
from pytest_benchmark_agent.records.runcheck import TAGS
from pytest_benchmark_agent.records.writer import (
    dump_yaml,
    index_entries,
    index_entry,
    regenerate_index,
)
from pytest_benchmark_agent.util.fsutil import atomic_write, file_lock, utc_now

RANK = {"UNRELIABLE": 0, "EXPLORATORY": 1, "QUALIFIED": 2, "RELIABLE": 3}
_SECTION = "## Reclassifications and flags"


class ReclassifyError(Exception):
    """A reclassification that is refused, with why and what to do instead."""


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


# -- reclassify -----------------------------------------------------------------------------------


def reclassify(home: Path, run_dir: Path, tag: str, why: str) -> list[str]:
    """Set a run's tag by hand, with a reason; returns what changed (the run and its citers)."""
    tag = tag.upper()
    if tag not in TAGS:
        raise ReclassifyError(f"tag '{tag}': use one of {', '.join(TAGS)}")
    if not why.strip():
        raise ReclassifyError("--why: state the reason for the change (it is recorded)")
    with file_lock(home / ".reclassify.lock"):
        load_run(run_dir)  # the typed loader refuses a record of the wrong type, naming the field
        record = load_results(run_dir)
        old = record.get("tag") or "EXPLORATORY"
        if record.get("state") == "running":
            raise ReclassifyError(f"{run_dir.name} is still running; reclassify it once it ended")
        if tag == old:
            raise ReclassifyError(f"{run_dir.name} is already {old}")
        proof = None
        if RANK[tag] > RANK[old]:
            proof = _reproduced_by(home, run_dir.name)
            if proof is None:
                raise ReclassifyError(
                    f"{run_dir.name}: {old} -> {tag} raises the tag, and a tag may only be "
                    "lowered without a new run. Run the same config again: a run that "
                    "reproduces it is the evidence a higher tag needs."
                )
        entry = {"from": old, "to": tag, "why": why, "at": utc_now()}
        if proof:
            entry["evidence"] = f"reproduced by {proof}"
        record.setdefault("reclassified", []).append(entry)
        _write(
            run_dir,
            record,
            tag,
            f"Reclassified {old} -> {tag} on {entry['at']}: {why}"
            + (f" ({entry['evidence']})" if proof else ""),
        )
        lines = [f"{run_dir.name}: {old} -> {tag} ({why})"]
        if RANK[tag] < RANK[old]:
            lines += _cascade(home, run_dir.name, tag, why, {run_dir.name})
    regenerate_index(home)
    return lines


def _cascade(home: Path, cited: str, tag: str, why: str, seen: set[str]) -> list[str]:
    """Flag every run that cited ``cited``; a RELIABLE one becomes QUALIFIED and cascades."""
    lines = []
    for run_dir in citing(home, cited):
        if run_dir.name in seen:
            continue
        seen.add(run_dir.name)
        record = load_results(run_dir)
        old = record.get("tag") or "EXPLORATORY"
        new = "QUALIFIED" if old == "RELIABLE" else old
        flag = {"run": cited, "to": tag, "why": why, "at": utc_now()}
        record.setdefault("flags", []).append(flag)
        _write(
            run_dir,
            record,
            new,
            f"Flagged on {flag['at']}: it cited {cited}, since "
            f"reclassified {tag} ({why})" + (f"; {old} -> {new}" if new != old else ""),
        )
        lines.append(
            f"flagged {run_dir.name}: it cited {cited}"
            + (f"; {old} -> {new}" if new != old else f"; stays {old}")
        )
        if new != old:
            lines += _cascade(home, run_dir.name, new, f"it cited {cited} ({why})", seen)
    return lines


def citing(home: Path, run_id: str) -> list[Path]:
    """Runs whose index entry says they cited ``run_id`` (as baseline or reproduction)."""
    return [
        run_dir for run_dir, entry in index_entries(home) if run_id in (entry.get("cites") or [])
    ]


def _reproduced_by(home: Path, run_id: str) -> str | None:
    """A later run that reproduced ``run_id`` (same frozen config, within tolerance)."""
    for run_dir in citing(home, run_id):
        reproduces = load_results(run_dir).get("reproduces") or {}
        if (
            reproduces.get("run_id") == run_id
            and reproduces.get("kind") == "reproduction"
            and reproduces.get("ok")
        ):
            return run_dir.name
    return None


def _write(run_dir: Path, record: dict[str, Any], tag: str, note: str) -> None:
    """The new tag into results.yaml, index.json and report.md (with a dated note)."""
    old = record.get("tag")
    record["tag"] = tag
    atomic_write(run_dir / "results.yaml", dump_yaml(record))
    entry = index_entry(run_dir)  # an unreadable one is left as it is, with a warning
    if entry is not None:
        entry.update(tag=tag, flags=len(record.get("flags") or []))
        atomic_write(run_dir / "index.json", json.dumps(entry, indent=1))
    report = run_dir / "report.md"
    if report.is_file():
        lines = report.read_text().splitlines()
        if tag != old:
            lines = [
                f"- **Tag:** {tag} (was {old}; see Reclassifications and flags below)"
                if line.startswith("- **Tag:** ")
                else line
                for line in lines
            ]
        if _SECTION not in lines:
            lines += ["", _SECTION, ""]
        atomic_write(report, "\n".join(lines + [f"- {note}"]) + "\n")
