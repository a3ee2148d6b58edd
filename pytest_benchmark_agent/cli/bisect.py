"""``benchmark-agent bisect GOOD BAD FILE``: the first commit where the benchmark's primary
metric regressed against GOOD's run (the engine is :mod:`.bisect`)."""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

from pytest_benchmark_agent.cli.common import home_of
from pytest_benchmark_agent.engine import bisect, bisect_state

_EPILOG = """\
Each commit is checked out in its own git worktree under HOME/bisect/ and measured with
`pytest --bench FILE --bench-against GOOD`: GOOD and the commit interleaved in one session, so
a machine that differs between steps cancels. FILE is your working tree's for every commit (the
benchmark is fixed, the code varies; --file-from revision runs each commit's own). BAD is
measured first: it must regress beyond its fail_threshold (5% for a timing, 1% for a count).
Its ratio to GOOD sets the midpoint (halfway from GOOD to BAD, geometrically): a commit is bad
when its interval lies wholly beyond the midpoint, good when wholly before it, so each step
resolves half the regression; --threshold X judges every step by the gate's rule at X instead
(the first commit beyond X). Steps add blocks until they decide (8 to 40, unless the file
declares replicates); a commit that cannot be decided is skipped, and the skipped commits that
hide the first bad one are reported as the range it could not split. The result shows every
measured commit's ratio to GOOD with its interval. Your work tree, index and HEAD are never
touched. A package installed in editable mode from your work tree is refused (each commit's
stages would import it): build it per commit in a prep stage (README, "Comparing two
revisions"). Rerun the same command to resume an interrupted bisection, or to report a finished
one again without measuring.

exit codes: 0 found, 1 BAD did not regress against GOOD, 2 bad input (unknown revision, GOOD
not an ancestor of BAD, FILE missing, a step's session refused), 3 undecided (skipped commits
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
        asked = bisect_state.BisectRequest(
            own.good, own.bad, own.file, file_from=own.file_from, threshold=own.threshold
        )
        state = bisect_state.prepare(Path.cwd(), asked, home, pytest_args)
        say(
            f"bisect {state.name} ({state.file}): GOOD {state.good[:7]}, BAD {state.bad[:7]}; "
            f"state {state.state_path}"
        )
        result = bisect.bisect(state, say)
    except bisect_state.BisectError as exc:
        print(f"benchmark-agent bisect: {exc}", file=sys.stderr)
        return bisect.EXIT_BAD_INPUT
    except bisect_state.GitFailed as exc:
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
    if result.status == "refused":
        print(f"benchmark-agent bisect: a step was refused: {result.why}", file=sys.stderr)
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
    parser.add_argument("--file-from", choices=("worktree", "revision"), default="worktree")
    parser.add_argument("--threshold", type=fail_threshold, default=None)
    return parser


def fail_threshold(text: str) -> float:
    """``--threshold X``: a fraction or percentage, as --bench-fail-threshold takes it."""
    from pytest_benchmark_agent.engine.blocks import fail_threshold_option

    metric, value = fail_threshold_option(text)
    if metric:
        raise argparse.ArgumentTypeError(f"{text!r}: give one threshold for every metric, e.g. 5%")
    return value


def lift_home(args: argparse.Namespace) -> None:
    """``--home`` given after the verb (among GOOD BAD FILE) is the home every message names."""
    own, _ = _command_line(args.rest)
    if own.home:
        args.home = own.home


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
    elif result.status == "refused":
        lines.append(f"refused: {result.why}")
    elif result.candidates:
        lines.append("undecided: the first bad commit is one of (the others were skipped):")
        lines += [f"  {sha[:7]} {bisect.subject(state, sha)}" for sha in result.candidates]
    else:
        lines.append(
            f"{'no regression' if result.status == 'not_found' else 'undecided'}: {result.why}"
        )
    lines.append(
        f"the staircase: each measured commit's ratio to GOOD {state.good[:7]}, oldest first"
    )
    for sha in bisect.tested_in_order(state):
        record = state.commits[sha]
        mark = "  <- first bad" if sha == result.commit else ""
        lines.append(
            f"  {sha[:7]} {record['outcome']:<7} {bisect.staircase_step(state, sha)}  "
            f"{bisect.subject(state, sha)}{mark}"
        )
        lines.append(f"          run {record.get('run_id') or '-'}: {record.get('reason') or '-'}")
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
        metavar="GOOD BAD FILE [--home DIR] [--threshold X] [--file-from worktree|revision] "
        "[-- PYTEST_ARGS]",
        help="a good commit, a later one that regressed (sha, branch, tag), the "
        "benchmark file as a path from the repository root, then further "
        "pytest options for every run",
    )
    verb.set_defaults(func=cmd_bisect, prepare=lift_home)
