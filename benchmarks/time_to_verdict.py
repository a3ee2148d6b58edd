"""The time to a trustworthy verdict (issue 44): how often the CI gate and bisect decide, and
how long they take, with the shipped defaults, on real git repositories and real sessions.

Every cell is a fresh repository per session (the helpers of ``bench_against_counts.py``):

- ``aa``: a README-only commit; ``cost`` is synthetic, of known truth: the committed
  ``cost.txt`` times Gaussian noise of CV 2% (so the verdict does not depend on the machine,
  only the seconds do). Must pass (>= 95%), never regress (<= 5%).
- ``plus5``: HEAD raises ``cost.txt`` by 5%, CV 2%. Must regress (>= 90%).
- ``wall-aa``: a README-only commit timed for real: ``wall_s`` of a fixed CPU-bound loop, so the
  machine's load is the noise (this is what a loaded CI runner sees).
- ``counted-aa`` / ``counted-plus1``: ``instructions`` of a small C loop (counted by valgrind's
  cachegrind here, perf where a PMU is), the loop 1% longer at HEAD. Must catch +1% (>= 95%) and
  pass A/A (regressed <= 5%).
- ``bisect``: 12 commits, one raising ``cost.txt`` x1.5 at a random position, the others
  README-only; CV 10%, the machine up to 5% faster or slower in each session.
  ``benchmark-agent bisect`` with the defaults must name it (>= 9 of 10).
- ``real``: ``benchmark-agent bisect`` over a real package's release history
  (``real_history.py``), with the defaults.

Files declare neither ``replicates`` nor ``fail_threshold``: the defaults run (adaptive blocks
8 to 40, 3 to 40 for counts; 5% for a timing, 1% for a count). ``--reference`` runs the timed
cells with ``replicates: 7`` declared (a fixed count, the count before adaptive blocks) side by
side, and prints the ratio of the median seconds. ``--load 2`` keeps two busy loops running.

    python benchmarks/time_to_verdict.py --sessions 60 --cells aa,plus5
    python benchmarks/time_to_verdict.py --sessions 60 --load 2 --cells counted-aa,counted-plus1

Per cell: the sessions, passed / regressed / unjudged with 95% Wilson intervals, and the median
and 90th-percentile wall seconds of a session (of a bisection for ``bisect``).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _sibling(name: str) -> Any:
    """A script beside this one, as a module."""
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


counts = _sibling("bench_against_counts")

WALL_MEASURE = """\
import time
from pathlib import Path

work = int(200_000 * float(Path("cost.txt").read_text()))
start = time.perf_counter()
total = sum(i * i for i in range(work))
print(f"loop_ms={(time.perf_counter() - start) * 1000}")
"""
COUNT_SOURCE = """\
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    FILE *f = fopen("cost.txt", "r");
    double cost = 1.0;
    if (!f || fscanf(f, "%lf", &cost) != 1) return 2;
    fclose(f);
    volatile unsigned long total = 0;
    unsigned long n = (unsigned long)(2000000 * cost);
    for (unsigned long i = 0; i < n; i++) total += i;
    return 0;
}
"""


def defaults_file(metric: str, cmd: str, *, counted: bool = False) -> dict[str, Any]:
    """A one-configuration benchmark file with the defaults (no replicates, no fail_threshold)."""
    stage: dict[str, Any] = {"name": "measure", "kind": "measure", "cmd": cmd}
    if counted:
        stage["counters"] = ["instructions"]
    else:
        stage["metrics_from"] = {"stdout": True, "fields": [metric]}
    return {
        "name": "verdict",
        "hypothesis": "this commit costs no more than the one compared with",
        "stages": [stage],
        "metrics": {metric: {"direction": "lower", "primary": True}},
    }


def _cell_file(cell: str, repo: Any) -> dict[str, Any]:
    if cell.startswith("counted"):
        binary = repo.path / "work"
        (repo.path / "work.c").write_text(COUNT_SOURCE)
        subprocess.run(["cc", "-O1", "-o", str(binary), str(repo.path / "work.c")], check=True)
        return defaults_file("instructions", "./work", counted=True)
    if cell == "wall-aa":
        return defaults_file("loop_ms", f"{sys.executable} wall.py")
    document = defaults_file("cost", f"{sys.executable} measure.py")
    document["metrics"]["cost"]["noise_threshold"] = 0.02  # the synthetic CV's own band
    return document


def one_session(cell: str, seed: int, reference: bool) -> tuple[str, float]:
    """One session of ``cell`` in a fresh repository: the CI gate's outcome and its seconds."""
    with tempfile.TemporaryDirectory() as folder:
        repo = counts.Repo(Path(folder), seed)
        document = _cell_file(cell, repo)
        if reference:
            document["replicates"] = 7
        repo.base(document)
        if cell.startswith("counted"):
            counts.git(repo.path, "add", "work.c", "work")
            counts.git(repo.path, "commit", "-q", "-m", "the counted loop")
        if cell == "wall-aa":
            repo.commit("the timed loop", **{"wall.py": WALL_MEASURE})
        change = {
            "plus5": {"cost.txt": "1.05"},
            "counted-plus1": {"cost.txt": "1.01"},
        }.get(cell, {"README.md": "a demo, better explained\n"})
        repo.commit("the change", **change)
        start = time.monotonic()
        done = repo.bench("--bench-against", "HEAD~1")
        seconds = time.monotonic() - start
        if not (repo.home / "runs").is_dir():  # refused or crashed: shown, never counted
            return f"exit {done.returncode}", seconds
        gate = (repo.record().get("ci_gate") or {}).get("outcome", "unjudged")
        return gate, seconds


