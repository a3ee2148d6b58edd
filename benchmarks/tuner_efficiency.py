"""How many trials each tuning strategy spends, and how often it selects a point that is not
truly better than the one it replaced, on a synthetic objective with a known optimum.

The objective imitates a query-time knob: latency ``lat(h, c)`` falls with a "heap factor"
``h`` (0.6 .. 2.2, 9 values) towards a plateau and rises with a "cut" ``c`` (5 .. 35, 7
values); recall falls with ``h`` and recovers with ``c``, and the constraint is
``recall >= 0.99``, so the constrained optimum sits on the edge of the feasible region, next to
points that are nearly as fast. Timing noise looks like a loaded machine: each sample is
multiplied by a lognormal (sigma 3%), 5% of samples by a spike of 1.2-1.5x, and every sample
of a block by the block's own drift (sigma 2%, shared by the points measured together).
Recall is exact (a fixed query set), as in the SEISMIC example.

Strategies, each from the start (h=0.6, c=20) over many seeded repetitions:

- ours: ``grid``, ``refine``, ``coordinate`` of ``pytest_benchmark_agent.tune.strategies``, called
  in-process with a simulated round runner (the same selection code as a real tune; only
  the pytest session of each round is replaced by the simulation);
- plain grid: every point, 5 replicates, the feasible point with the best observed median;
- Optuna (if installed): its default sampler (TPE, with the constraint), 30 points of 5
  replicates each, taking the best observed feasible trial.

A "selection" is each change of the incumbent (for plain grid and Optuna: each new
best-so-far); it is "not truly better" when the true latency of the new point is not below
its predecessor's, or the new point truly breaks the constraint.

    python benchmarks/tuner_efficiency.py                  # 200 repetitions, a few minutes
    python benchmarks/tuner_efficiency.py --reps 50 --replicates 10
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from collections.abc import Callable
from functools import partial
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

H_VALUES = [round(0.6 + 0.2 * i, 1) for i in range(9)]
C_VALUES = [5, 10, 15, 20, 25, 30, 35]
START = {"h": 0.6, "c": 20}
BOUND = 0.99
OPTUNA_POINTS = 30

TUNING = {
    "name": "synthetic",
    "params": dict(START),
    "search_space": {"h": H_VALUES, "c": C_VALUES},
    "objective": {"metric": "p50_ms", "direction": "lower"},
    "constraints": [f"recall >= {BOUND}"],
    "stages": [
        {
            "name": "search",
            "kind": "measure",
            "cmd": "search {h} {c}",
            "metrics_from": {"stdout": True, "fields": ["p50_ms", "recall"]},
        }
    ],
    "metrics": {
        "p50_ms": {"direction": "lower", "noise_threshold": 0.02},
        "recall": {"direction": "higher"},
    },
}


def latency(point: dict[str, Any]) -> float:
    """True median latency (ms): a saturating fall with h, a linear cost of c."""
    return 1.0 + 2.0 * math.exp(-1.5 * (point["h"] - 0.6)) + 0.03 * point["c"]


def recall(point: dict[str, Any]) -> float:
    return 1 - 0.004 * (point["h"] - 0.6) ** 2 * (30 / point["c"])


def feasible(point: dict[str, Any]) -> bool:
    return recall(point) >= BOUND


def optimum() -> dict[str, Any]:
    points = [{"h": h, "c": c} for h in H_VALUES for c in C_VALUES]
    return min((p for p in points if feasible(p)), key=latency)


class Noise:
    """Loaded-machine timing noise: lognormal jitter, rare spikes, drift shared by a block."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def block(self) -> float:
        return math.exp(self.rng.gauss(0, 0.02))

    def sample(self, true: float, drift: float) -> float:
        spike = self.rng.uniform(1.2, 1.5) if self.rng.random() < 0.05 else 1.0
        return true * drift * spike * math.exp(self.rng.gauss(0, 0.03))


class SimulatedRounds:
    """A round runner for the tuner: each round's record built from the synthetic objective,
    in blocks (replicate k of every point measured together, under one drift)."""

    def __init__(self, noise: Noise, replicates: int):
        self.noise = noise
        self.replicates = replicates

    def __call__(self, request: RoundRequest) -> RoundOutcome:
        trials = []
        for rep in range(self.replicates):
            drift = self.noise.block()
            for point in request.points:
                label = point_label(point)
                trials.append(
                    {
                        "id": f"search[point={label}-rep{rep}]",
                        "treatment": label,
                        "replicate": rep,
                        "seed": None,
                        "status": "passed",
                        "stage": "search",
                        "wall_s": 0.0,
                        "metrics": {
                            "p50_ms": self.noise.sample(latency(point), drift),
                            "recall": recall(point),
                        },
                    }
                )
        record = RunRecord.from_dict({"state": "complete", "trials": trials})
        return RoundOutcome(request.run_id, record, 0.0)


Run = Callable[[int, int], tuple[int, list[dict[str, Any]]]]  # (seed, replicates) -> result


