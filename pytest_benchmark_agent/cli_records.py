"""Verbs that read the records in ``$BENCHMARK_HOME``: ``history`` and ``analyze``."""

from __future__ import annotations

import argparse

from .cli_common import find_run, home_of, runs_in
from .record import load_results


def cmd_history(args: argparse.Namespace) -> int:
    """One line per recorded run, newest last."""
    for run_dir in runs_in(home_of(args)):
        record = load_results(run_dir)
        if args.name and record.get("name") != args.name:
            continue
        counts = record.get("counts") or {}
        print(f"{run_dir.name}  {record.get('state', '?'):<11} {record.get('tag', '?'):<11} "
              f"{record.get('name')}  trials: "
              + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    """Print a run's report (its figures, tag, verdicts and What Went Wrong)."""
    run_dir = find_run(home_of(args), args.run)
    report = run_dir / "report.md"
    print(report.read_text() if report.is_file()
          else f"{run_dir.name} has no report yet (state: {load_results(run_dir).get('state')})")
    return 0


def register(verbs: argparse._SubParsersAction) -> None:
    history = verbs.add_parser("history", help=cmd_history.__doc__,
                               description=cmd_history.__doc__)
    history.add_argument("--name", help="only runs of this benchmark name")
    history.set_defaults(func=cmd_history)
    analyze = verbs.add_parser("analyze", help=cmd_analyze.__doc__,
                               description=cmd_analyze.__doc__)
    analyze.add_argument("run", help="run id, unique prefix, or 'latest'")
    analyze.set_defaults(func=cmd_analyze)
