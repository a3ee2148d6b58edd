"""Issue 45, point 5: ``publish OUT`` writes only its own site.

It overwrote a user's own ``OUT/index.html`` silently, and a planted ``OUT/.publish.json``
listing other files made it delete them. Now a non-empty OUT is published into only where its
manifest verifies as publish's own (the hash of each file it wrote, and its mark in each page);
a file publish did not write is never replaced nor removed.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from hostilehelpers import snapshot
from recordedrun import Recorded

from pytest_benchmark_agent.report.site_manifest import GENERATOR


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """A real run, to publish."""
    recorded = Recorded(tmp_path_factory.mktemp("publish"))
    recorded.session()
    return recorded


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_new_folder_is_published_and_then_updated_in_place(
    folder: Recorded, tmp_path: Path
) -> None:
    out = tmp_path / "site"
    assert "3 page(s) written" in folder.checked("publish", str(out))
    manifest = json.loads((out / ".publish.json").read_text())
    assert set(manifest["files"]) == {p.relative_to(out).as_posix() for p in out.rglob("*.html")}
    for relative, digest in manifest["files"].items():
        assert _sha((out / relative).read_bytes()) == digest
    before = snapshot(out)
    assert "0 page(s) written, 3 unchanged" in folder.checked("publish", str(out))
    assert snapshot(out) == before


def test_a_folder_holding_the_users_own_index_is_refused_and_left_alone(
    folder: Recorded, tmp_path: Path
) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "index.html").write_text("<h1>my own page</h1>\n")
    before = snapshot(out)
    text = folder.checked("publish", str(out), allowed={2})
    assert f"{out} holds files that publish did not write (index.html)" in text
    assert "fix: name a new or empty folder" in text
    assert snapshot(out) == before


def test_a_planted_manifest_listing_the_users_files_deletes_and_overwrites_nothing(
    folder: Recorded, tmp_path: Path
) -> None:
    out = tmp_path / "planted"
    out.mkdir()
    mine = {"index.html": b"<h1>mine</h1>\n", "notes.txt": b"keep me\n", "old/a.html": b"x\n"}
    for relative, data in mine.items():
        (out / relative).parent.mkdir(exist_ok=True)
        (out / relative).write_bytes(data)
    listed = {relative: _sha(data) for relative, data in mine.items()}
    planted = {"format": "pytest-benchmark-agent/site", "pages": listed, "files": listed}
    (out / ".publish.json").write_text(json.dumps(planted))
    before = snapshot(out)
    text = folder.checked("publish", str(out), allowed={2})
    assert "no .publish.json of a site it wrote whose hashes match its pages" in text
    assert snapshot(out) == before


def test_an_edited_manifest_of_its_own_site_removes_only_the_pages_it_wrote(
    folder: Recorded, tmp_path: Path
) -> None:
    out = tmp_path / "site"
    folder.checked("publish", str(out))
    (out / "notes.txt").write_text("the user's\n")
    manifest = json.loads((out / ".publish.json").read_text())
    manifest["files"]["notes.txt"] = _sha(b"the user's\n")
    manifest["files"]["../outside.html"] = "0" * 64
    stale = f"<html><head>{GENERATOR}</head></html>\n".encode()  # a page it wrote, no more
    (out / "stale.html").write_bytes(stale)
    manifest["files"]["stale.html"] = _sha(stale)
    (out / ".publish.json").write_text(json.dumps(manifest))
    outside = tmp_path / "outside.html"
    outside.write_text("outside\n")
    text = folder.checked("publish", str(out))
    assert "1 removed" in text and not (out / "stale.html").exists()
    assert (out / "notes.txt").read_text() == "the user's\n"
    assert outside.read_text() == "outside\n"


def test_a_page_changed_by_hand_is_not_replaced_or_removed(
    folder: Recorded, tmp_path: Path
) -> None:
    out = tmp_path / "site"
    folder.checked("publish", str(out))
    page = next(p for p in out.rglob("*.html") if p.parent != out)
    page.write_text("edited by hand\n")
    os.utime(page, ns=(1, 1))
    text = folder.checked("publish", str(out), allowed={2})
    assert f"{page}: publish did not write this file, or it changed since" in text
    assert page.read_text() == "edited by hand\n"
