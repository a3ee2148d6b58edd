"""Calibrate ``history --changes`` (stats/changepoints.py) on synthetic series of known truth.

A series is ``runs`` run medians: each run has a machine factor uniform in +-``machine`` and
``trials`` trials with noise of CV ``cv`` (the run's figure is their median), and from the
middle run on the truth is ``step`` times higher. For each cell it counts, over ``series``
seeded series: the series where exactly the true step was found and nothing else, those where
the true step was found with another one, those where only a neighbour of it was named (one
run early or late), those where only another place was named, and those where nothing was
found. ``step 1`` is the A/A case:
anything found is a false positive.

    python benchmarks/changepoint_calibration.py               # ~1 minute
    python benchmarks/changepoint_calibration.py --series 2000  # tighter
"""

from __future__ import annotations

import argparse

import numpy as np

from pytest_benchmark_agent.stats.changepoints import find_change_points

#: (runs, trials, step): the issue's scenario (12 runs, +8%), fewer trials, A/A, a longer series.
CELLS = (
    (12, 5, 1.08),
    (12, 3, 1.08),
    (12, 5, 1.04),
    (12, 5, 1.0),
    (30, 5, 1.08),
    (30, 5, 1.0),
)


def series(
    rng: np.random.Generator, runs: int, trials: int, step: float, cv: float, machine: float
) -> list[float]:
    out = []
    for k in range(runs):
        truth = step if k >= runs // 2 else 1.0
        factor = rng.uniform(1 - machine, 1 + machine)
        out.append(float(np.median(truth * factor * rng.normal(1.0, cv, trials))))
    return out


def _kind(found: set[int], true: int | None) -> int:
    """The column a series' outcome counts in."""
    if not found:
        return 4
    if true in found:
        return 0 if found == {true} else 1
    near = true is not None and found <= {true - 1, true + 1}
    return 2 if near else 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=300)
    parser.add_argument("--cv", type=float, default=0.03)
    parser.add_argument("--machine", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=38)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{args.series} series per cell; trial CV {args.cv:.0%}, machine +-{args.machine:.0%}")
    print(
        "| runs | trials | step | exactly the step | the step and another | "
        "a neighbour only | another place only | nothing |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for runs, trials, step in CELLS:
        counts = [0, 0, 0, 0, 0]
        for _ in range(args.series):
            found = {
                c.index
                for c in find_change_points(series(rng, runs, trials, step, args.cv, args.machine))
            }
            kind = _kind(found, runs // 2 if step != 1.0 else None)
            counts[kind] += 1
        cells = " | ".join(f"{n} ({n / args.series:.0%})" for n in counts)
        print(f"| {runs} | {trials} | {step:g} | {cells} |")


if __name__ == "__main__":
    main()
