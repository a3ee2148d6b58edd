"""What ``publish`` owns in its OUT folder, so it rewrites and removes only the files it wrote.

``OUT/.publish.json`` (the manifest) names its format, each page's model hash (what makes
publishing incremental) and the SHA-256 of each file publish wrote. A file counts as publish's
own only where the manifest lists it under a plain relative path, it is a regular file inside
OUT (no link on the way), its bytes have that hash and it carries :data:`GENERATOR` (a
manifest planted to list a user's own ``index.html``, hash and all, still does not make it
ours). :func:`claim` refuses a non-empty OUT that is no site publish wrote;
:func:`check_writable` refuses, before anything is written, a page that would replace a file
publish did not write; only files :func:`claim` verified are ever removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.errors import BenchError
from pytest_benchmark_agent.records.bounded import MAX_STATE_BYTES, BadJson, read_json
from pytest_benchmark_agent.util.fsutil import NotRegularFile, atomic_write, read_regular
from pytest_benchmark_agent.util.safetext import one_line

#: The manifest: each page's model hash and each written file's hash.
STATE_FILE = ".publish.json"
#: The manifest's format name; a manifest without it (another tool's, an earlier version's
#: that kept no hashes) does not make OUT a site publish wrote.
FORMAT = "pytest-benchmark-agent/site"
#: The mark in the head of every page publish writes.
GENERATOR = '<meta name="generator" content="pytest-benchmark-agent publish">'
#: The largest page publish reads back to verify it (a page with its charts is far smaller).
MAX_PAGE_BYTES = 256 << 20


@dataclass(frozen=True)
class Owned:
    """What the manifest of OUT says and what of it holds on disk: each page's model hash, and
    the hash of each file publish wrote that is still as it wrote it."""

    pages: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)


def claim(out: Path) -> Owned:
    """What publish owns in ``out``; BenchError (naming what is there and the fix) when ``out``
    holds files and is no site publish wrote (no manifest of its own whose hashes hold)."""
    if not out.is_dir() or not any(out.iterdir()):
        return Owned()
    manifest = _manifest(out / STATE_FILE)
    files = _verified(out, manifest.get("files"))
    if "index.html" not in files:
        found = sorted(p.name for p in out.iterdir())
        shown = ", ".join(one_line(name, 40) for name in found[:3])
        raise BenchError(
            f"{out} holds files that publish did not write ({shown}"
            f"{', ...' if len(found) > 3 else ''}) and no {STATE_FILE} of a site it wrote whose "
            "hashes match its pages; fix: name a new or empty folder for the site (a site "
            "written by an earlier version, which kept no hashes, is published again into an "
            "empty folder)"
        )
    pages = manifest.get("pages")
    kept = {k: v for k, v in pages.items() if isinstance(v, str)} if isinstance(pages, dict) else {}
    return Owned(pages=kept, files=files)


def check_writable(out: Path, owned: Owned, relatives: Iterable[str]) -> None:
    """Refuse, before anything is written, a page that would replace a file publish did not
    write (or that changed since) or that would be written through a link."""
    root = out.resolve()
    for relative in relatives:
        path = out / relative
        if os.path.lexists(path) and relative not in owned.files:
            raise BenchError(
                f"{path}: publish did not write this file, or it changed since; fix: move it "
                "away, or name a new or empty folder for the site"
            )
        if path.parent.resolve() != root.joinpath(*Path(relative).parts[:-1]):
            raise BenchError(
                f"{path.parent} is a link; fix: remove it, or name a new or empty folder for "
                "the site (publish writes only inside OUT)"
            )


def file_hash(path: Path) -> str:
    """The SHA-256 of the file publish just wrote at ``path``."""
    return hashlib.sha256(read_regular(path, MAX_PAGE_BYTES)).hexdigest()


def write_manifest(
    out: Path, owned: Owned, pages: Mapping[str, str], files: Mapping[str, str]
) -> None:
    """Write the manifest when it changed (an unchanged site is not touched)."""
    if dict(pages) == dict(owned.pages) and dict(files) == dict(owned.files):
        return
    document = {"format": FORMAT, "pages": dict(pages), "files": dict(files)}
    atomic_write(out / STATE_FILE, json.dumps(document, indent=1, sort_keys=True))


def _manifest(path: Path) -> dict[str, Any]:
    """The manifest at ``path`` when it is one of this format, else an empty one."""
    try:
        document = read_json(path, MAX_STATE_BYTES)
    except (OSError, BadJson, NotRegularFile):
        return {}
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        return {}
    return document


def _verified(out: Path, listed: Any) -> dict[str, str]:
    """The listed files that are still publish's own: a plain relative path to a regular file
    inside ``out`` with the listed hash and the :data:`GENERATOR` mark."""
    if not isinstance(listed, dict):
        return {}
    root = out.resolve()
    verified = {}
    for relative, digest in listed.items():
        parts = Path(relative).parts if isinstance(relative, str) else ()
        if not parts or Path(relative).is_absolute() or ".." in parts:
            continue
        path = out / relative
        try:
            if path.resolve() != root.joinpath(*parts) or not stat.S_ISREG(path.lstat().st_mode):
                continue
            data = read_regular(path, MAX_PAGE_BYTES)
        except (OSError, NotRegularFile, RuntimeError):
            continue
        if hashlib.sha256(data).hexdigest() == digest and GENERATOR.encode() in data:
            verified[relative] = digest
    return verified
