"""``benchmark-agent``: the skill's verbs, each a thin layer over the engine.

Verbs that run benchmarks invoke pytest, so every gate, cache and guard applies exactly as
under ``pytest --bench``; verbs that read records work on ``$BENCHMARK_HOME``. Each group of
verbs lives in its own module and registers its subcommands here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pytest_benchmark_agent.cli import bisect as cli_bisect
from pytest_benchmark_agent.cli import ci as cli_ci
from pytest_benchmark_agent.cli import domain as cli_domain
from pytest_benchmark_agent.cli import records as cli_records
from pytest_benchmark_agent.cli import schema as cli_schema
from pytest_benchmark_agent.cli import session as cli_session
from pytest_benchmark_agent.cli import tune as cli_tune
from pytest_benchmark_agent.cli.common import home_of
from pytest_benchmark_agent.records import lessons, recover

VERB_MODULES = (
    cli_session,
    cli_records,
    cli_tune,
    lessons,
    cli_domain,
    cli_bisect,
    cli_ci,
    cli_schema,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchmark-agent", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--home", help="data directory (default $BENCHMARK_HOME or ./benchmark_data)"
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for module in VERB_MODULES:
        module.register(verbs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "pytest_args", None) and args.pytest_args[0] == "--":
        args.pytest_args = args.pytest_args[1:]
    # A run left "running" by a killed session is finalized before any verb reads the records.
    recover.recover_orphans(home_of(args), by=f"benchmark-agent {args.verb}")
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
