"""``benchmark-agent lesson add`` and ``risk add``: append a note to ``lessons.md`` or ``risks.md``
in the data home (records/lessons.py holds the notes and their files)."""

from __future__ import annotations

import argparse

from pytest_benchmark_agent.cli.common import home_of
from pytest_benchmark_agent.records.lessons import LESSONS, RISKS, Note, add_note
from pytest_benchmark_agent.util.fsutil import utc_now


def _parse_param_tags(values: list[str]) -> dict[str, str | None]:
    tags: dict[str, str | None] = {}
    for value in values:
        name, sep, recommended = value.partition("=")
        if not name.strip():
            raise SystemExit(
                f"benchmark-agent: --param {value!r}: expected P or P=VALUE, "
                "e.g. --param corpus.n_docs=5000"
            )
        tags[name.strip()] = recommended.strip() if sep else None
    return tags


def cmd_add(args: argparse.Namespace) -> int:
    """Append a note; ``plan`` shows it wherever it applies."""
    path = home_of(args) / args.file
    note = Note(
        text=args.text,
        when=utc_now(),
        benchmark=args.benchmark,
        params=_parse_param_tags(args.param),
    )
    add_note(path, note)
    print(f"added to {path}: {note.summary()}")
    return 0


def register(verbs: argparse._SubParsersAction) -> None:
    for verb, file, what in (
        ("lesson", LESSONS, "a lesson learnt"),
        ("risk", RISKS, "a known fragility or scaling limit"),
    ):
        group = verbs.add_parser(
            verb,
            help=f"record {what} ({file}, append-only)",
            description=f"Record {what} in $BENCHMARK_HOME/{file}.",
        )
        actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")
        add = actions.add_parser("add", help=cmd_add.__doc__, description=cmd_add.__doc__)
        add.add_argument("text", help="what was learnt, and why it matters")
        add.add_argument("--benchmark", metavar="NAME", help="the benchmark it concerns")
        add.add_argument(
            "--param",
            action="append",
            default=[],
            metavar="P[=VALUE]",
            help="a param it concerns; P=VALUE is the value it recommends, and "
            "plan challenges a request that sets P otherwise (repeatable)",
        )
        add.set_defaults(func=cmd_add, file=file)
