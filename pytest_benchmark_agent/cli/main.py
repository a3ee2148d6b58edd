"""``benchmark-agent``: the skill's verbs, each a thin layer over the engine.

Verbs that run benchmarks invoke pytest, so every gate, cache and guard applies exactly as
under ``pytest --bench``; verbs that read records work on ``$BENCHMARK_HOME``. Each group of
verbs lives in its own module and registers its subcommands here. An error a user can fix (a
bad file, an unreadable record, a data home that is missing or a file) is one line naming the
file and exit code 2, never a traceback; a list verb skips an unreadable record and says so.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from collections.abc import Sequence
from importlib.metadata import version

from pytest_benchmark_agent.cli import bisect as cli_bisect
from pytest_benchmark_agent.cli import ci as cli_ci
from pytest_benchmark_agent.cli import clean as cli_clean
from pytest_benchmark_agent.cli import doctor as cli_doctor
from pytest_benchmark_agent.cli import domain as cli_domain
from pytest_benchmark_agent.cli import notes as cli_notes
from pytest_benchmark_agent.cli import publish as cli_publish
from pytest_benchmark_agent.cli import records as cli_records
from pytest_benchmark_agent.cli import schema as cli_schema
from pytest_benchmark_agent.cli import session as cli_session
from pytest_benchmark_agent.cli import tune as cli_tune
from pytest_benchmark_agent.cli.common import announce_home, home_of
from pytest_benchmark_agent.engine import recovery
from pytest_benchmark_agent.errors import BenchError
from pytest_benchmark_agent.records.reader import UnreadableRecordWarning
from pytest_benchmark_agent.util.safetext import printable, printed_through_printer

#: Verbs that only read the records: for them a data home that does not exist is an error.
READING_VERBS = frozenset(
    {"history", "analyze", "compare", "reclassify", "status", "export", "clean", "publish"}
)

VERB_MODULES = (
    cli_session,
    cli_records,
    cli_tune,
    cli_notes,
    cli_domain,
    cli_bisect,
    cli_ci,
    cli_schema,
    cli_clean,
    cli_doctor,
    cli_publish,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchmark-agent", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--home",
        help="data directory (default $BENCHMARK_HOME, else benchmark_data/ at the project root)",
    )
    parser.add_argument(
        "-V", "--version", action="version", version=f"%(prog)s {version('pytest-benchmark-agent')}"
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for module in VERB_MODULES:
        module.register(verbs)
    for listed in verbs._choices_actions:  # the list of verbs: each one's first whole sentence
        description = verbs.choices[listed.dest].description
        listed.help = first_sentence(description or listed.help or "")
    plain_help(parser)
    return parser


#: reST markup of the docstrings the help texts come from: a role (:func:`x`), ``literal`` and
#: `interpreted` text, each starting and ending with a non-space (a lone backquote stays). A
#: terminal shows it as stray backquotes.
_TEXT = r"([^`\s](?:[^`]*[^`\s])?)"
_MARKUP = re.compile(rf":[a-z]+:`[~.]*{_TEXT}`|``{_TEXT}``|`{_TEXT}`")


def plain_help(parser: argparse.ArgumentParser) -> None:
    """Strip reST markup from every description and help text of ``parser`` and its verbs."""
    parser.description = _plain(parser.description)
    parser.epilog = _plain(parser.epilog)
    for action in parser._actions:
        action.help = _plain(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for listed in action._choices_actions:
                listed.help = _plain(listed.help)
            for verb in {id(p): p for p in action.choices.values()}.values():  # aliases: once
                plain_help(verb)


def _plain(text: str | None) -> str | None:
    return None if text is None else _MARKUP.sub(lambda m: next(g for g in m.groups() if g), text)


def first_sentence(text: str) -> str:
    """``text``'s first sentence, whole, on one line (a docstring's first line may stop
    mid-sentence; the rest stays in the verb's own ``--help``)."""
    flat = " ".join(text.split())
    end = re.search(r"\.(\s|$)", flat)
    return flat[: end.start() + 1] if end else flat


def main(argv: Sequence[str] | None = None) -> int:
    """Run one verb; everything it prints to stdout or stderr goes through the one printer
    (:func:`.safetext.printable`), a message it exits with too."""
    with printed_through_printer():
        try:
            return _run(argv)
        except SystemExit as stop:
            if isinstance(stop.code, str):  # printed by the interpreter, after the printer
                raise SystemExit(printable(stop.code)) from None
            raise


def _run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if prepare := getattr(args, "prepare", None):  # a verb that reads its own options (bisect)
        prepare(args)
    if getattr(args, "pytest_args", None) and args.pytest_args[0] == "--":
        args.pytest_args = args.pytest_args[1:]
    with warnings.catch_warnings():
        warnings.simplefilter("default", UnreadableRecordWarning)
        warnings.showwarning = _print_warning
        try:
            announce_home(args)
            _check_home(args)
            # A run left "running" by a killed session is finalized before any verb reads
            # the records.
            recovery.recover_orphans(home_of(args), by=f"benchmark-agent {args.verb}")
            return args.func(args)
        except (BenchError, OSError) as error:  # each names its file
            print(f"benchmark-agent {args.verb}: {error}", file=sys.stderr)
            return 2


def _check_home(args: argparse.Namespace) -> None:
    """Refuse a data home that is a file, or one that does not exist for a verb that reads it."""
    home = home_of(args)
    if home.exists() and not home.is_dir():
        raise BenchError(f"the data home {home} is a file, not a folder; fix: give its folder")
    measures = getattr(args, "against", None) is not None  # compare --against REV: a session
    if args.verb in READING_VERBS and not measures and not home.exists():
        raise BenchError(
            f"the data home {home} does not exist; fix: give the folder holding runs/ with "
            "--home or BENCHMARK_HOME"
        )


def _print_warning(
    message: Warning | str, category: type[Warning], *_: object, **__: object
) -> None:
    """A warning as one line on stderr (a skipped record names its file)."""
    print(f"benchmark-agent: warning: {message}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
