"""Calibrate the verdict rule on real timings of this machine and print the table.

Collects wall time and CPU time (user+sys from the child's rusage) of a subprocess doing a
fixed amount of CPU work (~30 ms), at its normal size (twice: A and A', for A/A) and with about
+2% and +5% work, in interleaved blocks (the four runs of a block in a seeded random order).
It does so on the machine as it is ("quiet") and with one busy-loop process per CPU
("loaded"). Then it resamples experiments of n = 5, 10, 20 blocks (random blocks, kept in time
order), optionally multiplied by a slow random-walk drift shared by the runs of a block, and
reports, for each rule, how often it calls a change: on A/A that is the false-positive rate, on
+2%/+5% (counted only in the right direction) the power.

Rules: ours (pytest_benchmark_agent.stats.analysis.analyze_run), plain Mann-Whitney U at p<0.05
(what benchstat does), a fixed 5% threshold on means, and ours in sequential mode
(sequential_decision, 5 to 20 blocks).

    python benchmarks/stats_calibration.py                     # ~4-5 minutes
    python benchmarks/stats_calibration.py --blocks 1000 --experiments 4000   # tighter
    python benchmarks/stats_calibration.py --save s.json; ... --load s.json   # reuse samples
    python benchmarks/stats_calibration.py --issue23 300       # issue 23's synthetic cells
    python benchmarks/stats_calibration.py --mde-table 400     # refit mde.MDE_TERMS
    python benchmarks/stats_calibration.py --counters          # counter arms, ~15 minutes
    python benchmarks/stats_calibration.py --cross-revision 100   # issue 34: cross_revision.py
    python benchmarks/stats_calibration.py --counters --counter-blocks 40 --experiments 1000

Counter arms (``--counters``): the same workload (50,000 iterations) with +0.5%, +1% and +2%
of its instructions; 6 x ``--counter-blocks`` blocks of plain runs (wall and CPU time), then
``--counter-blocks`` blocks under the counting backend (engine/counters.py: instructions and
the counted run time; one hash seed per block, as the engine sets it). A/A and power for
n = 3, 5, 7 (the default) and 10, blocks drawn with replacement where n exceeds those
collected, by ours and by a bare 95% t interval beyond the noise band (no test: what a rule
without the exact test's 2 / 2^n floor could do at n = 3).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from pytest_benchmark_agent.config.metric import COUNTER_NOISE_THRESHOLD, MetricSpec
from pytest_benchmark_agent.engine.counters import Counting, backend
from pytest_benchmark_agent.judge.reproduce import reproduction
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.stats.analysis import Observation, PlainMetricRule, analyze_run
from pytest_benchmark_agent.stats.mde import MDE_POWER
from pytest_benchmark_agent.stats.sequential import Looks, look_schedule, sequential_decision

WORK = "import sys\nx = 0\nfor i in range(int(sys.argv[1])):\n    x += i\n"
BASE_ITERATIONS = 250_000
ARMS = ("A", "A'", "+2%", "+5%")
EFFECTS = {"A/A": "A'", "+2%": "+2%", "+5%": "+5%"}
SPEC = {"t": PlainMetricRule(direction="lower", primary=True)}
TREATMENTS = ("control", "treatment")


def run_once(iterations: int) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user+sys of the child) of one workload process."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-S", "-c", WORK, str(iterations)])
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(f"workload exited with status {status}")
    return wall, usage.ru_utime + usage.ru_stime


def workload_sizes() -> dict[str, int]:
    """Iterations per arm so that the whole process (start-up included) does +2% / +5% work."""
    empty = np.percentile([run_once(0)[1] for _ in range(15)], 25)
    full = np.percentile([run_once(BASE_ITERATIONS)[1] for _ in range(15)], 25)
    per_iteration = (full - empty) / BASE_ITERATIONS

    def grown(fraction: float) -> int:
        return int(BASE_ITERATIONS + fraction * full / per_iteration)

    return {"A": BASE_ITERATIONS, "A'": BASE_ITERATIONS, "+2%": grown(0.02), "+5%": grown(0.05)}


def collect(blocks: int, sizes: dict[str, int], load: int, seed: int) -> dict[str, dict]:
    """Interleaved blocks of the four arms, under ``load`` busy-loop processes."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)]
    try:
        order = random.Random(seed)
        out = {arm: {"wall": [], "cpu": []} for arm in ARMS}
        for _ in range(blocks):
            arms = list(ARMS)
            order.shuffle(arms)
            for arm in arms:
                wall, cpu = run_once(sizes[arm])
                out[arm]["wall"].append(wall)
                out[arm]["cpu"].append(cpu)
        return out
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()


