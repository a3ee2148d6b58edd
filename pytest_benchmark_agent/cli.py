"""``benchmark-agent``: the skill's verbs, each a thin layer over the engine.

``run`` and ``plan`` invoke pytest (so every gate, cache and guard applies exactly as under
``pytest --bench``); ``history``, ``status`` and ``analyze`` read ``$BENCHMARK_HOME``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from .record import load_results


def _home(args: argparse.Namespace) -> Path:
    if args.home:
        return Path(args.home).resolve()
    return Path(os.environ.get("BENCHMARK_HOME", "benchmark_data")).resolve()


def _pytest(args: argparse.Namespace, extra: list[str]) -> int:
    command = [sys.executable, "-m", "pytest", "--bench", *args.files,
               "--bench-home", str(_home(args)), *extra, *args.pytest_args]
    return subprocess.call(command)


def cmd_run(args: argparse.Namespace) -> int:
    """Run benchmark files as a pytest session."""
    return _pytest(args, [])


def cmd_plan(args: argparse.Namespace) -> int:
    """Gate 1 and preflight, listing the trials; nothing is executed."""
    return _pytest(args, ["--collect-only", "-q"])


def _runs(home: Path) -> list[Path]:
    runs = home / "runs"
    return sorted(p for p in runs.iterdir() if (p / "results.yaml").is_file()) \
        if runs.is_dir() else []


def _find_run(home: Path, ref: str) -> Path:
    """A run by id, unique id prefix, or ``latest``."""
    runs = _runs(home)
    if ref == "latest" and runs:
        return runs[-1]
    matches = [p for p in runs if p.name == ref] or [p for p in runs if p.name.startswith(ref)]
    if len(matches) != 1:
        known = ", ".join(p.name for p in runs[-5:]) or "none"
        raise SystemExit(f"benchmark-agent: no unique run '{ref}' in {home / 'runs'} "
                         f"(latest runs: {known})")
    return matches[0]


def cmd_history(args: argparse.Namespace) -> int:
    """One line per recorded run, newest last."""
    home = _home(args)
    for run_dir in _runs(home):
        record = load_results(run_dir)
        if args.name and record.get("name") != args.name:
            continue
        counts = record.get("counts") or {}
        print(f"{run_dir.name}  {record.get('state', '?'):<11} {record.get('tag', '?'):<11} "
              f"{record.get('name')}  trials: "
              + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """State of the latest (or a named) run, with trials done of planned."""
    home = _home(args)
    if not _runs(home):
        print(f"no runs in {home / 'runs'}")
        return 0
    run_dir = _find_run(home, args.run)
    record = load_results(run_dir)
    trials = record.get("trials") or []
    done = sum(1 for t in trials if t["status"] != "not_run")
    print(f"{run_dir.name}: {record.get('state')} ({done} trials recorded), "
          f"tag {record.get('tag')}, report {run_dir / 'report.md'}")
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    """Print a run's report (its figures, tag, verdicts and What Went Wrong)."""
    run_dir = _find_run(_home(args), args.run)
    print((run_dir / "report.md").read_text() if (run_dir / "report.md").is_file()
          else f"{run_dir.name} has no report yet (state: {load_results(run_dir).get('state')})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchmark-agent", description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="data directory (default $BENCHMARK_HOME or "
                                       "./benchmark_data)")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for name, func in (("run", cmd_run), ("plan", cmd_plan)):
        verb = verbs.add_parser(name, help=func.__doc__, description=func.__doc__)
        verb.add_argument("files", nargs="+", help="benchmark YAML files")
        verb.add_argument("pytest_args", nargs=argparse.REMAINDER,
                          help="further pytest options, after --")
        verb.set_defaults(func=func)
    history = verbs.add_parser("history", help=cmd_history.__doc__)
    history.add_argument("--name", help="only runs of this benchmark name")
    history.set_defaults(func=cmd_history)
    for name, func in (("status", cmd_status), ("analyze", cmd_analyze)):
        verb = verbs.add_parser(name, help=func.__doc__, description=func.__doc__)
        verb.add_argument("run", nargs="?" if name == "status" else None, default="latest",
                          help="run id, unique prefix, or 'latest'")
        verb.set_defaults(func=func)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "pytest_args", None) and args.pytest_args[0] == "--":
        args.pytest_args = args.pytest_args[1:]
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
