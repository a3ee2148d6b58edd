"""One real run, recorded by a real session and exported, that the hostile tests of issue 45
(import, the one printer, publish) edit into what the red team imported; and the verb as a
user runs it. (A module of its own, not conftest.py: see hostilehelpers.py.)"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from hostilehelpers import assert_clean_exit, private_env

ESC, BIDI = "\x1b", "\u202e"
#: An OSC 8 hyperlink (its text says one thing, its target is another), a clear screen, a bidi
#: override: what no output of a verb may show raw.
OSC8 = f"{ESC}]8;;https://evil.example/{ESC}\\click{ESC}]8;;{ESC}\\"
RAW = (ESC, BIDI, "\a")


def bench_document(treatments: list[str] | None = None) -> dict[str, Any]:
    """A benchmark of two treatments, one measure stage printing ``score=12``."""
    labels = treatments or ["a", "b"]
    return {
        "name": "typed",
        "hypothesis": "the treatments score alike",
        "params": {"mode": labels[0]},
        "treatment_variable": "mode",
        "treatments": labels,
        "replicates": 2,
        "stages": [
            {
                "name": "measure",
                "kind": "measure",
                "cmd": "echo score=12 # {mode}",
                "metrics_from": {"stdout": True, "fields": ["score"]},
            }
        ],
        "metrics": {"score": {"direction": "lower", "primary": True}},
    }


class Recorded:
    """A folder with a benchmark file, its data home and a private $HOME/$TMPDIR."""

    def __init__(self, root: Path, document: dict[str, Any] | None = None) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root, self.home = root, root / "home"
        self.env = private_env(root, MPLCONFIGDIR=str(root / "mpl"))
        (root / "bench.yaml").write_text(
            yaml.safe_dump(document or bench_document(), allow_unicode=True)
        )

    def session(self) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "--bench", "bench.yaml", "-p", "no:cacheprovider"]
            + ["-p", "no:randomly", "--bench-home", str(self.home)],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def agent(self, *args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["benchmark-agent", "--home", str(home or self.home), *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def checked(self, *args: str, allowed: Any = (0,), home: Path | None = None) -> str:
        """The verb's stdout and stderr, its exit code one of ``allowed`` and no traceback."""
        return assert_clean_exit(self.agent(*args, home=home), allowed)

    def runs(self, home: Path | None = None) -> list[Path]:
        folder = (home or self.home) / "runs"
        return sorted(folder.iterdir()) if folder.is_dir() else []

    def export(self, run: str = "latest") -> dict[str, Any]:
        return json.loads(self.checked("export", run))


def renamed(document: dict[str, Any], run_id: str) -> dict[str, Any]:
    """A deep copy of an export under another run id."""
    out = copy.deepcopy(document)
    out["run_id"] = out["record"]["run_id"] = out["config"]["run_id"] = run_id
    return out