Rule = Callable[[np.ndarray, np.ndarray], int]


def rule_ours(control: np.ndarray, treatment: np.ndarray) -> int:
    """+1 regressed, -1 improved, 0 otherwise, by analyze_run on paired blocks."""
    verdict = analyze_run(_observations(control, treatment), SPEC, TREATMENTS, "control")
    return _sign(verdict.verdicts["t"]["treatment"].verdict)


def rule_mann_whitney(control: np.ndarray, treatment: np.ndarray) -> int:
    """Plain two-sided Mann-Whitney U at p < 0.05, direction from the medians."""
    p = stats.mannwhitneyu(treatment, control, alternative="two-sided").pvalue
    if p >= 0.05:
        return 0
    return 1 if np.median(treatment) > np.median(control) else -1


def rule_fixed(control: np.ndarray, treatment: np.ndarray) -> int:
    """A change whenever the means differ by more than 5%."""
    ratio = treatment.mean() / control.mean()
    return 1 if ratio > 1.05 else -1 if ratio < 0.95 else 0


def sequential(control: np.ndarray, treatment: np.ndarray, lo: int, hi: int) -> tuple[int, int]:
    """Verdict sign and blocks used by sequential_decision at its looks from lo to hi blocks.

    Only the looks are evaluated: between looks sequential_decision never stops.
    """
    for k in look_schedule(lo, hi):
        decision = sequential_decision(
            _observations(control[:k], treatment[:k]),
            SPEC,
            TREATMENTS,
            "control",
            blocks_done=k,
            looks=Looks(lo, hi),
        )
        if decision.stop:
            return _sign(decision.analysis.verdicts["t"]["treatment"].verdict), k
    raise AssertionError("sequential_decision must stop at max_blocks")


def _observations(control: np.ndarray, treatment: np.ndarray) -> dict[str, list[Observation]]:
    obs = [Observation("control", k, None, float(v)) for k, v in enumerate(control)]
    obs += [Observation("treatment", k, None, float(v)) for k, v in enumerate(treatment)]
    return {"t": obs}


def _sign(verdict: str) -> int:
    return {"regressed": 1, "improved": -1}.get(verdict, 0)


