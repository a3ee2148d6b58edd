"""Calibrate the counters' verdict rule (issue 35): a paired t on the log ratios whose sd is
floored at the backend's noise (stats/paired.py, ``counted_t_test``).

Two parts, each printed as a table of rates with 95% Wilson intervals:

1. **Real counts.** A Python loop over module globals (the counts move with the hash seed)
   at its normal size (twice: A and A', for A/A) and with +0.5% and +1% of the whole
   process's instructions, counted by the backend of this machine (engine/counters.py) in
   interleaved blocks, one hash seed per block as the engine sets it; once on the machine as
   it is ("quiet") and once with one busy loop per core ("loaded"). Experiments of n = 3, 5
   and 10 blocks are drawn from those blocks (with replacement where n exceeds them) and
   judged by ``analyze_run`` with the backend's floor and the counters' default band.
2. **Synthetic backend noise.** The counts of a backend that does not count identically
   (perf: interrupts, page faults): independent noise of sd 0.5x, 1x and 4x the floor,
   normal or heavy-tailed (Student t, 3 degrees), on both sides of each block. What the
   floor must keep: A/A at most 5% wherever the noise is, and the power where it is small.

    python benchmarks/counter_calibration.py                  # 4-9 minutes here (the load)
    python benchmarks/counter_calibration.py --blocks 12 --experiments 2000 --synthetic 4000
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

from pytest_benchmark_agent.config.metric import COUNTER_NOISE_THRESHOLD
from pytest_benchmark_agent.engine.counters import Counting, backend
from pytest_benchmark_agent.stats.analysis import Observation, PlainMetricRule, analyze_run
from pytest_benchmark_agent.stats.counter_noise import NOISE_FLOORS

WORK = "import sys\nx = 0\nfor i in range(int(sys.argv[1])):\n    x += i\n"
BASE_ITERATIONS = 20_000
ARMS = {"A": 0.0, "A'": 0.0, "+0.5%": 0.005, "+1%": 0.01}
SIZES_N = (3, 5, 10)
SPEC = {
    "t": PlainMetricRule(primary=True, noise_threshold=COUNTER_NOISE_THRESHOLD, min_replicates=3)
}


def wilson(hits: int, total: int) -> str:
    """``hits/total = rate% [low%, high%]``: the 95% Wilson interval of a rate."""
    ci = binomtest(hits, total).proportion_ci(confidence_level=0.95, method="wilson")
    return f"{hits}/{total} = {hits / total:.1%} [{ci.low:.1%}, {ci.high:.1%}]"


def verdict(control: np.ndarray, treated: np.ndarray, floor: float) -> str:
    """The verdict of ``analyze_run`` on paired blocks with the counters' rule."""
    obs = [Observation("a", k, None, float(v)) for k, v in enumerate(control)]
    obs += [Observation("b", k, None, float(v)) for k, v in enumerate(treated)]
    result = analyze_run({"t": obs}, SPEC, ["a", "b"], "a", counter_floors={"t": floor})
    return result.verdicts["t"]["b"].verdict


def count_once(counting: Counting, iterations: int, seed: int) -> int:
    """Instructions of one workload process under the backend, with hash seed ``seed``."""
    command = f"{shlex.quote(sys.executable)} -S -c {shlex.quote(WORK)} {iterations}"
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    subprocess.run(["/bin/sh", "-c", counting.command(command)], check=True, env=env)
    return counting.read()["instructions"]


def sizes(counting: Counting) -> dict[str, int]:
    """Iterations per arm so that the whole process does the arm's extra instructions."""
    empty = count_once(counting, 0, 1)
    full = count_once(counting, BASE_ITERATIONS, 1)
    per_iteration = (full - empty) / BASE_ITERATIONS
    return {arm: int(BASE_ITERATIONS + extra * full / per_iteration) for arm, extra in ARMS.items()}


