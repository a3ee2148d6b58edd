"""Serial vs ``pytest --bench -n 2``: the wall-time gain of parallel preps, and equal verdicts.

A benchmark with several independent preps of real CPU work (each builds its own artifact for
each treatment) and short measures runs once serially and once on two xdist workers, in fresh
data directories, interleaved over ``--repeat`` rounds. It prints the median wall times, their
ratio, and each run's per-treatment result, which must agree (measurements run alone on the
host either way, so parallelism may only change how long the preps take).

The third mode, ``isolated``, runs the two workers as machines that share nothing: each in its
own mount namespace with a private, empty tmpfs over the data directory (``unshare -m``; root),
so every record reaches the controller through xdist's channel. Its per-trial cost (the median
interval between one host's successive trial starts) is printed beside the serial one, with
their ratio (issue 20 asks for at most 1.5).

    python benchmarks/xdist_speedup.py [--repeat 3] [--work 3000000]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
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
        "replicates": 6,
        "stages": stages,
        "metrics": {"size": {"direction": "lower", "primary": True}},
    }
    path = folder / "bench.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def isolated_tx(home: Path) -> list[str]:
    """Two ``--tx`` whose workers see a private, empty tmpfs at ``home`` (their own machine)."""
    wrapper = home.with_name(f"{home.name}-python")
    wrapper.write_text(
        "#!/bin/sh\n"
        'exec unshare -m sh -c \'mount -t tmpfs bench-private "$0" && exec "$@"\' '
        f'"{home}" "{sys.executable}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return [
        arg
        for host in ("host-a", "host-b")
        for arg in ("--tx", f"popen//python={wrapper}//env:BENCH_HOST_ID={host}")
    ]


def per_trial_s(trials: list[dict]) -> float:
    """The median interval between successive trial starts on one host, over hosts."""
    starts: dict[str, list[float]] = {}
    for trial in trials:
        stamp = datetime.fromisoformat(trial["started"].replace("Z", "+00:00")).timestamp()
        starts.setdefault(trial.get("host") or "", []).append(stamp)
    gaps = []
    for stamps in starts.values():
        stamps.sort()
        gaps += [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    return statistics.median(gaps)


def run(path: Path, mode: str) -> tuple[float, dict, float]:
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
    if mode == "-n 2":
        command += ["-n", "2"]
    elif mode == "isolated":
        command += ["--dist", "load", *isolated_tx(home)]
    t0 = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, cwd=path.parent)
    wall = time.perf_counter() - t0
    (run_dir,) = (home / "runs").iterdir()
    record = yaml.safe_load((run_dir / "results.yaml").read_text())
    result = {label: (row["n"], row["median"]) for label, row in record["summary"]["size"].items()}
    outcome = {"result": result, "verdicts": record.get("verdicts") or {}}
    return wall, outcome, per_trial_s(record["trials"])


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
    modes = ["serial", "-n 2"] + (["isolated"] if shutil.which("unshare") else [])
    walls: dict[str, list[float]] = {mode: [] for mode in modes}
    costs: dict[str, list[float]] = {mode: [] for mode in modes}
    outcomes: dict[str, list[dict]] = {mode: [] for mode in modes}
    for _ in range(args.repeat):
        for mode in modes:
            wall, outcome, cost = run(path, mode)
            walls[mode].append(wall)
            costs[mode].append(cost)
            outcomes[mode].append(outcome)
    median = {mode: statistics.median(walls[mode]) for mode in modes}
    per_trial = {mode: statistics.median(costs[mode]) for mode in modes}
    print(f"{'mode':<10}{'median wall s':>15}{'per-trial s':>13}{'runs':>6}")
    for mode in modes:
        print(f"{mode:<10}{median[mode]:>15.2f}{per_trial[mode]:>13.3f}{len(walls[mode]):>6}")
    for mode in modes[1:]:
        print(
            f"ratio ({mode} / serial): wall {median[mode] / median['serial']:.2f}, "
            f"per trial {per_trial[mode] / per_trial['serial']:.2f}"
        )
    first = outcomes["serial"][0]
    agree = all(o == first for mode in modes for o in outcomes[mode])
    print(f"per-treatment results and verdicts agree across all runs: {agree}")
    for mode in modes:
        print(f"  {mode}: {outcomes[mode][0]}")


if __name__ == "__main__":
    main()