def experiments(
    total: int, n: int, count: int, drift: float, rng: np.random.Generator
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(block indices in time order, per-block drift factor) for ``count`` experiments."""
    out = []
    for _ in range(count):
        idx = np.sort(rng.choice(total, n, replace=False))
        walk = np.exp(np.cumsum(rng.normal(0.0, drift, n))) if drift else np.ones(n)
        out.append((idx, walk))
    return out


def rate(hits: list[int], wanted: int | None) -> float:
    """Share of experiments calling a change (any direction when ``wanted`` is None)."""
    arr = np.array(hits)
    return float(np.mean(arr != 0 if wanted is None else arr == wanted))


def describe(name: str, pool: dict[str, dict]) -> list[str]:
    """Noise of the pool: CV, lag-1 autocorrelation, realised effect of each arm."""
    lines = []
    for metric in ("wall", "cpu"):
        base = np.array(pool["A"][metric])
        paired = np.log(np.array(pool["A'"][metric])) - np.log(base)
        parts = []
        for arm in ARMS[1:]:
            x = np.array(pool[arm][metric])
            parts.append(f"{arm} {np.median(x) / np.median(base) - 1:+.1%}")
        lag1 = np.corrcoef(base[:-1], base[1:])[0, 1]
        lines.append(
            f"{name:7} {metric}_s: median {np.median(base) * 1e3:.1f} ms, "
            f"CV {base.std() / base.mean():.0%}, lag-1 autocorrelation {lag1:.2f}, "
            f"paired A'/A log-ratio sd {paired.std():.3f}; realised median effect "
            + ", ".join(parts)
        )
    return lines


def evaluate(pool: dict[str, dict], args: argparse.Namespace) -> list[list[str]]:
    """Rows of the table for one pool (one machine condition)."""
    rows = []
    rng = np.random.default_rng(args.seed)
    total = len(pool["A"]["wall"])
    rules: dict[str, Rule] = {
        "ours": rule_ours,
        "Mann-Whitney": rule_mann_whitney,
        "fixed 5%": rule_fixed,
    }
    for metric in ("wall", "cpu"):
        for drift in (0.0, args.drift):
            for n in (5, 10, 20):
                plan = experiments(total, n, args.experiments, drift, rng)
                hits: dict[str, dict[str, list[int]]] = {r: {e: [] for e in EFFECTS} for r in rules}
                for effect, arm in EFFECTS.items():
                    a, b = np.array(pool["A"][metric]), np.array(pool[arm][metric])
                    for idx, walk in plan:
                        for name, rule in rules.items():
                            hits[name][effect].append(rule(a[idx] * walk, b[idx] * walk))
                for name in rules:
                    rows.append(
                        [
                            metric,
                            f"{drift:.0%}",
                            str(n),
                            name,
                            *(
                                f"{rate(hits[name][e], None if e == 'A/A' else 1):.1%}"
                                for e in EFFECTS
                            ),
                            "",
                        ]
                    )
            plan = experiments(total, args.max_blocks, args.seq_experiments, drift, rng)
            seq: dict[str, list[int]] = {e: [] for e in EFFECTS}
            used: list[int] = []
            for effect, arm in EFFECTS.items():
                a, b = np.array(pool["A"][metric]), np.array(pool[arm][metric])
                for idx, walk in plan:
                    sign, k = sequential(a[idx] * walk, b[idx] * walk, 5, args.max_blocks)
                    seq[effect].append(sign)
                    used.append(k)
            rows.append(
                [
                    metric,
                    f"{drift:.0%}",
                    f"5..{args.max_blocks}",
                    "ours, sequential",
                    *(f"{rate(seq[e], None if e == 'A/A' else 1):.1%}" for e in EFFECTS),
                    f"{np.mean(used):.1f}",
                ]
            )
    return rows


#: Noise shapes on the log scale: (share of runs in a right-tail burst, the burst's mean in
#: units of ``cv``, the normal part's sd in units of ``cv``).
NOISE_KINDS = {"burst": (0.1, 3.0, 1.0), "normal": (0.0, 0.0, 1.0), "heavy": (0.3, 5.0, 0.4)}


def synthetic_noise(
    rng: np.random.Generator, shape: tuple[int, ...], cv: float, kind: str = "burst"
) -> np.ndarray:
    """Log-scale noise like a timing's: normal with sd ``cv``, plus a right-tail burst (10% of
    runs slowed by an exponential factor of mean 3 ``cv``); ``kind`` picks another shape of
    :data:`NOISE_KINDS` (plain normal; 30% of runs in bursts of mean 12.5 times the normal sd)."""
    share, mean, sd = NOISE_KINDS[kind]
    burst = (rng.random(shape) < share) * rng.exponential(mean * cv, shape)
    return rng.normal(0.0, sd * cv, shape) + burst


def synthetic_run(
    rng: np.random.Generator,
    n: int,
    effect: float,
    *,
    cv: float = 0.05,
    drift: float = 0.0,
    position: float = 0.0,
    balanced: bool = True,
    quantum: float | None = None,
    kind: str = "burst",
) -> tuple[np.ndarray, np.ndarray]:
    """Control and treatment values of n blocks: multiplicative ``effect``, noise, a random-walk
    drift shared by a block, the first run of each block ``position`` slower (the plan's
    alternating order when ``balanced``, else the control always first), values rounded to
    ``quantum`` (ties); ``kind`` the noise's shape (:func:`synthetic_noise`)."""
    walk = np.cumsum(rng.normal(0.0, drift, n)) if drift else np.zeros(n)
    noise = synthetic_noise(rng, (2, n), cv, kind)
    control_first = (np.arange(n) % 2 == 0) if balanced else np.ones(n, dtype=bool)
    c = np.exp(walk + noise[0] + position * control_first)
    t = np.exp(walk + noise[1] + position * ~control_first) * (1 + effect)
    if quantum:
        c, t = np.round(c / quantum) * quantum, np.round(t / quantum) * quantum
    return c, t


