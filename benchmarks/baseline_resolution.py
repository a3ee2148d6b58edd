"""How long ``--bench-baseline REF`` takes to find its run in a data home of 1,000 runs.

Builds a temporary git repository with a few commits and a data home holding ``--runs``
recorded runs of two benchmarks spread over those commits (each run folder: an ``index.json``
entry as the engine writes it and a minimal ``results.yaml``), then times
:func:`pytest_benchmark_agent.judge.baseline.resolve_ref` for the three kinds of REF: ``latest``, a
unique prefix of a run id, and a git revision (``HEAD~2``: one ``git rev-parse`` plus the index
entries at that commit). Each timing starts with the process's cache of index entries emptied,
as a new ``pytest`` or ``benchmark-agent`` process starts (the OS's file cache stays warm). It
also counts the files one resolution opens: every ``index.json``, and no ``results.yaml``.

The target is 50 ms per resolution; the table gives each kind's median and minimum over
``--repeat`` resolutions and whether the median met it.

Run: ``python benchmarks/baseline_resolution.py`` (1,000 runs, 20 repetitions; a few seconds)
or ``--runs 50 --repeat 3`` for a smoke run.
"""

from __future__ import annotations

import argparse
import builtins
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pytest_benchmark_agent.judge.baseline import resolve_ref
from pytest_benchmark_agent.records import writer as record

TARGET_MS = 50.0
COMMITS = 8
NAMES = ("loop", "other")


def _git(repo: Path, *args: str) -> str:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="bench",
        GIT_AUTHOR_EMAIL="bench@example.invalid",
        GIT_COMMITTER_NAME="bench",
        GIT_COMMITTER_EMAIL="bench@example.invalid",
    )
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


def build(root: Path, runs: int) -> tuple[Path, Path, list[str], list[str]]:
    """A repository of :data:`COMMITS` commits and a home of ``runs`` runs over them; returns
    the repository, the home, the commits (oldest first) and the run ids."""
    repo, home = root / "repo", root / "home"
    repo.mkdir()
    _git(repo, "init", "-q")
    commits = []
    for i in range(COMMITS):
        (repo / "work.py").write_text(f"N = {i}\n")
        _git(repo, "add", "work.py")
        _git(repo, "commit", "-q", "-m", f"commit {i}")
        commits.append(_git(repo, "rev-parse", "HEAD"))
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    ids = []
    for i in range(runs):
        when = start + timedelta(minutes=i)
        name = NAMES[0] if i % 10 else NAMES[1]
        run_id = f"{when:%Y-%m-%dT%H-%M-%S}-{name}-{i % 65536:04x}"
        commit = commits[i * COMMITS // runs]
        folder = home / "runs" / run_id
        folder.mkdir(parents=True)
        ended = when.isoformat(timespec="milliseconds")[:-6] + "Z"
        entry = {
            "run_id": run_id,
            "name": name,
            "state": "complete",
            "tag": "EXPLORATORY",
            "started": ended,
            "ended": ended,
            "counts": {"passed": 5},
            "treatment_variable": None,
            "control": "default",
            "primary": {"wall_s": {}},
            "verdicts": {},
            "config_hash": "c" * 64,
            "cites": [],
            "flags": 0,
            "code": {
                "commit": commit,
                "short": commit[:7],
                "branch": "main",
                "dirty": False,
                "label": commit[:7],
            },
            "comparison_key": "k" * 64,
        }
        (folder / "index.json").write_text(json.dumps(entry, indent=1))
        (folder / "results.yaml").write_text(
            f"run_id: {run_id}\nname: {name}\nstate: complete\ntag: EXPLORATORY\n"
        )
        ids.append(run_id)
    return repo, home, commits, ids


def timed(resolve: Callable[[], object], repeat: int) -> list[float]:
    """Milliseconds per call, each with the process's index cache emptied first."""
    samples = []
    for _ in range(repeat):
        record._index_cache.clear()
        start = time.perf_counter()
        found = resolve()
        samples.append((time.perf_counter() - start) * 1000)
        assert getattr(found, "run_dir", None) is not None, found
    return samples


def opened(resolve: Callable[[], object]) -> Counter:
    """Which kinds of file one resolution opens (by file name), through ``open`` or
    ``os.open``."""
    seen: Counter = Counter()
    real_open, real_os_open = builtins.open, os.open

    def spy(file, *args, **kwargs):
        seen[Path(str(file)).name] += 1
        return real_open(file, *args, **kwargs)

    def os_spy(file, *args, **kwargs):
        seen[Path(str(file)).name] += 1
        return real_os_open(file, *args, **kwargs)

    record._index_cache.clear()
    builtins.open, os.open = spy, os_spy
    try:
        resolve()
    finally:
        builtins.open, os.open = real_open, real_os_open
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="recorded runs in the home")
    parser.add_argument("--repeat", type=int, default=20, help="resolutions timed per REF")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="baseline-resolution-") as folder:
        repo, home, commits, ids = build(Path(folder), args.runs)
        prefix = ids[len(ids) // 2][:24]
        refs: list[tuple[str, Callable[[], object]]] = [
            ("latest", lambda: resolve_ref(home, "latest", NAMES[0], repo)),
            (f"run id prefix ({prefix})", lambda: resolve_ref(home, prefix, NAMES[0], repo)),
            ("git revision (HEAD~2)", lambda: resolve_ref(home, "HEAD~2", NAMES[0], repo)),
        ]
        print(
            f"baseline resolution in a home of {args.runs} recorded runs "
            f"({len(NAMES)} benchmarks, {COMMITS} commits), {args.repeat} resolutions each, "
            "the index cache emptied before each"
        )
        print(f"{'REF':<44}{'median':>12}{'min':>12}{'n':>5}  {'target':<10}result")
        for what, resolve in refs:
            samples = timed(resolve, args.repeat)
            median = statistics.median(samples)
            result = "met" if median < TARGET_MS else "MISSED"
            print(
                f"{what:<44}{median:>9.3f} ms{min(samples):>9.3f} ms{len(samples):>5}  "
                f"{'< ' + f'{TARGET_MS:g} ms':<10}{result}"
            )
        files = opened(refs[2][1])
        print(
            f"files one resolution opens: {files.get('index.json', 0)} index.json, "
            f"{files.get('results.yaml', 0)} results.yaml, {files.get('config.yaml', 0)} "
            "config.yaml"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