def run_ours(strategy: str, seed: int, replicates: int) -> tuple[int, list[dict[str, Any]]]:
    config = BenchmarkConfig.model_validate({**TUNING, "replicates": replicates})
    space = load_space(config, Path("synthetic.yaml"))
    runner = SimulatedRounds(Noise(seed), replicates)
    tuner = Tuner(space, config, TuneSettings(), runner, tune_id="sim")
    tuner.run(strategy)
    return tuner.spent.trials, [step["point"] for step in tuner.path]


def observe(point: dict[str, Any], noise: Noise, replicates: int) -> float:
    """Median of ``replicates`` samples of one point measured on its own (its own blocks)."""
    return statistics.median(noise.sample(latency(point), noise.block()) for _ in range(replicates))


def best_so_far(evaluated: list[tuple[dict[str, Any], float]]) -> list[dict[str, Any]]:
    """The sequence of incumbents a "take the best observed" rule goes through."""
    path = [START]
    best = math.inf
    for point, value in evaluated:
        if feasible(point) and value < best:
            best = value
            if point != path[-1]:
                path.append(point)
    return path


def run_plain_grid(seed: int, replicates: int) -> tuple[int, list[dict[str, Any]]]:
    noise = Noise(seed)
    points = [START] + [
        {"h": h, "c": c} for h in H_VALUES for c in C_VALUES if {"h": h, "c": c} != START
    ]
    drifts = [noise.block() for _ in range(replicates)]
    values = [statistics.median(noise.sample(latency(p), d) for d in drifts) for p in points]
    return len(points) * replicates, best_so_far(list(zip(points, values, strict=True)))


def run_optuna(seed: int, replicates: int) -> tuple[int, list[dict[str, Any]]]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    noise = Noise(seed)
    evaluated: list[tuple[dict[str, Any], float]] = []

    def objective(trial: Any) -> float:
        point = {
            "h": H_VALUES[trial.suggest_int("h", 0, len(H_VALUES) - 1)],
            "c": C_VALUES[trial.suggest_int("c", 0, len(C_VALUES) - 1)],
        }
        value = observe(point, noise, replicates)
        if hasattr(trial, "set_constraint"):  # Optuna >= 5; older ones take constraints_func
            trial.set_constraint("recall", BOUND - recall(point))
        else:
            trial.set_user_attr("violation", BOUND - recall(point))
        evaluated.append((point, value))
        return value

    if hasattr(optuna.trial.Trial, "set_constraint"):
        sampler = optuna.samplers.TPESampler(seed=seed)
    else:
        sampler = optuna.samplers.TPESampler(
            seed=seed, constraints_func=lambda t: (t.user_attrs["violation"],)
        )
    study = optuna.create_study(direction="minimize", sampler=sampler)
    study.enqueue_trial({"h": H_VALUES.index(START["h"]), "c": C_VALUES.index(START["c"])})
    study.optimize(objective, n_trials=OPTUNA_POINTS)
    return OPTUNA_POINTS * replicates, best_so_far(evaluated)


def score(runs: list[tuple[int, list[dict[str, Any]]]], best: dict[str, Any]) -> dict[str, float]:
    selections = wrong = at_optimum = 0
    regrets = []
    for _, path in runs:
        for old, new in zip(path[:-1], path[1:], strict=True):
            selections += 1
            wrong += not (latency(new) < latency(old) and feasible(new))
        final = path[-1]
        at_optimum += final == best
        regrets.append(100 * (latency(final) / latency(best) - 1))
    return {
        "trials": statistics.mean(t for t, _ in runs),
        "selections": selections / len(runs),
        "wrong": 100 * wrong / selections if selections else 0.0,
        "optimum": 100 * at_optimum / len(runs),
        "regret": statistics.mean(regrets),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200, help="seeded repetitions per strategy")
    parser.add_argument("--replicates", type=int, default=5, help="replicates per point")
    args = parser.parse_args()
    best = optimum()
    contenders: dict[str, Run] = {f"ours: {name}": partial(run_ours, name) for name in STRATEGIES}
    contenders["plain grid (best observed)"] = run_plain_grid
    try:
        import optuna  # noqa: F401

        contenders[f"Optuna TPE, {OPTUNA_POINTS} points (best observed)"] = run_optuna
    except ImportError:
        print("(Optuna is not installed: pip install optuna to add its row)")
    print(
        f"synthetic objective: {len(H_VALUES)} x {len(C_VALUES)} lattice, start "
        f"{point_label(START)} ({latency(START):.3f} ms), constrained optimum "
        f"{point_label(best)} ({latency(best):.3f} ms, recall {recall(best):.4f}); "
        f"{args.reps} seeded repetitions, {args.replicates} replicates per point\n"
    )
    print(
        "| strategy | trials used (mean) | selections per tune | selections not truly "
        "better | ends at the optimum | regret vs optimum (mean) | seconds |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, run in contenders.items():
        t0 = time.perf_counter()
        row = score([run(seed, args.replicates) for seed in range(args.reps)], best)
        print(
            f"| {name} | {row['trials']:.0f} | {row['selections']:.2f} | {row['wrong']:.1f}% "
            f"| {row['optimum']:.0f}% | {row['regret']:.2f}% | "
            f"{time.perf_counter() - t0:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