def _verdict_of(c: np.ndarray, t: np.ndarray, threshold: float = 0.01) -> Any:
    spec = {"t": PlainMetricRule(direction="lower", primary=True, noise_threshold=threshold)}
    return analyze_run(_observations(c, t), spec, TREATMENTS, "control").verdicts["t"]["treatment"]


#: (noise kind, cv, n) of the MDE cells: the table's three shapes, and noise small beside the band.
MDE_CELLS = (
    ("burst", 0.05, 10),
    ("burst", 0.05, 20),
    ("normal", 0.05, 10),
    ("normal", 0.05, 20),
    ("heavy", 0.05, 10),
    ("heavy", 0.05, 20),
    ("burst", 0.005, 10),
)
#: Every n to 20 (the fitted (a, b) move along a ridge from one n to the next, so rows far
#: apart would interpolate off it), then two beyond.
MDE_UNITS = (*range(6, 21), 25, 30)


def mde_table(runs: int, seed: int) -> list[tuple[int, float, float, str]]:
    """Rows ``(n, a, b, powers)`` for ``mde.MDE_TERMS``: at each n, A/A runs of each shape
    of :data:`NOISE_KINDS` give the interval's lower edge, half-width ``w`` and the paired
    standard error ``se``; by shift equivariance a true effect d is detected when d exceeds the
    negated edge (plus the band, which cancels), so the power at the median MDE ``a w + b se``
    is read off the null runs. (a, b) on a grid minimises the worst miss of 80% over the three
    shapes."""
    grid = [(a / 100, b / 100) for a in range(0, 201, 2) for b in range(0, 401, 5)]
    rows = []
    for n in MDE_UNITS:
        rng = np.random.default_rng([seed, n])
        null = {}
        for kind in NOISE_KINDS:
            found = []
            for _ in range(runs):
                c, t = synthetic_run(rng, n, 0.0, cv=0.05, kind=kind)
                lo, hi = np.log(_verdict_of(c, t, threshold=0.0).ci)
                d = np.log(t) - np.log(c)
                found.append((-lo, (hi - lo) / 2, float(d.std(ddof=1)) / np.sqrt(n)))
            null[kind] = np.array(found).T

        fits = {ab: _powers(null, *ab) for ab in grid}
        (a, b), p = min(fits.items(), key=lambda f: max(abs(x - MDE_POWER) for x in f[1]))
        rows.append((n, a, b, "/".join(f"{x:.0%}" for x in p)))
    return rows


def _powers(null: dict[str, np.ndarray], a: float, b: float) -> list[float]:
    """Per shape, the share of A/A runs whose negated lower edge is below the median MDE."""
    return [
        float(np.mean(edge < np.median(a * width + b * se))) for edge, width, se in null.values()
    ]


def rerun_outcome(first: Any, second: Any) -> str:
    """What ``judge.reproduce.reproduction`` makes of a faithful rerun: ``contradicts``
    (UNRELIABLE), ``qualified`` (inconclusive, or could not have seen the effect) or
    ``reproduced``."""

    def view(run_id: str, verdict: Any) -> RunRecord:
        return RunRecord(
            run_id=run_id,
            name="rerun",
            state="complete",
            tag="RELIABLE",
            control="control",
            treatments=tuple(TREATMENTS),
        ).replace(verdicts={"t": {"treatment": verdict}})

    rule = {"t": MetricSpec(direction="lower", primary=True)}  # the engine's, with its tolerance
    check = reproduction(view("second", second), view("first", first), rule, [])
    return "contradicts" if check.problems else "qualified" if check.caveats else "reproduced"


def mde_cells(rng: np.random.Generator, runs: int) -> list[tuple[str, str, str, str]]:
    """Rows (cell, measured, target, met) of :data:`MDE_CELLS`: the median MDE reported by
    ``runs`` A/A runs, then the power at that true effect over ``runs`` more. At 500 runs a
    cell's sampling error is about +/-1.8 points of power (and the median MDE's own error
    adds to it), so the +/-3-point target wants ``--mde-check 2000``."""
    rows = []
    for kind, cv, n in MDE_CELLS:
        noise = {"kind": kind, "cv": cv}
        mdes = [_verdict_of(*synthetic_run(rng, n, 0.0, **noise)).mde for _ in range(runs)]
        mde = float(np.median(mdes))
        power = float(
            np.mean(
                [
                    _verdict_of(*synthetic_run(rng, n, mde, **noise)).verdict == "regressed"
                    for _ in range(runs)
                ]
            )
        )
        rows.append(
            (
                f"power at the median reported MDE ({mde:.1%}), {kind} noise cv {cv:.1%}, n={n}",
                f"{power:.1%}",
                "80% +/- 3%",
                "yes" if abs(power - MDE_POWER) <= 0.03 else "NO",
            )
        )
    return rows


