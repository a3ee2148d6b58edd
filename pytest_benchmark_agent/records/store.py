"""Where a data home keeps its runs, and their order: what every reader of records lists.

The CLI's verbs, planning's review of earlier runs and the heartbeat's deviation check all look
runs up the same way, so this sits with the records (never in the CLI, which engine modules must
not import).
"""

from __future__ import annotations

from pathlib import Path

#: The folder of the home holding accepted plan-time deviations (``benchmark-agent plan``).
DEVIATIONS = "deviations"


def run_order(run_dir: Path) -> tuple[str, int]:
    """Sort key of run folders, oldest first: the id's UTC stamp (seconds), then, for runs of
    the same second (whose random suffixes do not sort by time), when their config was written."""
    config = run_dir / "config.yaml"
    return run_dir.name[:19], config.stat().st_mtime_ns if config.is_file() else 0


def runs_in(home: Path) -> list[Path]:
    """Run folders that hold a record, oldest first."""
    runs = home / "runs"
    if not runs.is_dir():
        return []
    return sorted((p for p in runs.iterdir() if (p / "results.yaml").is_file()), key=run_order)