def collect(counting: Counting, iterations: dict[str, int], blocks: int, load: int, seed: int):
    """Counts per arm, one list entry per block, under ``load`` busy loops."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)]
    try:
        order = random.Random(seed)
        out: dict[str, list[int]] = {arm: [] for arm in ARMS}
        for _ in range(blocks):
            hash_seed = order.randrange(1, 2**32 - 1)  # another seed every block, as a run's
            for arm in order.sample(list(ARMS), len(ARMS)):
                out[arm].append(count_once(counting, iterations[arm], hash_seed))
        return out
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()


def real_rows(pool: dict[str, list[int]], floor: float, runs: int, seed: int) -> list[str]:
    """Rows (n, A/A any change, +0.5% regressed, +1% regressed) on the collected counts."""
    rng = np.random.default_rng(seed)
    total = len(pool["A"])
    control = np.array(pool["A"], dtype=float)
    rows = []
    for n in SIZES_N:
        draws = [rng.choice(total, n, replace=n > total) for _ in range(runs)]
        cells = []
        for arm, wanted in (("A'", None), ("+0.5%", "regressed"), ("+1%", "regressed")):
            treated = np.array(pool[arm], dtype=float)
            said = [verdict(control[idx], treated[idx], floor) for idx in draws]
            hits = sum(
                v in ("improved", "regressed") if wanted is None else v == wanted for v in said
            )
            cells.append(wilson(hits, runs))
        rows.append(f"| {n} | " + " | ".join(cells) + " |")
    return rows


def synthetic_rows(floor: float, runs: int, seed: int) -> list[str]:
    """Rows (noise, n, A/A, +0.5%, +1%) with independent backend noise on both sides."""
    rng = np.random.default_rng(seed)
    rows = []
    for scale in (0.5, 1.0, 4.0):
        for shape in ("normal", "t3"):
            sd = scale * floor
            for n in SIZES_N:
                cells = []
                for effect, wanted in ((0.0, None), (0.005, "regressed"), (0.01, "regressed")):
                    hits = 0
                    for _ in range(runs):
                        layout = 85e6 * np.exp(rng.normal(0, 0.03, n))  # the hash seeds' spread
                        if shape == "normal":
                            noise = rng.normal(0, sd, (2, n))
                        else:  # Student t with 3 degrees, scaled to the same sd
                            noise = rng.standard_t(3, (2, n)) * sd / np.sqrt(3.0)
                        control = layout * np.exp(noise[0])
                        treated = layout * (1 + effect) * np.exp(noise[1])
                        said = verdict(control, treated, floor)
                        hits += (
                            said in ("improved", "regressed") if wanted is None else said == wanted
                        )
                    cells.append(wilson(hits, runs))
                rows.append(f"| {shape}, sd {sd:.3%} | {n} | " + " | ".join(cells) + " |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=4, help="counted blocks per condition")
    parser.add_argument("--experiments", type=int, default=1000, help="resampled runs per cell")
    parser.add_argument("--synthetic", type=int, default=1000, help="synthetic runs per cell")
    parser.add_argument(
        "--load", type=int, default=os.cpu_count() or 1, help="busy loops when loaded"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    found = backend()
    if found is None:
        raise SystemExit("no counting backend: install valgrind (apt-get install valgrind)")
    floor = NOISE_FLOORS[found.name]
    header = "| n | A/A: any change | +0.5%: regressed | +1%: regressed |\n|---|---|---|---|"
    with tempfile.TemporaryDirectory() as folder:
        counting = Counting(found, ["instructions"], Path(folder) / "counters")
        iterations = sizes(counting)
        print(
            f"backend {found.label}, floor {floor:.3%}, band {COUNTER_NOISE_THRESHOLD:.1%}; "
            f"iterations per arm {iterations}"
        )
        for name, load in (("quiet", 0), ("loaded", args.load)):
            before = os.getloadavg()[0]
            pool = collect(counting, iterations, args.blocks, load, args.seed)
            control = np.array(pool["A"], dtype=float)
            effects = {arm: float(np.median(np.array(pool[arm]) / control) - 1) for arm in ARMS}
            identical = sum(a == b for a, b in zip(pool["A"], pool["A'"], strict=True))
            print(
                f"\n#### {name} (load average {before:.1f} before; {args.blocks} counted blocks, "
                f"{args.experiments} experiments per cell)\n\nA counts {int(control.min())}.."
                f"{int(control.max())} across hash seeds; realised median effect per block "
                + ", ".join(f"{arm} {effect:+.3%}" for arm, effect in effects.items())
                + f"; A'/A identical in {identical} of {args.blocks} blocks\n"
            )
            print(header)
            for row in real_rows(pool, floor, args.experiments, args.seed):
                print(row, flush=True)
    print(f"\n#### synthetic backend noise ({args.synthetic} runs per cell)\n")
    print(
        "| noise | n | A/A: any change | +0.5%: regressed | +1%: regressed |\n|---|---|---|---|---|"
    )
    for row in synthetic_rows(floor, args.synthetic, args.seed):
        print(row, flush=True)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