def issue23_cells(experiments: int, seed: int) -> list[tuple[str, str, str, str]]:
    """Rows (cell, measured, target, met) for each point of issue 23, on synthetic metrics of
    known truth (seeded); ``experiments`` runs per cell."""
    rng = np.random.default_rng(seed)
    rows: list[tuple[str, str, str, str]] = []

    def share(hits: list[bool]) -> float:
        return float(np.mean(hits))

    def row(cell: str, value: float, target: str, ok: bool) -> None:
        rows.append((cell, f"{value:.1%}", target, "yes" if ok else "NO"))

    for n in (10, 20):
        for balanced in (False, True):
            hits = []
            for _ in range(experiments):
                c, t = synthetic_run(rng, n, 0.0, cv=0.02, position=0.03, balanced=balanced)
                hits.append(_verdict_of(c, t).verdict != "no_change")
            order = "alternating order" if balanced else "control always first (old plan)"
            row(
                f"A/A, 3% position effect, {order}, n={n}",
                share(hits),
                "<= 5%",
                share(hits) <= 0.05,
            )
    for effect in (0.005, 0.009):
        hits = []
        for _ in range(experiments):
            c, t = synthetic_run(rng, 20, effect, cv=0.002)
            hits.append(_verdict_of(c, t).verdict == "regressed")
        target = "<= 1%" if effect == 0.005 else "(reported)"
        row(
            f"+{effect:.1%} real, 1% threshold, n=20, cv 0.2%: regressed",
            share(hits),
            target,
            effect != 0.005 or share(hits) <= 0.01,
        )
    for n in (5, 10):
        zero = fp = 0
        for _ in range(experiments):
            c, t = synthetic_run(rng, n, 0.0, cv=0.05, quantum=0.1)
            v = _verdict_of(c, t, threshold=0.0)
            zero += v.p == 0
            fp += v.verdict != "no_change"
        row(f"quantized A/A (ties), n={n}: p = 0", zero / experiments, "0%", zero == 0)
        row(
            f"quantized A/A (ties), n={n}: false positives",
            fp / experiments,
            "<= 5%",
            fp / experiments <= 0.05,
        )
    for n in (5, 10, 20):
        covered = []
        for _ in range(experiments):
            c, t = synthetic_run(rng, n, 0.05, cv=0.05)
            ci = _verdict_of(c, t).ci
            covered.append(ci[0] <= 1.05 <= ci[1])
        row(
            f"95% interval covers the true ratio 1.05, n={n}",
            share(covered),
            ">= 94%",
            share(covered) >= 0.94,
        )
    rows.extend(mde_cells(rng, experiments))
    hits = []
    for _ in range(experiments):
        c, t = synthetic_run(rng, 20, 0.0, cv=0.05, position=0.03)
        hits.append(sequential(c, t, 6, 20)[0] != 0)
    row(
        "A/A sequential (6..20 blocks), 3% position effect, alternating order",
        share(hits),
        "<= 5%",
        share(hits) <= 0.05,
    )
    for drift in (0.0, 0.03):
        for n in (10, 20):
            ours, mw = [], []
            for _ in range(experiments):
                c, t = synthetic_run(rng, n, 0.10, cv=0.05, drift=drift)
                v = _verdict_of(c, t, threshold=0.0)
                ours.append(v.verdict == "regressed")
                mw.append(rule_mann_whitney(c, t) == 1)
            kind = "drifting (3%/block)" if drift else "independent"
            row(
                f"power +10%, {kind} noise, n={n}: ours (test alone)",
                share(ours),
                f">= 0.9 x Mann-Whitney's {share(mw):.1%}"
                if not drift
                else f"(Mann-Whitney {share(mw):.1%})",
                share(ours) >= 0.9 * share(mw) or bool(drift),
            )
    for truth, cv, n in ((0.05, 0.05, 10), (0.0, 0.002, 7), (0.0, 0.05, 7)):
        outcomes = [
            rerun_outcome(*(_verdict_of(*synthetic_run(rng, n, truth, cv=cv)) for _ in range(2)))
            for _ in range(experiments)
        ]
        what = f"a real +{truth:.0%}" if truth else "A/A"
        for outcome, target, ok in (
            ("contradicts", "~0% (only opposite decisions or intervals apart)", 0.05),
            ("qualified", "(reported)", None),
            ("reproduced", "(reported)", None),
        ):
            got = share([o == outcome for o in outcomes])
            row(
                f"faithful reruns of {what} (cv {cv:.1%}, n={n}): {outcome}",
                got,
                target,
                ok is None or got <= ok,
            )
    return rows


