"""Verbs that drive pytest sessions: ``plan``, ``run`` (in the foreground or ``--detach``ed) and
``status``.

Their command line is ``FILE... [OPTIONS] [-- PYTEST_ARGS]``: the verb's own options may come
before or after the files; anything the verb does not know goes to pytest unchanged.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from pytest_benchmark_agent.cli.common import home_of
from pytest_benchmark_agent.config.framing import frame
from pytest_benchmark_agent.config.models import load_config
from pytest_benchmark_agent.config.recipe import available_recipes, load_recipe
from pytest_benchmark_agent.engine import detach
from pytest_benchmark_agent.engine.child import bench_command
from pytest_benchmark_agent.errors import ConfigError
from pytest_benchmark_agent.judge.review import (
    accept_deviation,
    accepted_deviation,
    bench_set_overrides,
    request_of,
    review,
    set_hypothesis,
)
from pytest_benchmark_agent.records.reader import UnreadableRecord, skip_unreadable
from pytest_benchmark_agent.records.run import new_run_id

#: ``benchmark-agent plan`` exit code when the request is challenged: its own, outside pytest's
#: 0-5, which plan passes on from its collection (2: gate 1; 3 would say pytest crashed).
EXIT_CHALLENGED = 10


def _own_options(parser: argparse.ArgumentParser, verb: str) -> None:
    if verb == "run":
        parser.add_argument(
            "--detach",
            action="store_true",
            help="run in its own process session, surviving this shell; "
            "follow it with 'benchmark-agent status RUN'",
        )
    else:
        parser.add_argument(
            "--name",
            help="planning from a domain or recipe: the benchmark's name and folder "
            "(default: the domain's or recipe's name)",
        )
        parser.add_argument(
            "--dir",
            default=None,
            help="planning from a domain or recipe: where NAME/ is written (default: .)",
        )
        parser.add_argument(
            "--hypothesis",
            metavar="TEXT",
            help="set (or replace) the file's hypothesis before planning",
        )
        parser.add_argument(
            "--accept-deviation",
            metavar="REASON",
            help="run a challenged request anyway: records REASON, and the run "
            "carries the caveat 'comparability limited'",
        )


def _command_line(args: argparse.Namespace) -> tuple[list[str], argparse.Namespace, list[str]]:
    """Split ``FILE... [OPTIONS] [-- PYTEST_ARGS]`` into files, own options and pytest args."""
    rest = list(args.rest)
    cut = rest.index("--") if "--" in rest else len(rest)
    before, after = rest[:cut], rest[cut + 1 :]
    count = next((i for i, token in enumerate(before) if token.startswith("-")), len(before))
    own_parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    _own_options(own_parser, args.verb)
    own, unknown = own_parser.parse_known_args(before[count:])
    for name, value in vars(own).items():  # options given before the files count as well
        setattr(own, name, value or getattr(args, name))
    if not before[:count]:
        raise SystemExit(
            f"benchmark-agent {args.verb}: name at least one benchmark file, e.g. "
            f"benchmark-agent {args.verb} examples/sqlite-fts5/bench.yaml"
        )
    return before[:count], own, unknown + after


def cmd_run(args: argparse.Namespace) -> int:
    """Run benchmark files as a pytest session (or one file, detached)."""
    files, own, pytest_args = _command_line(args)
    home = home_of(args)
    if not own.detach:
        return subprocess.call(bench_command(files, home, options=pytest_args))
    if len(files) != 1:
        raise SystemExit(
            f"benchmark-agent run --detach: give exactly one benchmark file (one "
            f"run per detached session); got {len(files)}"
        )
    try:
        config = load_config(files[0], bench_set_overrides(pytest_args))
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    run_id = new_run_id(config.name)
    run_dir = home / "runs" / run_id
    pid = detach.start(
        run_dir, bench_command(files, home, run_id=run_id, options=["-s", *pytest_args]), Path.cwd()
    )
    print(
        f"{run_id}: detached (pid {pid})\n"
        f"  follow: benchmark-agent --home {home} status {run_id}\n"
        f"  log:    {run_dir / detach.LOG_FILE}\n"
        f"  stop:   kill {pid}   (the running stage is stopped, every sample kept)"
    )
    return 0


def _sources() -> tuple[list[str], list[str]]:
    """The recipes and registered Python Domains a plan can start from."""
    from pytest_benchmark_agent.domains.api import available_domains

    return available_recipes(), [d for d in available_domains() if d != "command"]


def _scaffold(source: str, words: list[str], own: argparse.Namespace) -> str:
    """Frame the hypothesis over ``source``'s manifest, write its benchmark file (and, for a
    recipe, its stage scripts) as ``domain NAME --recipe R`` does; the file's path."""
    from pytest_benchmark_agent.cli.domain import recipe_files, typed_domain_file, write_files
    from pytest_benchmark_agent.domains.api import domain_class

    hypothesis = " ".join(words) if words else own.hypothesis
    if not hypothesis:
        raise SystemExit(
            f"benchmark-agent plan {source}: give the hypothesis, e.g. benchmark-agent plan "
            f'{source} "the candidate is faster than the baseline at the same results"'
        )
    name = own.name or source
    folder = Path(own.dir or ".") / name
    bench = folder / "bench.yaml"
    if bench.exists():
        raise SystemExit(
            f"benchmark-agent plan: {bench} already exists; plan it with benchmark-agent plan "
            f"{bench}, or give another --name"
        )
    recipes, _ = _sources()
    if source in recipes:
        recipe = load_recipe(source, bench)
        framed = frame(hypothesis, recipe.manifest, recipe.example, f"recipe {source}")
        files = recipe_files(name, source, recipe, framed)
    else:
        manifest = domain_class(source, bench).manifest_entries()
        framed = frame(hypothesis, manifest, {}, f"domain {source}")
        files = {"bench.yaml": typed_domain_file(name, source, manifest, framed)}
    print(f"framed from {source}:", *framed.lines(), sep="\n")
    write_files(folder, files, "plan")
    return str(bench)


