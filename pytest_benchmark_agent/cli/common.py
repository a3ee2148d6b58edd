"""What every ``benchmark-agent`` verb shares: the data directory and finding runs in it (a
verb prints a statistic with :mod:`.stats.units`, as every report does)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_benchmark_agent.home import data_home
from pytest_benchmark_agent.records.store import runs_in


def home_of(args: argparse.Namespace) -> Path:
    """``--home``, else ``$BENCHMARK_HOME``, else ``benchmark_data/`` at the project root above
    the current folder (:func:`pytest_benchmark_agent.home.data_home`, as the plugin does)."""
    home, _ = data_home(getattr(args, "home", None), Path.cwd())
    return home


def announce_home(args: argparse.Namespace) -> None:
    """Name the data home on stderr when it was defaulted (set by no option or variable)."""
    home, how = data_home(getattr(args, "home", None), Path.cwd())
    if how.startswith("default"):
        print(f"benchmark-agent: data home {home} ({how})", file=sys.stderr)


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
