"""What every ``benchmark-agent`` verb shares: the data directory and finding runs in it."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pytest_benchmark_agent.records.store import runs_in


#: The data directory's folder of accepted plan-time deviations (one YAML per benchmark name).
def home_of(args: argparse.Namespace) -> Path:
    """``--home``, else ``$BENCHMARK_HOME``, else ``./benchmark_data`` (as the plugin does)."""
    if getattr(args, "home", None):
        return Path(args.home).resolve()
    return Path(os.environ.get("BENCHMARK_HOME", "benchmark_data")).resolve()


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
