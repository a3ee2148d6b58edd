"""``lessons.md`` and ``risks.md``: appended through the real command, never rewritten, and read
back with their tags so ``plan`` shows the notes that apply."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pytest_benchmark_agent.records.lessons import Note, add_note, notes_for, read_notes


def agent(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["benchmark-agent", "--home", str(home), *args], capture_output=True, text=True, timeout=60
    )


def test_lessons_are_appended_and_earlier_bytes_never_change(tmp_path: Path) -> None:
    home = tmp_path / "data"
    lessons = home / "lessons.md"
    snapshots = []
    for args in (
        [
            "first: corpus.n_docs below 2000 hides the merge effect",
            "--benchmark",
            "fts5-merge",
            "--param",
            "corpus.n_docs=5000",
        ],
        ["second, over\ntwo lines", "--param", "n_queries"],
        ["third, untagged"],
    ):
        result = agent(home, "lesson", "add", *args)
        assert result.returncode == 0, result.stderr
        snapshots.append(lessons.read_bytes())
    for earlier, later in zip(snapshots, snapshots[1:], strict=False):
        assert later.startswith(earlier) and len(later) > len(earlier)
    notes = read_notes(lessons)
    assert [n.text for n in notes] == [
        "first: corpus.n_docs below 2000 hides the merge effect",
        "second, over\ntwo lines",
        "third, untagged",
    ]
    assert notes[0].benchmark == "fts5-merge" and notes[0].params == {"corpus.n_docs": "5000"}
    assert notes[1].params == {"n_queries": None} and notes[1].when


def test_a_hand_edit_without_final_newline_is_kept_byte_for_byte(tmp_path: Path) -> None:
    risks = tmp_path / "risks.md"
    risks.write_text("# Risks\n\n- hand-written: the NVMe cache hides cold-read costs")
    before = risks.read_bytes()
    add_note(
        risks,
        Note(text="page cache warm after the first replicate", when="T", benchmark="fts5-merge"),
    )
    after = risks.read_bytes()
    assert after.startswith(before)
    assert [n.text for n in read_notes(risks)] == [
        "hand-written: the NVMe cache hides cold-read costs",
        "page cache warm after the first replicate",
    ]


def test_notes_apply_by_tag_or_by_naming_the_benchmark_or_a_param(tmp_path: Path) -> None:
    (tmp_path / "lessons.md").write_text(
        "# Lessons\n\n"
        "- [T1 | benchmark fts5-merge] tagged with the benchmark\n"
        "- [T2 | param n_queries=300] tagged with a param\n"
        "- mentions fts.merge. in its text\n"
        "- mentions corpus.n but no declared param\n\n"
        "A paragraph about another-bench only.\n"
    )
    (tmp_path / "risks.md").write_text("- [T3 | benchmark other] corpus.n_docs over 1e6 OOMs\n")
    lessons, risks = notes_for(tmp_path, "fts5-merge", ["corpus.n_docs", "n_queries", "fts.merge"])
    assert [n.text for n in lessons] == [
        "tagged with the benchmark",
        "tagged with a param",
        "mentions fts.merge. in its text",
    ]
    assert [n.text for n in risks] == ["corpus.n_docs over 1e6 OOMs"]


def test_risk_add_and_bad_tags_are_clear(tmp_path: Path) -> None:
    home = tmp_path / "data"
    ok = agent(home, "risk", "add", "RSS grows with n_docs", "--param", "corpus.n_docs")
    assert ok.returncode == 0 and (home / "risks.md").read_text().startswith("# Risks")
    bad = agent(home, "lesson", "add", "text", "--benchmark", "a|b")
    assert bad.returncode != 0 and "'a|b' holds '|'" in bad.stderr
    empty = agent(home, "lesson", "add", "  ")
    assert empty.returncode != 0 and "a note needs text" in empty.stderr
    assert not (home / "lessons.md").exists()
