"""The ``tune`` verb: ``benchmark-agent tune FILE --strategy S [--resume RUN]``.

Each round of the tune is its own ``pytest --bench`` session (see ``tune/rounds.py``); ``--set
PARAM=VALUE`` overrides a param for the whole tune and reaches every round as ``--bench-set``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from pytest_benchmark_agent.cli.common import find_run, home_of
from pytest_benchmark_agent.records.reader import UnreadableRecord, load_yaml, skip_unreadable
from pytest_benchmark_agent.records.store import runs_in


def find_tune(home: Path, ref: str) -> str:
    """A tune's run id: ``latest`` is the newest tune record (its rounds are runs too)."""
    if ref != "latest":
        return find_run(home, ref).name
    tunes = [p for p in runs_in(home) if _kind(p) == "tune"]
    if not tunes:
        raise SystemExit(f"benchmark-agent: no tune record in {home / 'runs'} to resume")
    return tunes[-1].name


def _kind(run_dir: Path) -> object:
    """A record's ``kind``; an unreadable record is skipped, with a warning naming it."""
    try:
        record = load_yaml(run_dir / "results.yaml")
    except UnreadableRecord as error:
        skip_unreadable(error)
        return None
    return record.get("kind") if isinstance(record, dict) else None


def cmd_tune(args: argparse.Namespace) -> int:
    """Tune a benchmark file's search space; every round is a pytest session."""
    from pytest_benchmark_agent.tune.entry import run_tune

    home = home_of(args)
    resume = find_tune(home, args.resume) if args.resume else None
    if args.strategy is None and resume is None:
        raise SystemExit(
            "benchmark-agent tune: give --strategy grid|refine|coordinate "
            "(or --resume RUN to continue a tune with its own strategy)"
        )
    overrides = {}
    for item in args.sets:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise SystemExit(
                f"benchmark-agent tune: --set {item!r}: expected PARAM=VALUE, "
                "e.g. --set corpus.n_docs=2000"
            )
        overrides[name.strip()] = yaml.safe_load(value)
    extra = [f"--bench-set={item}" for item in args.sets]
    if args.accept_risk:
        extra.append("--bench-accept-risk")
    return run_tune(
        Path(args.file), args.strategy, home, resume=resume, overrides=overrides, extra_args=extra
    )


#: The strategies of ``tune.strategies.STRATEGIES``, named here so that building the parser
#: imports nothing heavy.
STRATEGY_NAMES = ("coordinate", "grid", "refine")


def register(verbs: argparse._SubParsersAction) -> None:
    tune = verbs.add_parser("tune", help=cmd_tune.__doc__, description=cmd_tune.__doc__)
    tune.add_argument("file", help="the tuning file (with search_space:, objective:)")
    tune.add_argument(
        "--strategy",
        choices=STRATEGY_NAMES,
        help="grid: every point; refine: coarse grid, then finer around the "
        "incumbent; coordinate: one param at a time",
    )
    tune.add_argument(
        "--resume",
        metavar="RUN",
        help="continue a halted or interrupted tune (its run id, a unique "
        "prefix, or latest) without re-running its finished rounds",
    )
    tune.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="PARAM=VALUE",
        dest="sets",
        help="override a declared param for the whole tune "
        "(repeatable; passed to every round as --bench-set)",
    )
    tune.add_argument(
        "--accept-risk", action="store_true", help="pass --bench-accept-risk to every round"
    )
    tune.set_defaults(func=cmd_tune)
