"""What every ``benchmark-agent`` verb shares: the data directory and finding runs in it."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

#: The data directory's folder of accepted plan-time deviations (one YAML per benchmark name).
DEVIATIONS = "deviations"


def home_of(args: argparse.Namespace) -> Path:
    """``--home``, else ``$BENCHMARK_HOME``, else ``./benchmark_data`` (as the plugin does)."""
    if getattr(args, "home", None):
        return Path(args.home).resolve()
    return Path(os.environ.get("BENCHMARK_HOME", "benchmark_data")).resolve()


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


def find_run(home: Path, ref: str) -> Path:
    """A run by id, unique id prefix, or ``latest``; exits with a clear message otherwise."""
    runs = runs_in(home)
    if ref == "latest" and runs:
        return runs[-1]
    matches = [p for p in runs if p.name == ref] or [p for p in runs if p.name.startswith(ref)]
    if len(matches) != 1:
        known = ", ".join(p.name for p in runs[-5:]) or "none"
        raise SystemExit(
            f"benchmark-agent: no unique run '{ref}' in {home / 'runs'} (latest runs: {known})"
        )
    return matches[0]
