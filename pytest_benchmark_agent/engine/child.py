"""The command line of a child ``pytest --bench`` session, built one way.

A verb (``benchmark-agent run``, ``plan``), a tuning round and the ``bench`` fixture each start
a session in a subprocess, with the interpreter running them, so it sees the same installed
plugin; a bisect step builds its own around a worktree (``engine/bisect.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path


def bench_command(
    files: Sequence[str | Path],
    home: str | Path,
    *,
    run_id: str | None = None,
    options: Sequence[str] = (),
) -> list[str]:
    """``python -m pytest --bench FILES --bench-home HOME [--bench-run-id ID] OPTIONS``."""
    return [
        sys.executable,
        "-m",
        "pytest",
        "--bench",
        *(str(file) for file in files),
        "--bench-home",
        str(home),
        *(("--bench-run-id", run_id) if run_id else ()),
        *options,
    ]
