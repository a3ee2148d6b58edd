"""Verbs that drive pytest sessions: ``plan``, ``run`` and ``status``."""

from __future__ import annotations

import argparse
import subprocess
import sys

from .cli_common import find_run, home_of, runs_in
from .record import load_results


def _pytest(args: argparse.Namespace, extra: list[str]) -> int:
    command = [sys.executable, "-m", "pytest", "--bench", *args.files,
               "--bench-home", str(home_of(args)), *extra, *args.pytest_args]
    return subprocess.call(command)


def cmd_run(args: argparse.Namespace) -> int:
    """Run benchmark files as a pytest session."""
    return _pytest(args, [])


def cmd_plan(args: argparse.Namespace) -> int:
    """Gate 1 and preflight, listing the trials; nothing is executed."""
    return _pytest(args, ["--collect-only", "-q"])


def cmd_status(args: argparse.Namespace) -> int:
    """State of the latest (or a named) run, with trials done of planned."""
    home = home_of(args)
    if not runs_in(home):
        print(f"no runs in {home / 'runs'}")
        return 0
    run_dir = find_run(home, args.run)
    record = load_results(run_dir)
    trials = record.get("trials") or []
    done = sum(1 for t in trials if t["status"] != "not_run")
    print(f"{run_dir.name}: {record.get('state')} ({done} trials recorded), "
          f"tag {record.get('tag')}, report {run_dir / 'report.md'}")
    return 0


def register(verbs: argparse._SubParsersAction) -> None:
    for name, func in (("run", cmd_run), ("plan", cmd_plan)):
        verb = verbs.add_parser(name, help=func.__doc__, description=func.__doc__)
        verb.add_argument("files", nargs="+", help="benchmark YAML files")
        verb.add_argument("pytest_args", nargs=argparse.REMAINDER,
                          help="further pytest options, after --")
        verb.set_defaults(func=func)
    status = verbs.add_parser("status", help=cmd_status.__doc__, description=cmd_status.__doc__)
    status.add_argument("run", nargs="?", default="latest", help="run id, unique prefix, or latest")
    status.set_defaults(func=cmd_status)