def cmd_plan(args: argparse.Namespace) -> int:
    """Gate 1 and preflight (nothing is executed), then the comparison with the latest RELIABLE
    run, the lessons and risks that apply, and a challenge of any misaligned request.

    ``plan DOMAIN|RECIPE "HYPOTHESIS"`` first frames the hypothesis (the param it names varies,
    the others are controls) and writes the benchmark file as ``domain NAME --recipe R`` does."""
    files, own, pytest_args = _command_line(args)
    home = home_of(args)
    recipes, domains = _sources()
    if not Path(files[0]).is_file() and files[0] in {*recipes, *domains}:
        files = [_scaffold(files[0], files[1:], own)]
        own.hypothesis = None  # framed into the file already
    missing = [file for file in files if not Path(file).exists()]
    if missing:
        raise SystemExit(
            f"benchmark-agent plan: {missing[0]} is no benchmark file, recipe or domain; give a "
            f"file, or plan from a recipe ({', '.join(recipes)}) or a domain "
            f"({', '.join(domains)}) with a hypothesis"
        )
    if own.hypothesis is not None:
        if len(files) != 1:
            raise SystemExit("benchmark-agent plan --hypothesis: give exactly one benchmark file")
        set_hypothesis(Path(files[0]), own.hypothesis)
        print(f"{files[0]}: hypothesis set", flush=True)
    planned = bench_command(files, home, options=["--collect-only", "-q", *pytest_args])
    code = subprocess.call(planned)
    if code != 0:
        return code
    challenged = 0
    for file in files:
        config = load_config(file, bench_set_overrides(pytest_args))
        result = review(home, config)
        print("\n".join(result.lines(home)))
        if not result.challenges:
            continue
        earlier = accepted_deviation(home, config.name, config)
        if own.accept_deviation is not None:
            path = accept_deviation(home, result, own.accept_deviation)
            print(
                f"deviation accepted and recorded in {path}: a run of {config.name} with these "
                "values carries the caveat 'comparability limited'."
            )
        elif earlier and earlier.get("request") == request_of(result.challenges):
            print(
                f"deviation accepted earlier ({earlier['accepted']}: {earlier['reason']}): a "
                "run with these values carries the caveat 'comparability limited'."
            )
        else:
            challenged += 1
            print(
                f"plan challenged ({len(result.challenges)}): follow the aligned alternative, "
                f"or record why you deviate: benchmark-agent plan {file} --accept-deviation "
                '"REASON"'
            )
    return EXIT_CHALLENGED if challenged else 0


def _run_folders(home: Path) -> list[Path]:
    """Run folders with a record, a heartbeat or a pid file (a detached run before its first
    trial has only the last two), oldest first (run ids sort by time)."""
    runs = home / "runs"
    if not runs.is_dir():
        return []
    marks = ("results.yaml", detach.PID_FILE, "heartbeat.json")
    return sorted(p for p in runs.iterdir() if any((p / m).is_file() for m in marks))


def cmd_status(args: argparse.Namespace) -> int:
    """One line on the latest (or a named) run: starting, running (trials done of total, stage,
    elapsed, ETA, peak memory), complete/halted, interrupted, failed (why) or died. Exit code 1
    for interrupted, failed or died. A latest run whose record cannot be read is skipped, named
    in a warning; a named run's is an error."""
    home = home_of(args)
    folders = _run_folders(home)
    if not folders:
        print(f"no runs in {home / 'runs'}")
        return 0
    if args.run == "latest":
        return _latest_status(folders)
    matches = [p for p in folders if p.name == args.run] or [
        p for p in folders if p.name.startswith(args.run)
    ]
    if len(matches) != 1:
        known = ", ".join(p.name for p in folders[-5:])
        raise SystemExit(
            f"benchmark-agent: no unique run '{args.run}' in {home / 'runs'} (latest runs: {known})"
        )
    status = detach.run_status(matches[0])
    print(status.line)
    return 0 if status.ok else 1


def _latest_status(folders: list[Path]) -> int:
    """The status of the latest readable run: a newer one whose record cannot be read is
    skipped with a warning naming the file, as the list verbs do (none readable: the latest
    one's error)."""
    skipped: list[UnreadableRecord] = []
    for run_dir in reversed(folders):
        try:
            status = detach.run_status(run_dir)
        except UnreadableRecord as error:
            skipped.append(error)
            continue
        for error in skipped:
            skip_unreadable(error)
        print(status.line)
        return 0 if status.ok else 1
    raise skipped[0]


def register(verbs: argparse._SubParsersAction) -> None:
    for name, func in (("run", cmd_run), ("plan", cmd_plan)):
        summary = (func.__doc__ or "").split("\n\n")[0]
        verb = verbs.add_parser(name, help=summary.splitlines()[0], description=summary)
        _own_options(verb, name)
        verb.add_argument(
            "rest",
            nargs=argparse.REMAINDER,
            metavar="FILE... [-- PYTEST_ARGS]",
            help="benchmark YAML files (plan: or a recipe or domain and a hypothesis), then "
            "further pytest options after --",
        )
        verb.set_defaults(func=func)
    status = verbs.add_parser(
        "status", help=cmd_status.__doc__.splitlines()[0], description=cmd_status.__doc__
    )
    status.add_argument("run", nargs="?", default="latest", help="run id, unique prefix, or latest")
    status.set_defaults(func=cmd_status)
