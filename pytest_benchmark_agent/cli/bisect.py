"""``benchmark-agent bisect GOOD BAD FILE``: the first commit where the benchmark's primary
metric regressed against GOOD's run (the engine is :mod:`.bisect`)."""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

from pytest_benchmark_agent.cli.common import home_of
from pytest_benchmark_agent.engine import bisect

_EPILOG = """\
Each commit is checked out in its own git worktree under HOME/bisect/ and measured with
`pytest --bench FILE --bench-against GOOD --bench-fail-on=regression`: GOOD and the commit
interleaved in one session, so a machine that differs between steps cancels. A step is bad
when a primary metric regressed beyond its fail_threshold, good only when its interval excludes
that, else skipped (FILE missing, pytest failing, an interval that could not decide: give the
file more blocks, e.g. replicates: {min: 8, max: 32}, which adds blocks until it decides); the
skipped commits that hide the first bad one are reported as the range it could not split.
Each step's line shows its ratio, interval and MDE. Your work tree, index and HEAD are never
touched. A package installed in editable mode from your work tree is refused (each commit's
stages would import it): build it per commit in a prep stage (README, "Comparing two
revisions"). Rerun the same command to resume an interrupted bisection, or to report a finished
one again without measuring.

exit codes: 0 found, 1 BAD did not regress against GOOD, 2 bad input (unknown revision, GOOD
not an ancestor of BAD, FILE missing), 3 undecided (skipped commits
hide the first bad one, BAD could not be judged, or the bisection stopped), 130 interrupted
(rerun to resume)."""


def cmd_bisect(args: argparse.Namespace) -> int:
    """Find the first commit between GOOD and BAD where FILE's primary metric regressed
    against GOOD (git bisect run; each commit measured interleaved with GOOD in one session,
    in its own worktree; resumable)."""
    own, pytest_args = _command_line(args.rest)
    home = home_of(own) if own.home else home_of(args)
    say = _stderr
    bisect.interrupt_on_sigterm()
    try:
        state = bisect.prepare(Path.cwd(), own.good, own.bad, own.file, home, pytest_args)
        say(
            f"bisect {state.name} ({state.file}): GOOD {state.good[:7]}, BAD {state.bad[:7]}; "
            f"state {state.state_path}"
        )
        result = bisect.bisect(state, say)
    except bisect.BisectError as exc:
        print(f"benchmark-agent bisect: {exc}", file=sys.stderr)
        return bisect.EXIT_BAD_INPUT
    except bisect.GitFailed as exc:
        print(f"benchmark-agent bisect: {exc}", file=sys.stderr)
        return bisect.EXIT_UNDECIDED
    except KeyboardInterrupt:
        print(
            "benchmark-agent bisect: interrupted; rerun the same command to resume (the "
            "outcomes decided so far are kept)",
            file=sys.stderr,
        )
        return 130
    print("\n".join(report(result)))
    return result.exit_code


def _command_line(rest: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """``GOOD BAD FILE [--home DIR] [-- PYTEST_ARGS]``, the verb's options anywhere before --."""
    cut = rest.index("--") if "--" in rest else len(rest)
    return _own_parser().parse_args(rest[:cut]), rest[cut + 1 :]


def _own_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchmark-agent bisect", add_help=False)
    for name in ("good", "bad", "file"):
        parser.add_argument(name, metavar=name.upper())
    parser.add_argument("--home")
    return parser


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def report(result: bisect.Result) -> list[str]:
    """The outcome, the first bad commit and its evidence against GOOD, every commit tested
    with its ratio, interval and MDE."""
    state = result.state
    lines = []
    if result.status == "found" and result.commit:
        lines.append(f"first bad commit: {result.commit} {bisect.subject(state, result.commit)}")
        lines += [f"  {line}" for line in bisect.verdict_lines(state, result.commit)]
        lines.append(
            f"  run: {state.commits[result.commit].get('run_id')} (GOOD {state.good[:7]} and "
            f"{result.commit[:7]} interleaved)"
        )
    elif result.candidates:
        lines.append("undecided: the first bad commit is one of (the others were skipped):")
        lines += [f"  {sha[:7]} {bisect.subject(state, sha)}" for sha in result.candidates]
    else:
        lines.append(
            f"{'no regression' if result.status == 'not_found' else 'undecided'}: {result.why}"
        )
    lines.append(f"commits tested (each against GOOD {state.good[:7]}, in one session):")
    for sha in bisect.tested_in_order(state):
        record = state.commits[sha]
        lines.append(
            f"  {sha[:7]} {record['outcome']:<7} run {record.get('run_id') or '-'}  "
            f"{bisect.subject(state, sha)}"
            + (f"  ({record['reason']})" if record.get("reason") else "")
        )
    lines.append(f"state: {state.state_path} (rerun to report again without measuring)")
    return lines


def register(verbs: argparse._SubParsersAction) -> None:
    summary = inspect.cleandoc(cmd_bisect.__doc__ or "")
    verb = verbs.add_parser(
        "bisect",
        help=summary.splitlines()[0],
        description=summary,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verb.add_argument(
        "--home",
        default=argparse.SUPPRESS,
        help="data directory (default $BENCHMARK_HOME or ./benchmark_data)",
    )
    verb.add_argument(
        "rest",
        nargs=argparse.REMAINDER,
        metavar="GOOD BAD FILE [--home DIR] [-- PYTEST_ARGS]",
        help="a good commit, a later one that regressed (sha, branch, tag), the "
        "benchmark file as a path from the repository root, then further "
        "pytest options for every run",
    )
    verb.set_defaults(func=cmd_bisect)
