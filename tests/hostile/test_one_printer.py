"""Issue 45, point 2: one printer for every verb and every page publish writes.

A treatment label holding ESC, an OSC 8 link or U+202E (gate 1 accepts it: a label is a
parameter's value) was printed raw by ``compare A B``; a run's ``started`` or code label
reached the published SVG raw, and matplotlib's missing-glyph warning quoted it on stderr.
Every verb's stdout and stderr now go through :mod:`.util.safetext`, and the chart draws its
text through the same rules.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hostilehelpers import assert_no_raw
from recordedrun import BIDI, ESC, OSC8, RAW, Recorded, bench_document, renamed

from pytest_benchmark_agent.util.safetext import PrintableStream

LABELS = [f"a{OSC8}", f"b{BIDI}gnp.exe", f"c{ESC}]0;title\a{ESC}[2J"]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """Two real runs of a benchmark whose treatment labels are hostile."""
    folder = Recorded(tmp_path_factory.mktemp("printer"), bench_document(LABELS))
    folder.session()
    folder.session()
    return folder


def test_every_verb_prints_a_hostile_label_escaped(hostile: Recorded, tmp_path: Path) -> None:
    first, last = (run.name for run in hostile.runs()[-2:])
    exported = tmp_path / "run.json"
    exported.write_text(json.dumps(hostile.export(last)))
    outputs = {
        "compare": hostile.checked("compare", first, last),
        "status": hostile.checked("status", last),
        "export markdown": hostile.checked("export", last, "--format", "markdown", "-o", "-"),
        "import": hostile.checked("import", str(exported), home=tmp_path / "other"),
        "analyze": hostile.checked("analyze", last),
    }
    for where, text in outputs.items():
        assert_no_raw(text, RAW, where)
    assert "a\\x1b]8;;https://" in outputs["compare"]
    assert "\\u202e" in outputs["export markdown"]


def test_a_hostile_run_reference_is_escaped_in_the_message_it_exits_with(
    hostile: Recorded,
) -> None:
    text = hostile.checked("status", f"nope{ESC}[2J{BIDI}", allowed={1})
    assert_no_raw(text, RAW, "status's exit message")
    assert "no unique run 'nope\\x1b[2J\\u202e'" in text


def _hostile_site_run(document: dict[str, Any]) -> None:
    """What an import may hold as text (started, the code label), drawn on the chart."""
    document["record"]["started"] = f"20{ESC}[2J{BIDI}{OSC8}26-01-02T03:04:05Z"
    identity = {"vcs": "git", "commit": "a" * 40, "short": f"abc{ESC}]0;t\a", "dirty": False}
    document["config"]["fingerprint"]["code_identity"] = identity


def test_the_published_pages_and_charts_hold_no_raw_control_character(
    hostile: Recorded, tmp_path: Path
) -> None:
    document = renamed(hostile.export(), "site-run")
    _hostile_site_run(document)
    path = tmp_path / "site-run.json"
    path.write_text(json.dumps(document))
    home = tmp_path / "other"
    hostile.checked("import", str(path), home=home)
    text = hostile.checked("publish", str(tmp_path / "site"), home=home)
    assert_no_raw(text, RAW, "publish's output (matplotlib's glyph warnings included)")
    pages = sorted((tmp_path / "site").rglob("*.html"))
    assert any("<svg" in page.read_text() for page in pages)
    for page in pages:
        assert_no_raw(page.read_text(), RAW, str(page))


def test_the_printer_stream_escapes_control_characters_and_keeps_lines() -> None:
    target = io.StringIO()
    stream = PrintableStream(target)
    assert stream.write(f"ok\tline\n{ESC}[2J{BIDI}x\n") == len(f"ok\tline\n{ESC}[2J{BIDI}x\n")
    stream.flush()
    assert target.getvalue() == "ok\tline\n\\x1b[2J\\u202ex\n"
