"""The content-addressed prep cache: ``$BENCHMARK_HOME/cache/<signature>/``.

An entry holds the artifacts a prep produced and ``manifest.json``, written last, with the
content hash of every artifact. An entry is reused only when its manifest verifies (every
artifact present with the recorded hash); otherwise it is rebuilt: a corrupted cache is never
used. Building happens under a per-signature lock (an flock, so a crashed builder releases it),
so concurrent sessions and xdist workers build each signature once and the others reuse it.
Each reuse touches the manifest, so its modification time is the entry's last use: what
``benchmark-agent clean`` ages and orders entries by (``cli/clean.py``).
A signature never holds a secret param in clear: the plan keys it with an HMAC under the data
home's own random key (``util/redact.py``), and the manifest is written redacted.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.engine.plan import PrepNode, content_hash
from pytest_benchmark_agent.errors import StageFailed
from pytest_benchmark_agent.records.bounded import MAX_STATE_BYTES, BadJson, read_json
from pytest_benchmark_agent.records.run import SCHEMA_VERSION
from pytest_benchmark_agent.util import redact
from pytest_benchmark_agent.util.fsutil import acquire_lock, atomic_write, outside, utc_now
from pytest_benchmark_agent.util.placeholders import as_text

MANIFEST = "manifest.json"
SCRATCH = "_out"


@dataclass
class CacheEntry:
    """A verified cache entry: where its artifacts are and what the stage said it used."""

    signature: str
    folder: Path
    artifacts: dict[str, Path]
    effective: dict[str, str] = field(default_factory=dict)
    hit: bool = False
    note: str = ""


class PrepCache:
    """Lookup, verification and publication of prep results under one cache root."""

    def __init__(self, root: Path):
        self.root = root
        redact.use_home_key(root.parent)  # signatures key their secrets with the home's key

    def folder(self, signature: str) -> Path:
        return self.root / signature

    def artifact_paths(self, node: PrepNode) -> dict[str, Path]:
        folder = self.folder(node.signature)
        return {name: folder / name for name in node.stage.produces}

    def lock(self, signature: str, *, wait: bool = True) -> int | None:
        """Take the lock held while a signature is checked and, if needed, built; returns its
        descriptor for :func:`fsutil.release_lock` (None when busy and not ``wait``)."""
        return acquire_lock(self.root / f".{signature}.lock", wait=wait)

    def verify(self, node: PrepNode) -> tuple[CacheEntry | None, str]:
        """The entry when its manifest matches its content, else ``(None, why not)``; a
        verified entry's manifest gets the time of this use as its modification time."""
        folder = self.folder(node.signature)
        manifest_path = folder / MANIFEST
        if not manifest_path.is_file():
            return None, "no cache entry"
        try:
            manifest = read_json(manifest_path, MAX_STATE_BYTES)
        except (OSError, BadJson):
            return None, "manifest is not valid JSON"
        if not isinstance(manifest, dict):
            return None, "manifest is not a JSON object"
        if manifest.get("signature") != node.signature:
            return None, "manifest belongs to another signature"
        paths = self.artifact_paths(node)
        for name, path in paths.items():
            recorded = manifest.get("artifacts", {}).get(name)
            if recorded is None:
                return None, f"artifact '{name}' missing from the manifest"
            if not path.exists():
                return None, f"artifact '{name}' is missing"
            if outside(path, folder) is not None:
                return None, f"artifact '{name}' resolves outside its folder"
            if content_hash(path) != recorded["sha256"]:
                return None, f"artifact '{name}' does not match its recorded hash (corrupted)"
        with contextlib.suppress(OSError):  # the last use, which `clean` removes by (LRU)
            os.utime(manifest_path)
        return CacheEntry(node.signature, folder, paths, _effective(node, manifest), hit=True), ""

    def prepare(self, node: PrepNode) -> tuple[Path, Path]:
        """Empty the entry's folder for a (re)build; returns (folder, scratch folder)."""
        folder = self.folder(node.signature)
        if folder.exists():
            shutil.rmtree(folder)
        scratch = folder / SCRATCH
        scratch.mkdir(parents=True)
        return folder, scratch

    def publish(
        self,
        node: PrepNode,
        *,
        run_id: str,
        command: str,
        duration_s: float,
        effective: dict[str, str],
    ) -> CacheEntry:
        """Hash the built artifacts and write the manifest last (its presence means complete)."""
        paths = self.artifact_paths(node)
        missing = [name for name, path in paths.items() if not path.exists()]
        if missing:
            raise FileNotFoundError(", ".join(f"'{name}' ({paths[name]})" for name in missing))
        for name, path in paths.items():
            where = outside(path, self.folder(node.signature))
            if where is not None:
                raise StageFailed(
                    node.stage.name,
                    f"left its artifact '{name}' resolving to {where}, outside its cache "
                    "folder: refused, never read or hashed; a prep writes its artifacts "
                    f"inside {self.folder(node.signature)}",
                )
        artifacts: dict[str, Any] = {}
        for name, path in paths.items():
            kind = "dir" if path.is_dir() else "file"
            artifacts[name] = {"kind": kind, "sha256": content_hash(path), "bytes": _size(path)}
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "signature": node.signature,
            "stage": node.stage.name,
            "params": {k: str(v) for k, v in node.params_used.items()},
            "command": command,
            "built_by_run": run_id,
            "created": utc_now(),
            "duration_s": round(duration_s, 6),
            "artifacts": artifacts,
            "effective": effective,
        }
        manifest = redact.scrub(manifest)  # the command and params hold the stage's secrets
        atomic_write(self.folder(node.signature) / MANIFEST, json.dumps(manifest, indent=2))
        return CacheEntry(node.signature, self.folder(node.signature), paths, effective)


def _effective(node: PrepNode, manifest: dict[str, Any]) -> dict[str, str]:
    """The params the stage said it used, a redacted one given back its value: the signature
    keyed that value, so the entry was built with the one this node binds."""
    return {
        name: as_text(node.params_used[name])
        if value == redact.REDACTED and name in node.params_used
        else value
        for name, value in (manifest.get("effective") or {}).items()
    }


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