def one_bisection(seed: int) -> tuple[str, float]:
    """A bisection of the ``bisect`` cell: ``found`` when it named the x1.5 commit."""
    chooser = random.Random(seed)
    at = chooser.randint(1, 11)
    with tempfile.TemporaryDirectory() as folder:
        repo = counts.Repo(Path(folder), seed, shift=0.05)
        repo.env["NOISE_CV"] = "0.10"
        document = _cell_file("aa", repo)
        document["metrics"]["cost"]["noise_threshold"] = 0.10
        shas = [repo.base(document)]
        for k in range(1, 12):
            change = {"cost.txt": "1.5"} if k == at else {"README.md": f"edit {k}\n"}
            shas.append(repo.commit(f"commit {k}", **change))
        start = time.monotonic()
        done = counts.bisect(repo, shas[0], shas[-1])
        seconds = time.monotonic() - start
        first = done.stdout.splitlines()[0] if done.stdout else ""
        found = done.returncode == 0 and shas[at] in first
        return ("found" if found else f"exit {done.returncode}: {first[:60]}"), seconds


def one_real_bisection(seed: int) -> tuple[str, float]:
    """A bisection over the real package history of ``real_history.py``."""
    real = _sibling("real_history")
    with tempfile.TemporaryDirectory() as folder:
        cache = Path(tempfile.gettempdir()) / "real_history_sdists"  # kept between runs
        history = real.build_history(Path(folder), cache=cache)
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "pytest_benchmark_agent.cli.main", "bisect"]
            + [history.good, history.bad, "bench.yaml", "--home", str(Path(folder) / "home")],
            cwd=history.repo,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        seconds = time.monotonic() - start
        first = done.stdout.splitlines()[0] if done.stdout else done.stderr[-200:]
        found = done.returncode == 0 and history.first_bad in first
        return ("found" if found else f"exit {done.returncode}: {first[:60]}"), seconds


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion."""
    if n == 0:
        return 0.0, 1.0
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(outcomes: list[str], which: str) -> str:
    hits = sum(o == which for o in outcomes)
    low, high = wilson(hits, len(outcomes))
    return f"{hits:>3}/{len(outcomes)} [{100 * low:.0f}-{100 * high:.0f}%]"


def summary(title: str, rows: list[tuple[str, float]], kinds: tuple[str, ...]) -> list[str]:
    outcomes = [o for o, _ in rows]
    seconds = sorted(s for _, s in rows)
    p90 = seconds[min(len(seconds) - 1, math.ceil(0.9 * len(seconds)) - 1)]
    cells = "  ".join(f"{kind} {rate(outcomes, kind)}" for kind in kinds)
    other = [o for o in outcomes if o not in kinds]
    tail = f"  other: {', '.join(sorted(set(other)))}" if other else ""
    return [
        f"{title:<34} n={len(rows):<3} {cells}  median {statistics.median(seconds):.1f} s  "
        f"p90 {p90:.1f} s{tail}"
    ]


def busy_loops(count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=60)
    parser.add_argument("--cells", default="aa,plus5,wall-aa,counted-aa,counted-plus1,bisect")
    parser.add_argument("--load", type=int, default=0, help="busy loops kept running")
    parser.add_argument("--reference", action="store_true", help="also replicates: 7 declared")
    parser.add_argument("--seed", type=int, default=1000)
    args = parser.parse_args()
    burners = busy_loops(args.load)
    gate = ("passed", "regressed", "unjudged")
    runs: dict[str, Callable[[int], tuple[str, float]]] = {
        "bisect": one_bisection,
        "real": one_real_bisection,
    }
    print(f"load: {args.load} busy loop(s); sessions per cell: {args.sessions}")
    try:
        for cell in args.cells.split(","):
            if cell in runs:
                sessions = min(args.sessions, 10)
                rows = [runs[cell](args.seed + k) for k in range(sessions)]
                print("\n".join(summary(cell, rows, ("found",))), flush=True)
                continue
            rows = [one_session(cell, args.seed + k, False) for k in range(args.sessions)]
            print("\n".join(summary(f"{cell} (defaults)", rows, gate)), flush=True)
            if args.reference and not cell.startswith("counted"):
                fixed = [one_session(cell, args.seed + k, True) for k in range(args.sessions)]
                print("\n".join(summary(f"{cell} (replicates: 7)", fixed, gate)))
                ratio = statistics.median(s for _, s in rows) / statistics.median(
                    s for _, s in fixed
                )
                print(f"{'':<34} median seconds, defaults / replicates 7: x{ratio:.2f}")
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
