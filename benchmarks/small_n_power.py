"""Power at small n on independent noise (issue 35, point 6): the verdict rule against
Mann-Whitney U and the paired t on the same samples.

Synthetic metrics of known truth: log-normal noise of the given CV on every value (independent
between the two runs of a block), optionally a random-walk drift shared by both runs of a block
(3% per block); the treatment multiplies by 1 + effect. For each cell the same samples go to:

* **rule**: ``analyze_run`` (the block-swap rank test and the interval beyond the 1% band);
* **test alone**: the same test at p <= 0.05 (no band);
* **Mann-Whitney**: two-sided U at p < 0.05 on the 2n values, blocks ignored;
* **paired t**: two-sided paired t on the log ratios at p < 0.05.

A/A counts a call in either direction, power a ``regressed`` (or p below the level with the
treatment's median higher). Rates with 95% Wilson intervals.

    python benchmarks/small_n_power.py                 # ~3 minutes here
    python benchmarks/small_n_power.py --runs 2000     # tighter
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats
from scipy.stats import binomtest

from pytest_benchmark_agent.stats.analysis import Observation, PlainMetricRule, analyze_run

SPEC = {"t": PlainMetricRule(primary=True, min_replicates=2)}
CELLS = ((0.02, 0.05), (0.10, 0.10))  # (CV, effect): the two cases
BLOCKS = (6, 7, 10, 20)
RULES = ("rule", "test alone", "Mann-Whitney", "paired t")


def wilson(hits: int, total: int) -> str:
    """``hits/total rate% [low, high]``: the 95% Wilson interval of a rate."""
    ci = binomtest(hits, total).proportion_ci(confidence_level=0.95, method="wilson")
    return f"{hits}/{total} {hits / total:.0%} [{ci.low:.0%}, {ci.high:.0%}]"


def calls(control: np.ndarray, treated: np.ndarray) -> dict[str, int]:
    """+1 (higher), -1 (lower) or 0 per rule on one pair of samples."""
    obs = [Observation("a", k, None, float(v)) for k, v in enumerate(control)]
    obs += [Observation("b", k, None, float(v)) for k, v in enumerate(treated)]
    verdict = analyze_run({"t": obs}, SPEC, ["a", "b"], "a").verdicts["t"]["b"]
    up = 1 if np.median(treated) > np.median(control) else -1
    d = np.log(treated) - np.log(control)
    return {
        "rule": {"regressed": 1, "improved": -1}.get(verdict.verdict, 0),
        "test alone": up if verdict.p is not None and verdict.p <= 0.05 else 0,
        "Mann-Whitney": up if stats.mannwhitneyu(treated, control).pvalue < 0.05 else 0,
        "paired t": (1 if d.mean() > 0 else -1) if stats.ttest_1samp(d, 0).pvalue < 0.05 else 0,
    }


def cell(cv: float, effect: float, n: int, drift: float, runs: int, rng) -> dict[str, int]:
    """Hits per rule over ``runs`` experiments (any call on A/A, a higher call otherwise)."""
    hits = dict.fromkeys(RULES, 0)
    sd = np.sqrt(np.log1p(cv * cv))
    for _ in range(runs):
        walk = np.exp(np.cumsum(rng.normal(0, drift, n))) if drift else np.ones(n)
        control = 10 * walk * np.exp(rng.normal(0, sd, n))
        treated = 10 * (1 + effect) * walk * np.exp(rng.normal(0, sd, n))
        for rule, said in calls(control, treated).items():
            hits[rule] += said != 0 if effect == 0 else said == 1
    return hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="experiments per cell")
    parser.add_argument("--seed", type=int, default=35)
    args = parser.parse_args()
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    print(f"| noise | drift | n | truth | {' | '.join(RULES)} | rule / MW |")
    print("|---|---|---|---|" + "---|" * (len(RULES) + 1))
    for cv, effect in CELLS:
        for drift in (0.0, 0.03):
            for n in BLOCKS:
                for truth in (0.0, effect):
                    hits = cell(cv, truth, n, drift, args.runs, rng)
                    ratio = (
                        f"{hits['rule'] / hits['Mann-Whitney']:.2f}x"
                        if truth and hits["Mann-Whitney"]
                        else "-"
                    )
                    label = "A/A" if truth == 0 else f"+{truth:.0%}"
                    print(
                        f"| CV {cv:.0%} | {drift:.0%} | {n} | {label} | "
                        + " | ".join(wilson(hits[r], args.runs) for r in RULES)
                        + f" | {ratio} |",
                        flush=True,
                    )
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
