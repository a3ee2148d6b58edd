"""How often the tuner moves when nothing is better, and whether it moves when one point is.

Two landscapes over five values of one param (x = 0..4, the start x = 0), each tune run by the
real tuner in-process (:class:`~pytest_benchmark_agent.tune.tuner.Tuner`, with its sizing,
selection, confirmation and gate 2); only each session of a round is replaced by a simulation:

- **flat**: every point has the same true latency (10 ms), so any move is a false move;
  ``replicates: 5`` per session (n = 5);
- **clear winner**: x = 3 is 4x faster (2.5 ms), faster in every block; at ``replicates: 5``
  and at the default replicates (the file leaves them out).

Timing noise looks like a loaded machine, as in ``tuner_efficiency.py``: each sample is
multiplied by a lognormal (sigma 3%), 5% of samples by a spike of 1.2-1.5x, and every sample of
a block by the block's own drift (sigma 2%).

For each strategy the table shows: tunes; trials per tune; how many selection rounds found a
candidate "improved" (each a false positive on the flat landscape: what moved before a move
had to be confirmed); how many tunes moved (false moves on the flat landscape), with the
exact one-sided 95% upper bound of that rate; and on the clear winner, how many tunes
selected x = 3 (and the trials that took).

On five values of one param, refine's coarse grid is the whole lattice and coordinate's one
line is too, so all three strategies run the same rounds; the default runs grid only.

    python benchmarks/tune_calibration.py                 # 600 flat + 30 winner tunes, minutes
    python benchmarks/tune_calibration.py --flat 3000 --strategies grid refine coordinate
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.config.tuning import TuneSettings
from pytest_benchmark_agent.engine.plan import point_label
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.tune.rounds import RoundOutcome, RoundRequest
from pytest_benchmark_agent.tune.space import load_space
from pytest_benchmark_agent.tune.strategies import STRATEGIES
from pytest_benchmark_agent.tune.tuner import Tuner

VALUES = [0, 1, 2, 3, 4]
WINNER = 3

TUNING = {
    "name": "calibration",
    "params": {"x": 0},
    "search_space": {"x": VALUES},
    "objective": {"metric": "p50_ms", "direction": "lower"},
    "stages": [
        {
            "name": "measure",
            "kind": "measure",
            "cmd": "measure {x}",
            "metrics_from": {"stdout": True, "fields": ["p50_ms"]},
        }
    ],
    "metrics": {"p50_ms": {"direction": "lower", "noise_threshold": 0.01}},
}

Landscape = Callable[[dict[str, Any]], float]


def flat(point: dict[str, Any]) -> float:
    return 10.0


def winner(point: dict[str, Any]) -> float:
    return 2.5 if point["x"] == WINNER else 10.0


class Sessions:
    """A round runner: each session's record built from the landscape, in blocks (replicate
    k of every point measured together, under one drift), as the engine runs them."""

    def __init__(self, landscape: Landscape, seed: int, replicates: int):
        self.landscape = landscape
        self.rng = random.Random(seed)
        self.replicates = replicates

    def __call__(self, request: RoundRequest) -> RoundOutcome:
        trials = []
        for rep in range(self.replicates):
            drift = math.exp(self.rng.gauss(0, 0.02))
            for position, point in enumerate(request.points):
                spike = self.rng.uniform(1.2, 1.5) if self.rng.random() < 0.05 else 1.0
                value = self.landscape(point) * drift * spike * math.exp(self.rng.gauss(0, 0.03))
                label = point_label(point)
                trials.append(
                    {
                        "id": f"measure[point={label}-rep{rep}]",
                        "treatment": label,
                        "replicate": rep,
                        "position": position,
                        "seed": None,
                        "status": "passed",
                        "stage": "measure",
                        "wall_s": 0.0,
                        "metrics": {"p50_ms": value},
                    }
                )
        record = RunRecord.from_dict({"state": "complete", "trials": trials})
        return RoundOutcome(request.run_id, record, 0.0)


def tune(strategy: str, landscape: Landscape, seed: int, replicates: int | None) -> Tuner:
    """One tune; ``replicates`` None leaves the file's replicates at the default."""
    document = TUNING if replicates is None else {**TUNING, "replicates": replicates}
    config = BenchmarkConfig.model_validate(document)
    space = load_space(config, Path("calibration.yaml"))
    runner = Sessions(landscape, seed, config.max_replicates)
    tuner = Tuner(space, config, TuneSettings(), runner, tune_id="cal")
    tuner.run(strategy)
    assert tuner.halt is None, tuner.halt
    return tuner


def upper_bound(events: int, n: int, confidence: float = 0.95) -> float:
    """Exact (Clopper-Pearson) one-sided upper bound of a binomial rate."""
    lo, hi = events / n, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        tail = sum(math.comb(n, k) * mid**k * (1 - mid) ** (n - k) for k in range(events + 1))
        lo, hi = (mid, hi) if tail > 1 - confidence else (lo, mid)
    return hi


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flat", type=int, default=600, help="flat-landscape tunes per strategy")
    parser.add_argument("--winner", type=int, default=30, help="clear-winner tunes per cell")
    parser.add_argument("--strategies", nargs="+", default=["grid"], choices=sorted(STRATEGIES))
    args = parser.parse_args()
    default = BenchmarkConfig.model_fields["replicates"].default
    print(
        "| strategy | flat tunes (n = 5) | trials per tune | selection rounds with an "
        "'improved' candidate | false moves | 95% upper bound | seconds |"
    )
    print("|---|---|---|---|---|---|---|")
    for strategy in args.strategies:
        t0 = time.monotonic()
        trials = improved = moved = 0
        for seed in range(args.flat):
            tuner = tune(strategy, flat, seed, 5)
            trials += tuner.spent.trials
            improved += len(
                {c.round for c in tuner.candidates if c.decision in ("selected", "unconfirmed")}
            )
            moved += tuner.incumbent != {"x": 0}
        print(
            f"| {strategy} | {args.flat} | {trials / args.flat:.0f} | {improved} | "
            f"{moved} ({100 * moved / args.flat:.2f}%) | "
            f"{100 * upper_bound(moved, args.flat):.2f}% | {time.monotonic() - t0:.0f} |",
            flush=True,
        )
    if not args.winner:
        return
    print()
    print("| strategy | replicates | winner tunes | x=3 selected | trials per tune | seconds |")
    print("|---|---|---|---|---|---|")
    for strategy in args.strategies:
        for replicates in (5, None):
            t0 = time.monotonic()
            seeds = range(10_000, 10_000 + args.winner)
            tuners = [tune(strategy, winner, seed, replicates) for seed in seeds]
            selected = sum(t.incumbent == {"x": WINNER} for t in tuners)
            print(
                f"| {strategy} | {replicates or f'{default} (default)'} | {args.winner} | "
                f"{selected} ({100 * selected / args.winner:.0f}%) | "
                f"{sum(t.spent.trials for t in tuners) / args.winner:.0f} | "
                f"{time.monotonic() - t0:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