# -- counter arms ------------------------------------------------------------------------------

COUNTER_BASE = 50_000
COUNTER_ARMS = ("A", "A'", "+0.5%", "+1%", "+2%")
COUNTER_EFFECTS = {"A/A": "A'", "+0.5%": "+0.5%", "+1%": "+1%", "+2%": "+2%"}
#: The noise band each metric is judged with: the engine's defaults (counters: calibrated here).
COUNTER_BANDS = {"wall": 0.01, "cpu": 0.01, "instructions": COUNTER_NOISE_THRESHOLD}


def run_counted(iterations: int, counting: Counting, block: int = 0) -> tuple[int, float]:
    """Instructions of one workload process under the counting backend, and its wall time;
    the block's hash seed, as the engine sets it (engine/counters.py)."""
    command = f"{shlex.quote(sys.executable)} -S -c {shlex.quote(WORK)} {iterations}"
    env = counting.environment(dict(os.environ), block)
    start = time.perf_counter()
    subprocess.run(["/bin/sh", "-c", counting.command(command)], check=True, env=env)
    wall = time.perf_counter() - start
    return counting.read()["instructions"], wall


def counter_sizes(counting: Counting) -> dict[str, int]:
    """Iterations per counter arm so that the whole process does +0.5/1/2% more instructions."""
    empty = run_counted(0, counting)[0]
    full = run_counted(COUNTER_BASE, counting)[0]
    per_iteration = (full - empty) / COUNTER_BASE
    sizes = {"A": COUNTER_BASE, "A'": COUNTER_BASE}
    for arm in COUNTER_ARMS[2:]:
        sizes[arm] = int(COUNTER_BASE + float(arm.strip("+%")) / 100 * full / per_iteration)
    return sizes


