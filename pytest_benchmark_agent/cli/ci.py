"""Verbs that move a run between data directories (CI jobs), ``export`` and ``import``; and
``export --format csv|json|markdown``, a run's samples for other tools."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_benchmark_agent.cli.common import find_run, home_of
from pytest_benchmark_agent.records.fingerprint import code_label
from pytest_benchmark_agent.records.portable import (
    PortableError,
    export_run,
    import_run,
    read_document,
    to_json,
)
from pytest_benchmark_agent.records.record import load_run
from pytest_benchmark_agent.report.exports import FORMATS, export_text
from pytest_benchmark_agent.util.fsutil import atomic_write


def cmd_export(args: argparse.Namespace) -> int:
    """Write one run as one file: by default the portable record (record, frozen config and
    fingerprints, every trial's samples) for ``benchmark-agent import`` in another data
    directory; with --format csv (one row per trial and metric), json (one self-describing
    file) or markdown (a table per metric), its samples for other tools."""
    run_dir = find_run(home_of(args), args.run)
    if args.format == "portable":
        text = to_json(export_run(run_dir))
    else:
        text = export_text(load_run(run_dir), args.format)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        atomic_write(Path(args.output), text)
        print(f"exported {run_dir.name} to {args.output}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Add a run exported by ``benchmark-agent export`` to the data directory, so
    ``--bench-baseline`` and ``compare`` find it; exit 2 when the file cannot be imported."""
    home = home_of(args)
    try:
        document = read_document(Path(args.file))
        run_dir, done = import_run(home, document, Path(args.file), force=args.force)
    except PortableError as exc:
        print(f"benchmark-agent import: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            f"benchmark-agent import: {args.file}: cannot write the run into {home} ({exc})",
            file=sys.stderr,
        )
        return 2
    code = document["config"]["fingerprint"].get("code_identity")
    print(
        f"{done} {run_dir.name} ({document['record']['name']}, {document['record']['tag']}, "
        f"code {code_label(code)}) into {run_dir.parent}"
    )
    return 0


def register(verbs: argparse._SubParsersAction) -> None:
    home = {
        "default": argparse.SUPPRESS,
        "help": "data directory (default $BENCHMARK_HOME or ./benchmark_data)",
    }
    export = verbs.add_parser("export", help=cmd_export.__doc__, description=cmd_export.__doc__)
    export.add_argument("run", help="run id, unique prefix, or 'latest'")
    export.add_argument(
        "-o",
        "--output",
        default="-",
        metavar="FILE",
        help="the file to write (default '-': standard output)",
    )
    export.add_argument(
        "--format",
        choices=("portable", *FORMATS),
        default="portable",
        help="portable (default): the record for 'benchmark-agent import'; csv: one row per "
        "trial and metric; json: the run, its summaries, verdicts and trials in one file; "
        "markdown: a table per metric",
    )
    export.add_argument("--home", **home)
    export.set_defaults(func=cmd_export)
    imp = verbs.add_parser("import", help=cmd_import.__doc__, description=cmd_import.__doc__)
    imp.add_argument("file", help="a file written by benchmark-agent export")
    imp.add_argument(
        "--force",
        action="store_true",
        help="replace a run of the same id that holds another record",
    )
    imp.add_argument("--home", **home)
    imp.set_defaults(func=cmd_import)
