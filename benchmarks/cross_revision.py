"""Cross-revision cells of the CI gate (issue 34): one interleaved session against a recorded
baseline, on synthetic metrics of known truth, judged by the project's own functions.

Each cell is a machine shift between CI jobs, a drift within a job, a noise CV and n blocks
(replicates). Three designs judge the same code (A/A) and a real +5%:

* ``in-run``: both revisions in one job, interleaved in n blocks (the project's paired in-run
  rule, :func:`.analysis.analyze_run`); the job's machine factor multiplies both.
* ``recorded, 1 run``: the baseline revision measured in its own job (n values), this revision
  in another whose machine is ``shift`` slower; compared unpaired as ``cross_verdicts`` does,
  then :func:`.evidence.across_runs` with no between-run spread known (the allowance, 5%).
* ``recorded, 3 runs``: the same, with two more recorded runs of the baseline revision on
  machines whose factors spread by ``shift`` (log-normal sd), so their spread enters the interval.

The machine model: every job's machine factor is log-normal with sd ``shift``; this job's is
the baseline job's times ``1 + shift`` (a slower machine by the size of the spread). Drift is a
random walk of sd ``drift`` per block, its own in each job; noise is
:func:`stats_calibration.synthetic_noise`, normal with sd ``cv`` on the log scale (``--noise
burst`` adds the right-tail bursts of the other synthetic cells). The gate is
:func:`.evidence.judge_metric` with a noise threshold of 1% and ``fail_threshold`` declared the
same (the default before issue 44, which these figures were first measured with): ``regressed``
on A/A is a false regression; on +5% it is the detection.

    python benchmarks/cross_revision.py --runs 100          # the table (about 4 minutes)
    python benchmarks/stats_calibration.py --cross-revision 100   # the same
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence

import numpy as np
from scipy.stats import binomtest
from stats_calibration import synthetic_noise

from pytest_benchmark_agent.config.metric import MetricSpec
from pytest_benchmark_agent.judge import evidence
from pytest_benchmark_agent.stats.analysis import Observation, analyze_run

SPEC = MetricSpec(direction="lower", primary=True, fail_threshold=0.01)
DESIGNS = ("in-run", "recorded, 1 run", "recorded, 3 runs")
EFFECT = 0.05
#: The noise shape (``stats_calibration.NOISE_KINDS``), set from ``--noise``: ``normal`` makes
#: the CV column the metric's CV; ``burst`` adds a right tail on top of it.
NOISE = ["normal"]
#: Replicates of the other session are numbered past this run's, as ``cross_verdicts`` does,
#: so the two sessions never pair as blocks.
OFFSET = 1_000_000


def job(rng: np.random.Generator, n: int, cv: float, drift: float, factor: float) -> np.ndarray:
    """n values of one revision measured alone in one job: noise, drift, the machine."""
    walk = np.cumsum(rng.normal(0.0, drift, n)) if drift else np.zeros(n)
    return factor * np.exp(walk + synthetic_noise(rng, (n,), cv, NOISE[0]))


def in_run(rng: np.random.Generator, n: int, cv: float, drift: float, effect: float) -> str:
    """The gate's outcome for both revisions interleaved in one job (alternating order)."""
    walk = np.cumsum(rng.normal(0.0, drift, n)) if drift else np.zeros(n)
    noise = synthetic_noise(rng, (2, n), cv, NOISE[0])
    factor = math.exp(rng.normal(0.0, 0.1))  # the job's machine: cancels within blocks
    base = factor * np.exp(walk + noise[0])
    this = factor * np.exp(walk + noise[1]) * (1 + effect)
    obs = [Observation("base", k, None, float(v)) for k, v in enumerate(base)]
    obs += [Observation("this", k, None, float(v)) for k, v in enumerate(this)]
    verdict = analyze_run({"m": obs}, {"m": SPEC}, ["base", "this"], "base").verdicts["m"]["this"]
    return evidence.judge_metric("m", verdict, "m", SPEC).outcome