def collect_counters(
    blocks: int, plain_blocks: int, sizes: dict[str, int], load: int, seed: int, counting: Counting
) -> dict[str, dict]:
    """Interleaved blocks of the counter arms under ``load``: ``plain_blocks`` of plain runs
    (wall, CPU time), then ``blocks`` counted (instructions; the counted run's wall time)."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)]
    try:
        order = random.Random(seed)
        keys = ("wall", "cpu", "instructions", "counted_wall")
        out = {arm: {key: [] for key in keys} for arm in COUNTER_ARMS}
        for _ in range(plain_blocks):
            for arm in order.sample(COUNTER_ARMS, len(COUNTER_ARMS)):
                wall, cpu = run_once(sizes[arm])
                out[arm]["wall"].append(wall)
                out[arm]["cpu"].append(cpu)
        for block in range(blocks):
            for arm in order.sample(COUNTER_ARMS, len(COUNTER_ARMS)):
                count, counted_wall = run_counted(sizes[arm], counting, block)
                out[arm]["instructions"].append(count)
                out[arm]["counted_wall"].append(counted_wall)
        return out
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()


def rule_interval(control: np.ndarray, treatment: np.ndarray, band: float) -> int:
    """A change when the 95% t interval of the paired log ratio lies beyond ``1 +/- band``."""
    diffs = np.log(treatment) - np.log(control)
    half = stats.t.ppf(0.975, len(diffs) - 1) * diffs.std(ddof=1) / np.sqrt(len(diffs))
    low, high = np.exp(diffs.mean() - half), np.exp(diffs.mean() + half)
    return 1 if low > 1 + band else -1 if high < 1 - band else 0


def _ours_at(band: float) -> Rule:
    spec = {"t": PlainMetricRule(noise_threshold=band, primary=True, min_replicates=3)}

    def rule(control: np.ndarray, treatment: np.ndarray) -> int:
        verdict = analyze_run(_observations(control, treatment), spec, TREATMENTS, "control")
        return _sign(verdict.verdicts["t"]["treatment"].verdict)

    return rule


def describe_counters(name: str, pool: dict[str, dict]) -> list[str]:
    """Each metric's CV and realised effects, and the backend's run-time overhead."""
    lines = []
    for metric in ("wall", "cpu", "instructions"):
        base = np.array(pool["A"][metric], dtype=float)
        parts = [
            f"{arm} {np.median(pool[arm][metric]) / np.median(base) - 1:+.2%}"
            for arm in COUNTER_ARMS[1:]
        ]
        lines.append(
            f"{name:7} {metric}: median {np.median(base):.4g}, CV {base.std() / base.mean():.3%}; "
            "realised median effect " + ", ".join(parts)
        )
    ratio = np.median(pool["A"]["counted_wall"]) / np.median(pool["A"]["wall"])
    lines.append(f"{name:7} counted run time / plain run time (median): {ratio:.0f}x")
    return lines


def evaluate_counters(pool: dict[str, dict], args: argparse.Namespace) -> list[list[str]]:
    """Rows (metric, n, rule, A/A, power at each effect) for one condition."""
    rng = np.random.default_rng(args.seed)
    rows = []
    for metric, band in COUNTER_BANDS.items():
        total = len(pool["A"][metric])
        rules: dict[str, Rule] = {
            "ours": _ours_at(band),
            "t interval only": lambda c, t, band=band: rule_interval(c, t, band),
        }
        for n in (3, 5, 7, 10):
            plan = [
                np.sort(rng.choice(total, n, replace=n > total)) for _ in range(args.experiments)
            ]
            hits = {r: {e: [] for e in COUNTER_EFFECTS} for r in rules}
            for effect, arm in COUNTER_EFFECTS.items():
                a = np.array(pool["A"][metric], dtype=float)
                b = np.array(pool[arm][metric], dtype=float)
                for idx in plan:
                    for name, rule in rules.items():
                        hits[name][effect].append(rule(a[idx], b[idx]))
            for name in rules:
                rates = (
                    f"{rate(hits[name][e], None if e == 'A/A' else 1):.1%}" for e in COUNTER_EFFECTS
                )
                rows.append([metric, f"{band:.1%}", str(n), name, *rates])
    return rows


def main_counters(args: argparse.Namespace) -> None:
    """The counter arms: collect (or load), then print the noise, overhead and table."""
    started = time.perf_counter()
    if args.load_samples:
        with open(args.load_samples) as fh:
            saved = json.load(fh)
    else:
        found = backend()
        if found is None:
            raise SystemExit("no counting backend: install valgrind (apt-get install valgrind)")
        with tempfile.TemporaryDirectory() as folder:
            counting = Counting(found, ["instructions"], Path(folder) / "counters")
            sizes = counter_sizes(counting)
            saved = {"backend": found.label, "sizes": sizes, "pools": {}, "loadavg": {}}
            for name, load in (("quiet", 0), ("loaded", args.load)):
                saved["loadavg"][name] = os.getloadavg()[0]
                saved["pools"][name] = collect_counters(
                    args.counter_blocks, 6 * args.counter_blocks, sizes, load, args.seed, counting
                )
        if args.save:
            with open(args.save, "w") as fh:
                json.dump(saved, fh)
    collected = time.perf_counter() - started
    print(
        f"backend {saved['backend']}; iterations per arm: {saved['sizes']}; load average "
        f"before each condition: {saved['loadavg']}"
    )
    for name, pool in saved["pools"].items():
        for line in describe_counters(name, pool):
            print(line)
    header = ["metric", "band", "n", "rule", *(f"{e}" for e in COUNTER_EFFECTS)]
    for name, pool in saved["pools"].items():
        print(
            f"\n### {name} ({len(pool['A']['wall'])} plain blocks, "
            f"{len(pool['A']['instructions'])} counted; {args.experiments} resampled runs per "
            "cell, blocks drawn with replacement where n exceeds them)\n"
        )
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in evaluate_counters(pool, args):
            print("| " + " | ".join(row) + " |", flush=True)
    print(f"\ncollection {collected:.0f} s, total {time.perf_counter() - started:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--issue23",
        type=int,
        metavar="EXPERIMENTS",
        help="only the cells of issue 23 on synthetic metrics, this many runs per cell",
    )
    parser.add_argument(
        "--mde-check",
        type=int,
        metavar="RUNS",
        help="only the MDE cells of issue 23, this many runs each (2000: about 6 min)",
    )
    parser.add_argument(
        "--mde-table",
        type=int,
        metavar="RUNS",
        help="fit mde.MDE_TERMS on this many A/A runs per shape and n (~20 min at 1500)",
    )
    parser.add_argument("--blocks", type=int, default=300, help="blocks collected per condition")
    parser.add_argument("--experiments", type=int, default=400, help="resampled runs per cell")
    parser.add_argument("--seq-experiments", type=int, default=300, help="sequential runs per cell")
    parser.add_argument("--max-blocks", type=int, default=20, help="sequential max blocks")
    parser.add_argument("--drift", type=float, default=0.03, help="random-walk step sd per block")
    parser.add_argument(
        "--load",
        type=int,
        default=os.cpu_count() or 1,
        help="busy-loop processes of the loaded condition",
    )
    parser.add_argument("--counters", action="store_true", help="the counter arms only")
    parser.add_argument(
        "--cross-revision",
        type=int,
        metavar="RUNS",
        help="only issue 34's cross-revision cells (benchmarks/cross_revision.py), RUNS each",
    )
    parser.add_argument(
        "--counter-blocks", type=int, default=5, help="counted blocks per condition (--counters)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", help="write the collected samples to this JSON file")
    parser.add_argument("--load-samples", help="analyse samples from --save instead of collecting")
    args = parser.parse_args()

    if args.counters:
        main_counters(args)
        return
    if args.cross_revision:
        import cross_revision  # its cells draw this module's synthetic noise

        cross_revision.main([f"--runs={args.cross_revision}", f"--seed={args.seed}"])
        return
    started = time.perf_counter()
    if args.mde_table:
        print("n, a, b, power at the median MDE (burst/normal/heavy)")
        for n, a, b, powers in mde_table(args.mde_table, args.seed):
            print(f"({n}, {a:.2f}, {b:.2f}),  # {powers}", flush=True)
        return
    if args.mde_check:
        print(f"| cell ({args.mde_check} runs each, seed {args.seed}) | measured | target | met |")
        print("|---|---|---|---|")
        for cells in mde_cells(np.random.default_rng(args.seed), args.mde_check):
            print("| " + " | ".join(cells) + " |", flush=True)
        print(f"\ntotal {time.perf_counter() - started:.0f} s")
        return
    if args.issue23:
        print(f"| cell ({args.issue23} runs each, seed {args.seed}) | measured | target | met |")
        print("|---|---|---|---|")
        for cells in issue23_cells(args.issue23, args.seed):
            print("| " + " | ".join(cells) + " |", flush=True)
        print(f"\ntotal {time.perf_counter() - started:.0f} s")
        return
    if args.load_samples:
        with open(args.load_samples) as fh:
            saved = json.load(fh)
    else:
        sizes = workload_sizes()
        saved = {"sizes": sizes, "pools": {}, "loadavg": {}}
        for name, load in (("quiet", 0), ("loaded", args.load)):
            saved["loadavg"][name] = os.getloadavg()[0]
            saved["pools"][name] = collect(args.blocks, sizes, load, args.seed)
        if args.save:
            with open(args.save, "w") as fh:
                json.dump(saved, fh)
    collected = time.perf_counter() - started

    print(
        f"workload iterations per arm: {saved['sizes']}; load average before each "
        f"condition: {saved['loadavg']}"
    )
    header = ["metric", "drift", "n", "rule", "A/A FP", "power +2%", "power +5%", "mean blocks"]
    for name, pool in saved["pools"].items():
        for line in describe(name, pool):
            print(line)
    for name, pool in saved["pools"].items():
        rows = evaluate(pool, args)
        print(
            f"\n### {name} ({len(pool['A']['wall'])} blocks, {args.experiments} resampled "
            f"runs per cell, {args.seq_experiments} sequential)\n"
        )
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    print(f"\ncollection {collected:.0f} s, total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
