"""User text made inert where the engine writes it: run ids safe as folder names, names kept
to one bounded line, and text escaped for Markdown, so a hostile name can neither leave the data
home, nor overflow a file name, nor forge a line or a section of a report or index.

The one printer of text from outside (labels, names, reasons, what a stage printed): control
characters are shown escaped (``\x1b``), so no escape sequence reaches a terminal (an OSC title,
a clear screen, an OSC 8 link), and bidi controls (U+202A-U+202E, U+2066-U+2069, U+200E/F,
U+061C) are shown escaped too, so no text is reordered on screen (:func:`printable`,
:func:`one_line`); Markdown and HTML are escaped by :func:`md` for one value and by
:func:`inert_markdown` for a whole document, which every report writer passes its text through.

Light on purpose (``re`` only): the plugin checks ``--bench-run-id`` with it before anything
heavy is imported.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from collections.abc import Iterator
from typing import Any, TextIO

#: The longest benchmark name, stage name, artifact name or run id accepted: a run id adds a
#: 27-character stamp and suffix to the name, and a file name may have 255 bytes.
NAME_MAX = 100
#: The longest run id: a bounded name (:data:`NAME_MAX`) with its stamp and suffix, and room.
RUN_ID_MAX = 160
#: A run id names a folder of ``runs/``: letters, digits and ``_ . = @ + -``, starting with a
#: letter or digit (so never ``.``, ``..`` or a path).
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.=@+-]*")
#: Stage and artifact names become folder and file names and placeholders: ``{name}``.
_SIMPLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.@-]*")
#: Line and tab breaks: a space in a one-line output.
_BREAKS = re.compile(r"[\t\n\v\f\r\u2028\u2029]+")
#: What a human-facing output shows escaped: control characters (C0 but newline and tab, DEL,
#: C1) and the bidi controls that reorder text on screen.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: Markdown code spans (a run of backticks to the same run): HTML is inert inside them.
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)")


def run_id_problem(text: str) -> str | None:
    """Why ``text`` cannot be a run id, or None when it can."""
    if len(text) > RUN_ID_MAX:
        return f"is {len(text)} characters long; at most {RUN_ID_MAX} are accepted"
    if not _RUN_ID.fullmatch(text):
        return (
            "must be a folder name inside the data home: letters, digits and _ . = @ + -, "
            "starting with a letter or digit (no / and no ..)"
        )
    return None


def run_id_option(text: str) -> str:
    """``--bench-run-id``'s type: the id, or a usage error saying what is accepted."""
    problem = run_id_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(f"{text[:60]!r} {problem}, e.g. nightly-2026-01-02")
    return text


def simple_name_problem(text: str) -> str | None:
    """Why ``text`` cannot be a stage or artifact name (a folder name and a placeholder)."""
    if len(text) > NAME_MAX:
        return f"is {len(text)} characters long; at most {NAME_MAX} are accepted"
    if not _SIMPLE_NAME.fullmatch(text):
        return (
            "must be letters, digits and _ . @ -, starting with a letter or _ "
            "(it names a folder or file inside the data home)"
        )
    return None


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``text`` for a terminal, a log or a report, lines kept: every control character but
    newline and tab, and every bidi control, shown escaped (``\\x1b``, ``\\u202e``)."""
    return _UNSAFE.sub(_escaped, str(text))


class PrintableStream:
    """A text stream (stdout, stderr) every write of which goes through :func:`printable`: the
    one printer of a verb, for its own lines, argparse's usage errors and the warnings of the
    libraries it calls (matplotlib's missing-glyph warning quotes the text it was given)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(printable(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextlib.contextmanager
def printed_through_printer() -> Iterator[None]:
    """Route ``sys.stdout`` and ``sys.stderr`` through :class:`PrintableStream` while a verb
    runs (what a child process writes to the file descriptors is its own printer's)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = PrintableStream(saved[0]), PrintableStream(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def one_line(text: object, limit: int | None = None) -> str:
    """``text`` as one printable line: line breaks and tabs become a space, other control
    characters and bidi controls are shown escaped (:func:`printable`), and at most ``limit``
    characters are kept (the cut marked with ``...``)."""
    line = printable(_BREAKS.sub(" ", str(text)))
    if limit is not None and len(line) > limit:
        line = line[: max(limit - 3, 0)] + "..."
    return line


def md(text: object) -> str:
    """User text for Markdown prose or a table cell: one line, and ``\\ | < >`` escaped, so it
    can neither start a heading nor split a cell nor open an HTML tag."""
    line = one_line(text).replace("\\", "\\\\").replace("|", "\\|")
    return line.replace("<", "&lt;").replace(">", "&gt;")


def inert_markdown(document: str) -> str:
    """A whole Markdown document made inert, as every report writer writes it (report.md,
    results_index.md, a tune's report, the ``$GITHUB_STEP_SUMMARY`` section): control and
    bidi characters shown escaped, and ``<`` outside code spans written ``&lt;``, so no text
    it quotes (a label ``b"><script>``, ``b<!--``) opens a tag or a comment that hides the rest.
    The document renders as before: ``&lt;`` shows as ``<``; a code span shows its text as is."""
    lines = []
    for line in printable(document).split("\n"):
        kept, start = [], 0
        for span in _CODE_SPAN.finditer(line):
            kept += [line[start : span.start()].replace("<", "&lt;"), span.group()]
            start = span.end()
        lines.append("".join(kept) + line[start:].replace("<", "&lt;"))
    return "\n".join(lines)


def md_code(text: object) -> str:
    """User text as a Markdown code span (backticks included): one line, ``|`` escaped for a
    table, fenced by more backticks than it holds."""
    line = one_line(text).replace("|", "\\|")
    runs = [len(run) for run in re.findall(r"`+", line)]
    if not runs:
        return f"`{line}`"
    fence = "`" * (max(runs) + 1)
    return f"{fence} {line} {fence}"
