"""``reclassify``: a run's tag set by hand, with a reason, and every run that cited it flagged.

The rules are :mod:`.judge.tags`' (a tag may only be lowered without a later run that
reproduced the run; a flagged RELIABLE run becomes QUALIFIED, and the flag cascades from it).
Each changed run is read with the one loader (:func:`.records.record.load_run`) and written
as a new :class:`.RunRecord` through the engine's writers (:func:`.finish.standalone_hooks`):
``results.yaml``, ``index.json`` and ``report.md``, which renders the reclassifications and
flags from the record, never an edit of the report's text. A citing run that does not load is
skipped with one warning naming its file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_benchmark_agent.engine.finish import standalone_hooks
from pytest_benchmark_agent.judge.tags import RANK
from pytest_benchmark_agent.records.frozen import thaw
from pytest_benchmark_agent.records.reader import UnreadableRecord, skip_unreadable
from pytest_benchmark_agent.records.record import RunRecord, load_run
from pytest_benchmark_agent.records.runcheck import TAGS
from pytest_benchmark_agent.records.writer import load_index
from pytest_benchmark_agent.util.fsutil import file_lock, utc_now


class ReclassifyError(Exception):
    """A reclassification that is refused, with why and what to do instead."""


def reclassify(home: Path, run_dir: Path, tag: str, why: str) -> list[str]:
    """Set a run's tag by hand, with a reason; returns what changed (the run and its citers)."""
    tag = tag.upper()
    if tag not in TAGS:
        raise ReclassifyError(f"tag '{tag}': use one of {', '.join(TAGS)}")
    if not why.strip():
        raise ReclassifyError("--why: state the reason for the change (it is recorded)")
    hook = standalone_hooks()
    with file_lock(home / ".reclassify.lock"):
        record = load_run(run_dir)  # refuses a record of the wrong type, naming the field
        old = record.tag
        if record.state == "running":
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
        hook.pytest_bench_run_finished(run=_appended(record, "reclassified", entry, tag))
        lines = [f"{run_dir.name}: {old} -> {tag} ({why})"]
        if RANK[tag] < RANK[old]:
            lines += _cascade(hook, home, run_dir.name, tag, why, {run_dir.name})
    return lines


def _cascade(hook: Any, home: Path, cited: str, tag: str, why: str, seen: set[str]) -> list[str]:
    """Flag every run that cited ``cited``; a RELIABLE one becomes QUALIFIED and cascades."""
    lines = []
    for run_dir in citing(home, cited):
        if run_dir.name in seen:
            continue
        seen.add(run_dir.name)
        try:
            record = load_run(run_dir)
        except UnreadableRecord as error:
            skip_unreadable(error)
            continue
        old = record.tag
        new = "QUALIFIED" if old == "RELIABLE" else old
        flag = {"run": cited, "to": tag, "why": why, "at": utc_now()}
        if new != old:
            flag["tag"] = {"from": old, "to": new}
        hook.pytest_bench_run_finished(run=_appended(record, "flags", flag, new))
        lines.append(
            f"flagged {run_dir.name}: it cited {cited}"
            + (f"; {old} -> {new}" if new != old else f"; stays {old}")
        )
        if new != old:
            lines += _cascade(hook, home, run_dir.name, new, f"it cited {cited} ({why})", seen)
    return lines


def _appended(record: RunRecord, field: str, entry: dict[str, Any], tag: str) -> RunRecord:
    """``record`` tagged ``tag``, with ``entry`` added to its list ``field`` of ``extra``."""
    extra = thaw(record.extra)
    extra[field] = [*(extra.get(field) or []), entry]
    return record.replace(tag=tag, extra=extra)


def citing(home: Path, run_id: str) -> list[Path]:
    """Runs whose index entry says they cited ``run_id`` (as baseline or reproduction)."""
    return [run_dir for run_dir, entry in load_index(home) if run_id in entry.cites]


def _reproduced_by(home: Path, run_id: str) -> str | None:
    """A later run that reproduced ``run_id`` (same frozen config, within tolerance)."""
    for run_dir in citing(home, run_id):
        try:
            reproduces = load_run(run_dir).reproduces
        except UnreadableRecord as error:
            skip_unreadable(error)
            continue
        if reproduces and reproduces.run_id == run_id and reproduces.reproduced:
            return run_dir.name
    return None
