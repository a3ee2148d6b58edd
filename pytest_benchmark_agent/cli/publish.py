"""``benchmark-agent publish OUT`` and ``history --changes``: a benchmark's runs read as a
series over commits (:mod:`.records.series`), its change points, and the static site."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pytest_benchmark_agent.cli.common import home_of
from pytest_benchmark_agent.errors import BenchError
from pytest_benchmark_agent.records.series import (
    Series,
    git_history,
    git_toplevel,
    load_points,
    series_of,
)
from pytest_benchmark_agent.report.changes import (
    BISECT_NOTE,
    HYPOTHESIS,
    bisect_command,
    metric_changes,
)
from pytest_benchmark_agent.stats.changepoints import ALPHA, PERMUTATIONS
from pytest_benchmark_agent.util.safetext import one_line

#: matplotlib's cache and configuration folder, under the data home (never $HOME).
MPL_FOLDER = ".matplotlib"


def all_series(args: argparse.Namespace, name: str | None = None) -> tuple[list[Series], str]:
    """Every benchmark's series (or ``name``'s) and a sentence saying how it is ordered."""
    home = home_of(args)
    repo = Path(args.repo or ".").resolve()
    if args.rev.startswith("-"):  # git would read it as an option (--output=FILE writes a file)
        raise BenchError(f"--rev {args.rev!r} is an option, not a revision; fix: name a commit")
    history = git_history(repo, args.rev)
    points = load_points(home)
    names = sorted({p.name for p in points if name is None or p.name == name})
    if name is not None and not names:
        known = ", ".join(sorted({p.name for p in points})) or "none"
        raise BenchError(
            f"no finished run of {name!r} in {home / 'runs'} (benchmarks recorded: {known})"
        )
    order = (
        f"commit order of {args.rev} in {repo}"
        if history is not None
        else f"time order ({repo} is no git work tree with {args.rev}: no commit order)"
    )
    return [series_of(points, n, history) for n in names], order


def cmd_changes(args: argparse.Namespace) -> int:
    """Print each metric's change points over a benchmark's runs, with a bisect command each."""
    series, order = all_series(args, args.benchmark or args.name)
    home, top = home_of(args), git_toplevel(Path(args.repo or ".").resolve())
    print(
        f"change points (E-Divisive means, permutation test at {ALPHA:g}, {PERMUTATIONS} "
        f"permutations; runs in {order})"
    )
    charted = {one.name: sorted({m for p in one.points for m in p.values}) for one in series}
    if args.metric and not any(args.metric in metrics for metrics in charted.values()):
        held = sorted({m for metrics in charted.values() for m in metrics})
        raise BenchError(
            f"no run holds a charted metric {args.metric!r} (they hold: "
            f"{', '.join(held) or 'none'}); fix: --metric one of them"
        )
    for one in series:
        metrics = charted[one.name]
        if args.metric:
            if args.metric not in metrics:
                continue
            metrics = [args.metric]
        for metric in metrics:
            points, changes = metric_changes(one, metric)
            print(one_line(f"{one.name}: {metric} over {len(points)} runs"))
            for change in changes:
                print(one_line(f"  change point {change.range}: {change.step}; {change.evidence}"))
                command = bisect_command(change, top, home)
                if command:
                    print(one_line(f"    {BISECT_NOTE}: {command}"))
            if not changes:
                print("  no change point")
        for left in one.left_out:
            print(one_line(f"  left out: {left}"))
    print(HYPOTHESIS)
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    """Write a static site of every benchmark's history to OUT (charts over commits, change
    points, every run linked); only the pages whose content changed are rewritten."""
    from pytest_benchmark_agent.report.site import Site, publish

    home = home_of(args)
    os.environ.setdefault("MPLCONFIGDIR", str(home / MPL_FOLDER))
    series, order = all_series(args)
    out = Path(args.out).resolve()
    top = git_toplevel(Path(args.repo or ".").resolve())
    done = publish(Site(out, home.resolve(), top, f"{home} ({order})"), series)
    print(
        f"published {len(series)} benchmark(s) to {out / 'index.html'}: {len(done.written)} "
        f"page(s) written, {len(done.unchanged)} unchanged, {len(done.removed)} removed"
    )
    return 0


def _git_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rev", default="HEAD", help="the revision whose history orders the runs (default HEAD)"
    )
    parser.add_argument(
        "--repo", help="the git work tree the runs measured (default: the current folder)"
    )


def register(verbs: argparse._SubParsersAction) -> None:
    site = verbs.add_parser("publish", help=cmd_publish.__doc__, description=cmd_publish.__doc__)
    site.add_argument("out", metavar="OUT", help="the folder the site is written to")
    _git_options(site)
    site.set_defaults(func=cmd_publish)


def history_options(history: argparse.ArgumentParser) -> None:
    """``history``'s options for change points (the verb itself is in :mod:`.records`)."""
    history.add_argument("benchmark", nargs="?", metavar="NAME", help="only runs of this benchmark")
    history.add_argument(
        "--changes",
        action="store_true",
        help="find step changes in each metric over the runs (E-Divisive means) and print the "
        "bisect command for each commit range",
    )
    history.add_argument("--metric", help="with --changes: only this metric")
    _git_options(history)
