"""What ``reclassify`` changed on a run, as its report shows it: the tag it had before, and a
dated note per reclassification and flag (``reclassified`` and ``flags`` of ``results.yaml``).

Rendered from the record alone, so a reclassified run's report is written by the report writer
like any other (:mod:`.engine.reclassify`), never edited as text. The entries are read
defensively: they are fields no loader types.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.util.safetext import md

SECTION = "## Reclassifications and flags"


def _entries(run: RunRecord, field: str) -> list[Mapping[str, Any]]:
    """The mappings of ``field`` of the record's extra fields (anything else left out)."""
    value = run.extra.get(field)
    if isinstance(value, str) or not isinstance(value, tuple | list):
        return []
    return [entry for entry in value if isinstance(entry, Mapping)]


def _events(run: RunRecord) -> list[tuple[str, str | None, str]]:
    """(when, the tag it had before where this changed it, the note) per reclassification and
    flag, in the order they happened."""
    events = []
    for entry in _entries(run, "reclassified"):
        evidence = entry.get("evidence")
        note = f"Reclassified {entry.get('from')} -> {entry.get('to')} on {entry.get('at')}: "
        note += md(str(entry.get("why"))) + (f" ({md(str(evidence))})" if evidence else "")
        events.append((str(entry.get("at")), str(entry.get("from")), note))
    for flag in _entries(run, "flags"):
        changed = flag.get("tag") if isinstance(flag.get("tag"), Mapping) else None
        note = (
            f"Flagged on {flag.get('at')}: it cited {md(str(flag.get('run')))}, since "
            f"reclassified {flag.get('to')} ({md(str(flag.get('why')))})"
        )
        if changed:
            note += f"; {changed.get('from')} -> {changed.get('to')}"
        events.append((str(flag.get("at")), str(changed.get("from")) if changed else None, note))
    return sorted(events, key=lambda event: event[0])


def tag_line(run: RunRecord) -> str:
    """The report's tag line: after a reclassification or flag that changed it, the tag it had
    before and where to read why."""
    before = [was for _, was, _ in _events(run) if was is not None]
    if not before:
        return f"- **Tag:** {run.tag}"
    return f"- **Tag:** {run.tag} (was {md(before[-1])}; see Reclassifications and flags below)"


def reclassified_lines(run: RunRecord) -> list[str]:
    """The report's section on the run's reclassifications and flags; none when it has none."""
    events = _events(run)
    if not events:
        return []
    return ["", SECTION, "", *[f"- {note}" for _, _, note in events]]
