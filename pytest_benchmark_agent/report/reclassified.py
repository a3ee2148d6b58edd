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


def _text(entry: Mapping[str, Any], key: str) -> str:
    """One field of an entry as one line of report text (the record is input: escaped)."""
    return md(str(entry.get(key)))


def _events(run: RunRecord) -> list[tuple[str, str | None, str]]:
    """(when, the tag it had before where this changed it, the note) per reclassification and
    flag, in the order they happened."""
    events = []
    for entry in _entries(run, "reclassified"):
        note = (
            f"Reclassified {_text(entry, 'from')} -> {_text(entry, 'to')} on "
            f"{_text(entry, 'at')}: {_text(entry, 'why')}"
        )
        if entry.get("evidence"):
            note += f" ({_text(entry, 'evidence')})"
        events.append((str(entry.get("at")), _text(entry, "from"), note))
    for flag in _entries(run, "flags"):
        changed = flag.get("tag") if isinstance(flag.get("tag"), Mapping) else None
        note = (
            f"Flagged on {_text(flag, 'at')}: it cited {_text(flag, 'run')}, since "
            f"reclassified {_text(flag, 'to')} ({_text(flag, 'why')})"
        )
        if changed:
            note += f"; {_text(changed, 'from')} -> {_text(changed, 'to')}"
        events.append((str(flag.get("at")), _text(changed, "from") if changed else None, note))
    return sorted(events, key=lambda event: event[0])


def tag_line(run: RunRecord) -> str:
    """The report's tag line: after a reclassification or flag that changed it, the tag it had
    before and where to read why."""
    before = [was for _, was, _ in _events(run) if was is not None]
    if not before:
        return f"- **Tag:** {run.tag}"
    return f"- **Tag:** {run.tag} (was {before[-1]}; see Reclassifications and flags below)"


def reclassified_lines(run: RunRecord) -> list[str]:
    """The report's section on the run's reclassifications and flags; none when it has none."""
    events = _events(run)
    if not events:
        return []
    return ["", SECTION, "", *[f"- {note}" for _, _, note in events]]
