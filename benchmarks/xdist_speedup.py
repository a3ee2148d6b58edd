"""Serial vs ``pytest --bench -n 2``: the wall-time gain of parallel preps, and equal verdicts.

A benchmark with several independent preps of real CPU work (each builds its own artifact for
each treatment) and short measures runs once serially and once on two xdist workers, in fresh
data directories, interleaved over ``--repeat`` rounds. It prints the median wall times, their
ratio, and each run's per-treatment result, which must agree (measurements run alone on the
host either way, so parallelism may only change how long the preps take).

    python benchmarks/xdist_speedup.py [--repeat 3] [--work 3000000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

PREPS = 3


def bench_file(folder: Path, work: int) -> Path:
    stages = [
        {
            "name": f"build{i}",
            "kind": "prep",
            "cmd": (
                f"python -c 'sum(i*i for i in range({{work}}))'; echo {{variant}}{i} > {{a{i}}}"
            ),
            "produces": [f"a{i}"],
        }
        for i in range(PREPS)
    ]
    stages.append(
        {
            "name": "measure",
            "kind": "measure",
            "needs": [s["name"] for s in stages],
            "cmd": "cat "
            + " ".join(f"{{a{i}}}" for i in range(PREPS))
            + " > /dev/null; echo size=$(cat {a0} | wc -c)",
            "metrics_from": {"stdout": True, "fields": ["size"]},
        }
    )
    document = {
        "name": "xdist-speedup",
        "params": {"work": work, "variant": "x"},
        "treatment_variable": "variant",
        "treatments": ["x", "yy"],
        "replicates": 5,
        "stages": stages,
        "metrics": {"size": {"direction": "lower", "primary": True}},
    }
    path = folder / "bench.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def run(path: Path, workers: int) -> tuple[float, dict]:
    home = Path(tempfile.mkdtemp(prefix="xdist-speedup-"))
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--bench",
        str(path),
        "--bench-home",
        str(home),
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:benchmark",
    ]
    if workers:
        command += ["-n", str(workers)]
    t0 = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, cwd=path.parent)
    wall = time.perf_counter() - t0
    (run_dir,) = (home / "runs").iterdir()
    record = yaml.safe_load((run_dir / "results.yaml").read_text())
    result = {label: (row["n"], row["median"]) for label, row in record["summary"]["size"].items()}
    return wall, {"result": result, "verdicts": record.get("verdicts") or {}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--work",
        type=int,
        default=3_000_000,
        help="size of each prep's CPU work (about 1 s at 3,000,000)",
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="xdist-bench-"))
    path = bench_file(folder, args.work)
    walls: dict[int, list[float]] = {0: [], 2: []}
    outcomes: dict[int, list[dict]] = {0: [], 2: []}
    for _ in range(args.repeat):
        for workers in (0, 2):
            wall, outcome = run(path, workers)
            walls[workers].append(wall)
            outcomes[workers].append(outcome)
    serial, parallel = statistics.median(walls[0]), statistics.median(walls[2])
    print(f"{'mode':<10}{'median wall s':>15}{'runs':>6}")
    print(f"{'serial':<10}{serial:>15.2f}{len(walls[0]):>6}")
    print(f"{'-n 2':<10}{parallel:>15.2f}{len(walls[2]):>6}")
    print(f"ratio (-n 2 / serial): {parallel / serial:.2f}")
    agree = all(o == outcomes[0][0] for o in outcomes[0] + outcomes[2])
    print(f"per-treatment results and verdicts agree across all runs: {agree}")
    print(f"  serial: {outcomes[0][0]}")
    print(f"  -n 2:   {outcomes[2][0]}")


if __name__ == "__main__":
    main()
