"""Memory that outlives a session: ``lessons.md`` and ``risks.md`` in ``$BENCHMARK_HOME``.

Both files are append-only: a note is added with one ``O_APPEND`` write and nothing already in
the file is ever rewritten, so a lesson, once learnt, cannot be lost by a later edit of the tool.
An entry is one markdown list item whose bracketed head carries the time and optional tags::

    - [2026-12-02T14:05:09.120Z | benchmark fts5-merge | param corpus.n_docs=5000] Below 2000
      documents the index holds too few segments for the merge to matter.

``param P=VALUE`` records the value the lesson recommends (``plan`` challenges a request that
sets P otherwise); ``param P`` only says the lesson concerns P. Hand-written items and
paragraphs are read too, untagged. ``plan`` shows every note that applies to a benchmark: tagged
with its name or one of its params, or mentioning either in its text. Headings and quoted
lines (``>``, the files' own explanation) are not notes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_benchmark_agent.util.fsutil import append_line, utc_now

LESSONS = "lessons.md"
RISKS = "risks.md"
_HEADERS = {
    LESSONS: "# Lessons\n\n> Append-only (`benchmark-agent lesson add`); shown by `plan` where "
    "they apply.\n\n",
    RISKS: "# Risks\n\n> Known fragilities and scaling limits, append-only (`benchmark-agent risk "
    "add`); shown by `plan` where they apply.\n\n",
}
_ENTRY = re.compile(r"^- \[(?P<head>[^\]\n]*)\] ?(?P<text>.*)$")
_FORBIDDEN_IN_TAGS = ("]", "|", "\n")


@dataclass(frozen=True)
class Note:
    """One lesson or risk: its text, when it was written, and what it concerns."""

    text: str
    when: str | None = None
    benchmark: str | None = None
    #: param -> the value the note recommends, or None when it only concerns the param.
    params: dict[str, str | None] = field(default_factory=dict)

    def head(self) -> str:
        parts = [self.when or utc_now()]
        if self.benchmark:
            parts.append(f"benchmark {self.benchmark}")
        parts += [f"param {p}" if v is None else f"param {p}={v}" for p, v in self.params.items()]
        return " | ".join(parts)

    def as_entry(self) -> str:
        """The markdown list item (continuation lines indented) that stores this note."""
        body = "\n  ".join(line.rstrip() for line in self.text.strip().splitlines())
        return f"- [{self.head()}] {body}"

    def applies_to(self, name: str, params: Iterable[str]) -> bool:
        """Tagged with this benchmark or one of its params, or naming one of them in its text."""
        params = list(params)
        if self.benchmark == name or any(p in self.params for p in params):
            return True
        return any(_mentions(self.text, term) for term in [name, *params])

    def summary(self) -> str:
        """One line for a terminal: the head, then the text with its line breaks folded."""
        text = " ".join(self.text.split())
        return f"[{self.head()}] {text}" if self.when else text


def _mentions(text: str, term: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(term)}(?!\w)", text) is not None


def add_note(path: Path, note: Note) -> None:
    """Append ``note`` to ``path``, creating it with its header first; never rewrites a byte."""
    for value in [note.benchmark or "", *note.params, *(v or "" for v in note.params.values())]:
        bad = next((c for c in _FORBIDDEN_IN_TAGS if c in value), None)
        if bad is not None:
            raise SystemExit(
                f"benchmark-agent: tag {value!r} holds {bad!r}, which the note's "
                "head cannot store; name the benchmark or param without it."
            )
    if not note.text.strip():
        raise SystemExit("benchmark-agent: a note needs text: say what was learnt and why.")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with path.open("x") as handle:
            handle.write(_HEADERS.get(path.name, ""))
    except FileExistsError:
        pass
    entry = note.as_entry()
    if not _ends_with_newline(path):
        entry = "\n" + entry  # a hand edit left no final newline: start our item on its own line
    append_line(path, entry)


def _ends_with_newline(path: Path) -> bool:
    size = path.stat().st_size
    if size == 0:
        return True
    with path.open("rb") as handle:
        handle.seek(size - 1, os.SEEK_SET)
        return handle.read(1) == b"\n"


def read_notes(path: Path) -> list[Note]:
    """Every note in ``path`` (tagged entries, hand-written list items and paragraphs)."""
    if not path.is_file():
        return []
    notes: list[Note] = []
    block: list[str] = []

    def close() -> None:
        if block:
            notes.append(_parse_block(block))
            block.clear()

    for line in path.read_text(errors="replace").splitlines():
        if not line.strip() or line.startswith(("#", ">")):
            close()
        elif line.startswith("- "):
            close()
            block.append(line)
        else:
            block.append(line)
    close()
    return notes


def _parse_block(lines: list[str]) -> Note:
    match = _ENTRY.match(lines[0])
    rest = [line.strip() for line in lines[1:]]
    if not match:
        return Note(text="\n".join([lines[0].removeprefix("- ").strip(), *rest]))
    when, *tags = [part.strip() for part in match["head"].split("|")]
    benchmark, params = None, {}
    for tag in tags:
        kind, _, value = tag.partition(" ")
        if kind == "benchmark":
            benchmark = value.strip()
        elif kind == "param":
            name, sep, recommended = value.strip().partition("=")
            params[name] = recommended if sep else None
    return Note(
        text="\n".join([match["text"], *rest]).strip(),
        when=when,
        benchmark=benchmark,
        params=params,
    )


def notes_for(home: Path, name: str, params: Iterable[str]) -> tuple[list[Note], list[Note]]:
    """The lessons and the risks that apply to benchmark ``name`` declaring ``params``."""
    params = list(params)
    return tuple(  # type: ignore[return-value]
        [note for note in read_notes(home / file) if note.applies_to(name, params)]
        for file in (LESSONS, RISKS)
    )