def recorded(
    rng: np.random.Generator,
    n: int,
    cv: float,
    drift: float,
    shift: float,
    effect: float,
    runs: int,
) -> str:
    """The gate's outcome against a recorded baseline with ``runs`` recorded runs of it."""
    factors = np.exp(rng.normal(0.0, shift, runs)) if shift else np.ones(runs)
    history = [job(rng, n, cv, drift, float(f)) for f in factors]
    base = history[0]
    this = job(rng, n, cv, drift, float(factors[0]) * (1 + shift)) * (1 + effect)
    obs = [Observation("base", k, None, float(v)) for k, v in enumerate(base)]
    obs += [Observation("this", OFFSET + k, None, float(v)) for k, v in enumerate(this)]
    verdict = analyze_run({"m": obs}, {"m": SPEC}, ["base", "this"], "base").verdicts["m"]["this"]
    medians = [[float(np.median(values)) for values in history]]
    spread = evidence.spread_of(medians, None, f"{runs} recorded run(s)")
    judged = evidence.across_runs(verdict, spread, SPEC)
    return evidence.judge_metric("m", judged, "m", SPEC).outcome


def outcome(
    design: str,
    rng: np.random.Generator,
    n: int,
    cv: float,
    drift: float,
    shift: float,
    effect: float,
) -> str:
    if design == "in-run":
        return in_run(rng, n, cv, drift, effect)
    return recorded(rng, n, cv, drift, shift, effect, 1 if design.endswith("1 run") else 3)


def wilson(hits: int, total: int) -> str:
    """``hits/total (low-high%)``: the count and its 95% Wilson interval."""
    ci = binomtest(hits, total).proportion_ci(confidence_level=0.95, method="wilson")
    return f"{hits}/{total} ({100 * ci.low:.0f}-{100 * ci.high:.0f}%)"


def cells(
    runs: int,
    seed: int,
    designs: Sequence[str],
    shifts: Sequence[float],
    drifts: Sequence[float],
    cvs: Sequence[float],
    ns: Sequence[int],
) -> list[list[str]]:
    """Rows (design, shift, drift, CV, n, A/A regressed, passed, unjudged, +5% regressed)."""
    rows = []
    for design in designs:
        for shift in shifts:
            for drift in drifts:
                for cv in cvs:
                    for n in ns:
                        rng = np.random.default_rng([seed, round(1000 * shift), n])
                        same = [outcome(design, rng, n, cv, drift, shift, 0.0) for _ in range(runs)]
                        more = [
                            outcome(design, rng, n, cv, drift, shift, EFFECT) for _ in range(runs)
                        ]
                        rows.append(
                            [
                                design,
                                f"{100 * shift:g}%",
                                f"{100 * drift:g}%",
                                f"{100 * cv:g}%",
                                str(n),
                                wilson(same.count("regressed"), runs),
                                f"{same.count('passed')}",
                                f"{same.count('unjudged')}",
                                wilson(more.count("regressed"), runs),
                            ]
                        )
    return rows


HEADER = [
    "design",
    "shift",
    "drift/block",
    "CV",
    "n",
    "A/A regressed (95% CI)",
    "A/A passed",
    "A/A unjudged",
    "+5% regressed (95% CI)",
]


def print_table(args: argparse.Namespace) -> None:
    """Run the cells of ``args`` and print the markdown table with its run count and time."""
    started = time.perf_counter()
    print(
        f"cross-revision cells: {args.runs} A/A and {args.runs} +5% sessions per cell, "
        f"{args.noise} noise, seed {args.seed}\n"
    )
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER))
    designs = [d for d in DESIGNS if not args.design or d in args.design]
    NOISE[0] = args.noise
    for row in cells(args.runs, args.seed, designs, args.shift, args.drift, args.cv, args.n):
        print("| " + " | ".join(row) + " |", flush=True)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The cells to run: every combination of the values given (default: issue 34's)."""
    parser.add_argument("--shift", type=float, nargs="+", default=[0.0, 0.03, 0.10])
    parser.add_argument("--drift", type=float, nargs="+", default=[0.0, 0.02])
    parser.add_argument("--cv", type=float, nargs="+", default=[0.02, 0.10])
    parser.add_argument("--n", type=int, nargs="+", default=[7, 15])
    parser.add_argument("--design", nargs="+", choices=DESIGNS, help="default: all three")
    parser.add_argument("--noise", choices=("normal", "burst"), default="normal")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="sessions per cell and truth")
    parser.add_argument("--seed", type=int, default=0)
    add_arguments(parser)
    print_table(parser.parse_args(argv))


if __name__ == "__main__":
    main()
