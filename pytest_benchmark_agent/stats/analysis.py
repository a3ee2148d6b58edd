"""Gate 2 statistics: turn raw samples into calibrated per-metric verdicts.

A pure module (no I/O, no pytest). The design it relies on: replicate k of every treatment ran
adjacent (a block), in an order the plan balances across blocks (:mod:`.engine.plan`), so
comparisons are made within blocks and slow drift and position effects cancel.

Rule (see docs/benchmark/STATISTICS.md for the measurements behind it): a treatment is
``improved``/``regressed`` on a metric only when (1) the two-sided test passes Holm's step-down
correction across every metric x treatment comparison of the run and (2) the whole 95% interval
of the ratio lies beyond the metric's noise band ``1 +/- noise_threshold``.

* Paired blocks (the normal case): the block-swap rank test. All 2n values, less a local level
  (a running median over nearby blocks, the same for both labels of a block), are ranked
  together as Mann-Whitney would; the reference distribution swaps labels only inside blocks
  (every swap up to :data:`EXACT_BLOCKS` blocks, else random ones), so the p is exact, never 0,
  and its floor is 2 / 2^n: :func:`min_blocks_to_decide`. The interval inverts the test where
  it can reach 95%, else it is Student's t interval on the paired log ratios.
* Counters (``counter_floors``: metrics a counting backend counted, with its noise): Student's
  paired t on the log ratios, the sd floored at the backend's noise (:func:`_counted_paired`),
  which has no 2 / 2^n floor and so decides from 3 blocks; judged against the band as above.
* Seeds: each (treatment, seed) is first reduced to its median; the same paired test then runs
  over seeds, so a single lucky seed is one unit among several, never a win.
* Incomplete blocks (a failed trial): the complete blocks when enough remain, otherwise an
  unpaired Mann-Whitney U test with an independent bootstrap of the ratio of medians.
* Sequential replication (:func:`sequential_decision`): group-sequential boundaries from the
  Lan-DeMets O'Brien-Fleming-like spending function at geometrically spaced looks, combined
  with Holm as in Maurer & Bretz (2013), so stopping on a verdict keeps the error rate at alpha.

The t and normal distributions are :mod:`.distributions`' pure-Python ones: scipy.special cost
~220 ms to import, paid by every judged session. numpy stays a module-level import: pytester's
in-process runs unload the modules first imported inside them, and numpy cannot be imported
twice in a process, so the test suites count on importing this module to load it.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from pytest_benchmark_agent.stats.comparability import (
    DIRECTIONS,
    MetricRule,
    Refusal,
    Refused,
    Sample,
    Verdict,
    guard_failures,
    ignored_caveats,
    is_guarded,
    refusal,
    usable,
)
from pytest_benchmark_agent.stats.describe import show_value
from pytest_benchmark_agent.stats.distributions import ndtr, ndtri, stdtr, stdtrit

BOOTSTRAP_RESAMPLES = 4000  # the unpaired fallback's bootstrap of the ratio of medians
CI_LEVEL = 0.95
MDE_POWER = 0.8
#: Blocks on each side of a block whose values set its local level (drift removal).
WINDOW = 2
#: Up to this many units every label swap is enumerated (an exact p); beyond, random swaps.
EXACT_BLOCKS = 12
RANDOM_SWAPS = 4000
#: The paired MDE's terms by units n: ``(a, b)`` in ``log(1 + band) + a w + b se`` (``w`` the
#: interval's half-width, ``se`` the paired differences' standard error), fitted by simulation so
#: that the power at the reported MDE is 80% on three noise shapes alike (normal, a 10%
#: right-tail burst, 30% heavy bursts; 1,500 A/A runs of each per n):
#: ``benchmarks/stats_calibration.py --mde-table``; STATISTICS.md. A row for every n to 20 (the
#: best (a, b) move along a ridge from one n to the next), linear between the rows beyond;
#: below the first and past the last, the end rows.
MDE_TERMS = (
    (6, 1.46, 0.40),
    (7, 0.02, 4.00),
    (8, 0.04, 3.55),
    (9, 0.72, 1.70),
    (10, 0.86, 1.30),
    (11, 0.96, 1.05),
    (12, 1.08, 0.70),
    (13, 1.14, 0.60),
    (14, 1.18, 0.50),
    (15, 1.36, 0.20),
    (16, 1.24, 0.40),
    (17, 1.30, 0.25),
    (18, 1.34, 0.20),
    (19, 1.38, 0.15),
    (20, 1.38, 0.15),
    (25, 1.38, 0.10),
    (30, 1.40, 0.10),
)
_BISECTIONS = 26
_BOUNDARY_PATHS = 100_000
_BOUNDARY_SEED = 20240917

Key = tuple[int, "int | None"]  # (replicate, seed): the block a sample belongs to


@dataclass(frozen=True)
class PlainMetricRule:
    """A plain :class:`MetricRule` (the engine's config model provides the same attributes)."""

    direction: str = "lower"
    primary: bool = False
    guard: bool = False
    floor: float | None = None
    ceiling: float | None = None
    noise_threshold: float = 0.01
    min_replicates: int = 5


@dataclass(frozen=True)
class Observation:
    """One sample of one metric: which treatment, which block (replicate) and seed produced it.

    ``value`` is a float, or for a ``direction: equal`` metric the int or str as recorded;
    ``position`` the 0-based index of its trial within the block as run (None when unknown).
    """

    treatment: str
    replicate: int
    seed: int | None
    value: Sample
    position: int | None = None


@dataclass
class RunAnalysis:
    """Every verdict of a run plus the lines the report's "What Went Wrong" must show."""

    verdicts: dict[str, dict[str, Verdict]]
    caveats: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    #: The caveats that are findings about a treatment (it failed a guard), not about the run.
    findings: list[str] = field(default_factory=list)

    def as_record(self) -> dict:
        """Plain-Python mapping: verdict records per metric and treatment, caveats, refusals."""
        return {
            "verdicts": {
                metric: {t: v.to_dict() for t, v in per.items()}
                for metric, per in self.verdicts.items()
            },
            "caveats": list(self.caveats),
            "refusals": list(self.refusals),
        }


@dataclass(frozen=True)
class SequentialDecision:
    """Whether the engine may stop adding blocks, why, and the analysis at this look."""

    stop: bool
    reason: str
    analysis: RunAnalysis
    look: int
    level: float


@dataclass
class _Comparison:
    """Test outcome of one metric x treatment, before Holm and guards turn it into a verdict."""

    n: tuple[int, int]
    refusal: Refused | None = None
    effect: float = 0.0  # relative change (treatment - control) / |control|
    ci: tuple[float, float] | None = None
    p: float | None = None
    half_width: float = 0.0  # half the interval's width on the test's scale
    se: float = 0.0  # the estimate's standard error on the test's scale (the MDE's noise term)
    smallest_p: float = 0.0  # the smallest p the test can give with these units
    log_scale: bool = True
    test: str | None = None
    design: str | None = None
    units: int = 0
    median_ratio: float | None = None
    mismatch: str | None = None  # direction "equal": what differs from the control
    note: str | None = None  # a caveat about the design actually used
    df: int | None = None  # the counters' t rule: its degrees of freedom (None: the rank test)


def analyze_run(
    observations: Mapping[str, Sequence[Observation]],
    specs: Mapping[str, MetricRule],
    treatments: Sequence[str],
    control: str,
    alpha: float = 0.05,
    seed: int = 0,
    counter_floors: Mapping[str, float] | None = None,
) -> RunAnalysis:
    """Verdicts for every metric in ``specs`` and every non-control treatment (fixed design).

    ``counter_floors`` names the metrics that are counts of a counting backend, each with the
    backend's calibrated noise (the floor of a block's log-ratio sd): they are judged by
    :func:`_counted_paired` instead of the rank test, so they decide from 3 blocks.
    """
    return _analyze(
        observations, specs, treatments, control, alpha, seed, lambda a: a, counter_floors or {}
    )


def look_schedule(min_blocks: int, max_blocks: int) -> tuple[int, ...]:
    """Blocks at which sequential replication may stop: min, then each >= 25% more, then max.

    Fewer, geometrically spaced looks keep the final look's nominal level near alpha (0.038 for
    5..20 blocks at alpha 0.05, against 0.029 with a look after every block).
    """
    looks = [min_blocks]
    while True:
        nxt = max(looks[-1] + 1, math.ceil(looks[-1] * 1.25))
        if nxt >= max_blocks:
            break
        looks.append(nxt)
    if len(looks) > 1 and max_blocks < looks[-1] * 1.25:
        looks.pop()
    if looks[-1] != max_blocks:
        looks.append(max_blocks)
    return tuple(looks)


def sequential_decision(
    observations: Mapping[str, Sequence[Observation]],
    specs: Mapping[str, MetricRule],
    treatments: Sequence[str],
    control: str,
    *,
    blocks_done: int,
    min_blocks: int,
    max_blocks: int,
    alpha: float = 0.05,
    seed: int = 0,
    counter_floors: Mapping[str, float] | None = None,
) -> SequentialDecision:
    """Analyse after ``blocks_done`` complete blocks and say whether to stop adding blocks.

    Stopping is possible only at the looks of :func:`look_schedule`; there, verdicts use the
    O'Brien-Fleming-like nominal level of the look, so stopping on a verdict keeps the run's
    false-positive rate at ``alpha``. It stops when every primary verdict is decided (improved,
    regressed, blocked by a guard, or a CI inside the noise band) and always at ``max_blocks``.
    Between looks the analysis is still valid as a final one (a look taken there, for a run
    that must end early, spends its own share of alpha), but ``stop`` stays False.
    """
    if not 1 <= min_blocks <= max_blocks:
        raise ValueError(
            f"replicates: min={min_blocks}, max={max_blocks}: need 1 <= min <= max; "
            "fix the replicates: {min, max} of the benchmark file"
        )
    if blocks_done < min_blocks:
        raise ValueError(
            f"sequential_decision: blocks_done={blocks_done} is below min_blocks={min_blocks}; "
            "call it only once min_blocks complete blocks have run"
        )
    look = min(blocks_done, max_blocks)
    schedule = look_schedule(min_blocks, max_blocks)
    looks = tuple(k for k in schedule if k < look) + (look,)

    def level_fn(share: float) -> float:
        return _nominal_levels(share, looks, max_blocks)[-1]

    analysis = _analyze(
        observations, specs, treatments, control, alpha, seed, level_fn, counter_floors or {}
    )
    level = level_fn(alpha)
    if look not in schedule:
        upcoming = min(k for k in schedule if k > look)
        reason = f"{look} of {max_blocks} blocks; next look at block {upcoming}"
        return SequentialDecision(False, reason, analysis, look, level)
    targets = [m for m, s in specs.items() if s.primary] or [
        m for m, s in specs.items() if s.direction != "equal"
    ]
    open_items = []
    for metric in targets:
        for treatment, verdict in analysis.verdicts.get(metric, {}).items():
            if not _decided(verdict, specs[metric].noise_threshold):
                open_items.append(f"{metric}[{treatment}] ({verdict.verdict})")
    if not open_items:
        return SequentialDecision(
            True, f"every primary verdict decided after {look} blocks", analysis, look, level
        )
    if look >= max_blocks:
        reason = f"reached max {max_blocks} blocks; undecided: {', '.join(open_items)}"
        return SequentialDecision(True, reason, analysis, look, level)
    reason = f"{look} of {max_blocks} blocks; undecided: {', '.join(open_items)}"
    return SequentialDecision(False, reason, analysis, look, level)


def _decided(verdict: Verdict, threshold: float) -> bool:
    """A verdict more blocks would not be expected to change."""
    if verdict.verdict in ("improved", "regressed"):
        return True
    if verdict.verdict == "not_comparable":
        return bool(verdict.reason and verdict.reason.startswith("guard "))
    return inside_band(verdict.ci, threshold)


def _analyze(
    observations: Mapping[str, Sequence[Observation]],
    specs: Mapping[str, MetricRule],
    treatments: Sequence[str],
    control: str,
    alpha: float,
    seed: int,
    level_fn: Callable[[float], float],
    counter_floors: Mapping[str, float],
) -> RunAnalysis:
    """Compare, correct with Holm (levels from ``level_fn``), apply guards, collect caveats."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha} must lie strictly between 0 and 1")
    if control not in treatments:
        raise ValueError(f"control {control!r} is not one of the treatments {list(treatments)}")
    others = [t for t in treatments if t != control]
    caveats: list[str] = []
    comparisons: dict[str, dict[str, _Comparison]] = {}
    for metric, spec in specs.items():
        _check_spec(metric, spec)
        groups = _group(metric, spec, observations.get(metric, ()), treatments, caveats)
        per: dict[str, _Comparison] = {}
        for treatment in others:
            rng = np.random.default_rng(
                [seed, zlib.crc32(metric.encode()), zlib.crc32(treatment.encode())]
            )
            per[treatment] = _compare(
                spec, groups[control], groups[treatment], rng, counter_floors.get(metric)
            )
            if per[treatment].note:
                caveats.append(f"{metric} [{treatment}]: {per[treatment].note}")
        comparisons[metric] = per
        if spec.direction == "equal" and len(set(groups[control].values())) > 1:
            caveats.append(f"{metric}: the control's own values are not all identical")

    family = [
        (metric, t, c.p)
        for metric, per in comparisons.items()
        for t, c in per.items()
        if c.p is not None and specs[metric].direction != "equal"
    ]
    holm = _holm(family, alpha, level_fn)
    mde_level = level_fn(alpha / max(len(family), 1))

    verdicts: dict[str, dict[str, Verdict]] = {}
    for metric, per in comparisons.items():
        spec = specs[metric]
        verdicts[metric] = {
            t: _verdict(spec, c, holm.get((metric, t), (1.0, False, alpha)), mde_level)
            for t, c in per.items()
        }
    findings: list[str] = []
    _apply_guards(specs, verdicts, observations, control, others, caveats, findings)
    refusals = [
        f"{metric} [{t}]: not comparable: {v.reason}"
        for metric, per in verdicts.items()
        for t, v in per.items()
        if v.verdict == "not_comparable"
    ]
    return RunAnalysis(verdicts=verdicts, caveats=caveats, refusals=refusals, findings=findings)


def _check_spec(metric: str, spec: MetricRule) -> None:
    """Refuse a metric rule that the analysis cannot apply, naming the field and the fix."""
    if spec.direction not in DIRECTIONS:
        raise ValueError(
            f"metrics.{metric}.direction={spec.direction!r}: use one of {', '.join(DIRECTIONS)}"
        )
    if not spec.noise_threshold >= 0:
        raise ValueError(
            f"metrics.{metric}.noise_threshold={spec.noise_threshold}: use a fraction >= 0 "
            "(0.01 means 1%)"
        )
    if spec.min_replicates < 1:
        raise ValueError(f"metrics.{metric}.min_replicates={spec.min_replicates}: use >= 1")


def _group(
    metric: str,
    spec: MetricRule,
    observations: Sequence[Observation],
    treatments: Sequence[str],
    caveats: list[str],
) -> dict[str, dict[Key, Sample]]:
    """Samples per treatment keyed by (replicate, seed); refuses duplicates and unknown names.

    The values are :func:`.comparability.usable`'s: floats, or an ``equal`` metric's ints and
    strs exactly as recorded (never through a float, which would merge 2**53 and 2**53 + 1).
    """
    groups: dict[str, dict[Key, Sample]] = {t: {} for t in treatments}
    seeded = {o.seed is not None for o in observations}
    if len(seeded) > 1:
        raise ValueError(f"metric {metric}: some observations have a seed and some do not")
    ignored: list[object] = []
    for o in observations:
        if o.treatment not in groups:
            raise ValueError(
                f"metric {metric}: observation for unknown treatment {o.treatment!r}; "
                f"treatments are {list(treatments)}"
            )
        key = (o.replicate, o.seed)
        if key in groups[o.treatment]:
            raise ValueError(
                f"metric {metric}: two observations for treatment {o.treatment!r}, "
                f"replicate {o.replicate}, seed {o.seed}; each trial reports a metric once"
            )
        value = usable(spec, o.value)
        if value is None:
            ignored.append(o.value)
            continue
        groups[o.treatment][key] = value
    caveats += ignored_caveats(metric, ignored)
    return groups


def _compare(
    spec: MetricRule,
    control: dict[Key, Sample],
    treated: dict[Key, Sample],
    rng: np.random.Generator,
    floor: float | None = None,
) -> _Comparison:
    """Pick the design (paired blocks, paired seeds, unpaired) and run its test: the rank test,
    or for a counter (``floor``: its backend's noise) the floored paired t rule."""
    n = (len(control), len(treated))
    refused = refusal(spec, n)
    if refused is not None:
        return _Comparison(n, refusal=refused)
    if spec.direction == "equal":
        return _identity(n, control, treated)
    c_med = float(np.median(list(control.values())))
    t_med = float(np.median(list(treated.values())))
    median_ratio = t_med / c_med if c_med != 0 else None
    values = [*control.values(), *treated.values()]
    if min(values) == max(values):
        return _Comparison(
            n,
            ci=(1.0, 1.0),
            p=1.0,
            test="identical values",
            design="none",
            units=min(n),
            median_ratio=median_ratio,
        )
    log_scale = min(values) > 0
    if not log_scale and c_med == 0:
        return _Comparison(
            n, refusal=Refused(Refusal.FAILED, "relative effect undefined: the control median is 0")
        )
    scale = 1.0 if log_scale else abs(c_med)

    def paired(c: np.ndarray, t: np.ndarray, design: str, note: str | None) -> _Comparison:
        if floor is not None and log_scale:
            return _counted_paired(n, c, t, floor, design, median_ratio, note)
        return _paired(n, c, t, log_scale, rng, design, median_ratio, note)

    def tf(x: np.ndarray) -> np.ndarray:
        return np.log(x) if log_scale else x / scale

    seeded = next(iter(control))[1] is not None
    if seeded:
        c_seed, t_seed = _per_seed(control), _per_seed(treated)
        shared = sorted(set(c_seed) & set(t_seed), key=str)
        if len(shared) < 2:
            return _Comparison(
                n,
                refusal=Refused(
                    Refusal.TOO_SMALL, f"fewer than 2 seeds on both sides ({len(shared)})"
                ),
            )
        note = None
        if len(shared) < max(len(c_seed), len(t_seed)):
            note = f"seeds without both sides dropped; compared {len(shared)} seeds"
        c_units = tf(np.array([c_seed[s] for s in shared]))
        t_units = tf(np.array([t_seed[s] for s in shared]))
        return paired(c_units, t_units, "paired seeds", note)
    blocks = sorted(set(control) & set(treated))
    if len(blocks) >= spec.min_replicates:
        note = None
        if not len(blocks) == len(control) == len(treated):
            note = f"incomplete blocks: compared the {len(blocks)} complete blocks of n={list(n)}"
        c_units = tf(np.array([control[k] for k in blocks]))
        t_units = tf(np.array([treated[k] for k in blocks]))
        return paired(c_units, t_units, "paired blocks", note)
    return _unpaired(
        n,
        tf(np.array(list(control.values()))),
        tf(np.array(list(treated.values()))),
        log_scale,
        rng,
        median_ratio,
        f"only {len(blocks)} complete blocks of n={list(n)}: compared unpaired with "
        "Mann-Whitney U, so drift between blocks does not cancel",
    )


def _per_seed(samples: dict[Key, float]) -> dict[int | None, float]:
    """The median of each seed's replicates: seeds, not replicates, are the units compared."""
    by_seed: dict[int | None, list[float]] = {}
    for (_, s), v in samples.items():
        by_seed.setdefault(s, []).append(v)
    return {s: float(np.median(v)) for s, v in by_seed.items()}


def _identity(
    n: tuple[int, int], control: dict[Key, Sample], treated: dict[Key, Sample]
) -> _Comparison:
    """Direction "equal": every treatment value must equal the control's (most common) value,
    exactly (an int to every digit, a str character for character), shown as recorded."""
    reference = Counter(control.values()).most_common(1)[0][0]
    differing = [v for v, _ in Counter(treated.values()).most_common() if v != reference]
    mismatch = None
    if differing:
        count = sum(1 for v in treated.values() if v != reference)
        mismatch = (
            f"{count} of {len(treated)} values differ from the control's "
            f"{show_value(reference)} (e.g. {show_value(differing[0])})"
        )
    return _Comparison(n, test="identity", design="identity", units=len(treated), mismatch=mismatch)


def min_blocks_to_decide(level: float) -> int:
    """The fewest blocks at which an exact test that respects the blocks can reach ``level``:
    with n blocks it has at most 2^n equally likely label patterns, so its smallest two-sided p
    is 2 / 2^n, and it needs 2 / 2^n <= level."""
    if not 0 < level < 1:
        raise ValueError(f"level={level} must lie strictly between 0 and 1")
    return max(1, math.ceil(math.log2(2 / level) - 1e-12))


def _levels(c: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Each block's local level: the median of both sides' values in the ``2 WINDOW + 1``
    blocks around it (moved inward at the ends). Symmetric in the two labels, so swapping labels
    inside a block leaves it unchanged, and slow drift is removed before ranking."""
    size = len(c)
    width = min(size, 2 * WINDOW + 1)
    starts = np.clip(np.arange(size) - WINDOW, 0, size - width)
    both = np.stack([c, t], axis=1)
    windows = both[starts[:, None] + np.arange(width)]
    return np.median(windows.reshape(size, -1), axis=1)


def _rank_diffs(c: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per block, the treatment's rank minus the control's among all 2n drift-removed values
    (midranks for ties): the block's share of the rank-sum statistic."""
    level = _levels(c, t)
    pooled = np.concatenate([c - level, t - level])
    values, inverse, counts = np.unique(pooled, return_inverse=True, return_counts=True)
    midranks = np.cumsum(counts) - (counts - 1) / 2
    ranks = midranks[inverse]
    return ranks[len(c) :] - ranks[: len(c)]


def _swap_signs(size: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """Label swaps over ``size`` blocks as signs (-1: swapped): all 2^size when few (exact),
    else :data:`RANDOM_SWAPS` random ones; and whether the set is exhaustive."""
    if size <= EXACT_BLOCKS:
        codes = np.arange(2**size)[:, None]
        bits = (codes >> np.arange(size)) & 1
        return 1.0 - 2.0 * bits, True
    return np.where(rng.random((RANDOM_SWAPS, size)) < 0.5, -1.0, 1.0), False


def _swap_p(diffs: np.ndarray, signs: np.ndarray, exhaustive: bool) -> float:
    """Two-sided p of the rank-sum statistic over the label swaps (never 0: the observed
    labelling is one of the exhaustive patterns, and a random set counts it once more)."""
    observed = abs(float(diffs.sum()))
    sims = np.abs(signs @ diffs)
    extreme = int(np.count_nonzero(sims >= observed - 1e-9 * max(1.0, observed)))
    if exhaustive:
        return extreme / len(signs)
    return (1 + extreme) / (1 + len(signs))


def _paired(
    n: tuple[int, int],
    c: np.ndarray,
    t: np.ndarray,
    log_scale: bool,
    rng: np.random.Generator,
    design: str,
    median_ratio: float | None,
    note: str | None,
) -> _Comparison:
    """The block-swap rank test on paired units (blocks or seeds) and its interval.

    ``c`` and ``t`` are the two sides on the test's scale, one value per unit. The test ranks
    all 2n drift-removed values together (as Mann-Whitney would) but draws its reference
    distribution only from swaps of the labels inside units, so it is exact at any n and drift
    or a position effect balanced by the plan cannot become a treatment effect. The effect is
    the shift at which the statistic is zero; the interval inverts the test where it can reach
    95% (2 / 2^n <= 0.05), else it is Student's t interval on the mean paired difference.
    """
    size = len(c)
    if size < 2:
        return _Comparison(
            n,
            refusal=Refused(
                Refusal.TOO_SMALL, f"a paired test needs at least 2 {design.split()[1]}"
            ),
        )
    swaps, exhaustive = _swap_signs(size, rng)
    d = t - c
    p = _swap_p(_rank_diffs(c, t), swaps, exhaustive)
    smallest = 2.0 / 2**size if exhaustive else 1.0 / (1 + len(swaps))

    def stat(shift: float) -> float:
        return float(_rank_diffs(c, t - shift).sum())

    span = float(d.max() - d.min()) or max(abs(float(d.max())), 1e-12)
    lo_edge, hi_edge = float(d.min()) - span, float(d.max()) + span
    effect = _root(stat, lo_edge, hi_edge)
    alpha_ci = 1 - CI_LEVEL
    interval = "inverted test"
    if smallest <= alpha_ci:

        def accepted(shift: float) -> bool:
            return _swap_p(_rank_diffs(c, t - shift), swaps, exhaustive) > alpha_ci

        lo = _edge_of(accepted, effect, lo_edge)
        hi = _edge_of(accepted, effect, hi_edge)
    else:
        interval = "t interval"
        mean = float(d.mean())
        half = stdtrit(size - 1, 1 - alpha_ci / 2) * float(d.std(ddof=1)) / math.sqrt(size)
        lo, hi = min(mean - half, effect), max(mean + half, effect)
    return _Comparison(
        n,
        effect=_relative(effect, log_scale),
        ci=(1 + _relative(lo, log_scale), 1 + _relative(hi, log_scale)),
        p=p,
        half_width=(hi - lo) / 2,
        se=float(d.std(ddof=1)) / math.sqrt(size),
        smallest_p=smallest,
        log_scale=log_scale,
        test=f"block-swap rank test ({'exact' if exhaustive else f'{RANDOM_SWAPS} swaps'}; "
        f"{interval})",
        design=design,
        note=note,
        units=size,
        median_ratio=median_ratio,
    )


def _counted_paired(
    n: tuple[int, int],
    c: np.ndarray,
    t: np.ndarray,
    floor: float,
    design: str,
    median_ratio: float | None,
    note: str | None,
) -> _Comparison:
    """The counters' rule: Student's paired t on the log ratios, its sd floored at ``floor``.

    Counts of instructions hardly vary between the two runs of a block (the same program, the
    same hash seed), so the exact rank test's 2 / 2^n floor, not the noise, is what stops a
    decision at 3-5 blocks. A parametric rule has no such floor; flooring the sd at the
    backend's calibrated noise keeps a run whose blocks agree by chance (or exactly) from
    claiming an interval narrower than the backend can measure. Calibrated under load in
    docs/benchmark/STATISTICS.md ("Counters decide at three blocks").
    """
    size = len(c)
    if size < 2:
        return _Comparison(
            n,
            refusal=Refused(
                Refusal.TOO_SMALL, f"a paired test needs at least 2 {design.split()[1]}"
            ),
        )
    d = t - c
    mean = float(d.mean())
    sd = max(float(d.std(ddof=1)), floor)
    se = sd / math.sqrt(size)
    df = size - 1
    p = min(1.0, 2 * stdtr(df, -abs(mean) / se))
    half = stdtrit(df, 1 - (1 - CI_LEVEL) / 2) * se
    return _Comparison(
        n,
        effect=math.expm1(mean),
        ci=(math.exp(mean - half), math.exp(mean + half)),
        p=p,
        half_width=half,
        se=se,
        smallest_p=0.0,
        log_scale=True,
        test=f"paired t on log ratios (sd floored at the counter's noise {floor:.3%})",
        design=design,
        note=note,
        units=size,
        df=df,
        median_ratio=median_ratio,
    )


def _root(stat: Callable[[float], float], lo: float, hi: float) -> float:
    """The middle of the shifts where the (non-increasing) ``stat`` crosses zero."""

    def crossing(strict: bool) -> float:
        a, b = lo, hi
        for _ in range(_BISECTIONS):
            mid = (a + b) / 2
            value = stat(mid)
            if value > 0 or (not strict and value == 0):
                a = mid
            else:
                b = mid
        return (a + b) / 2

    return (crossing(True) + crossing(False)) / 2


def _edge_of(accepted: Callable[[float], bool], inside: float, outside: float) -> float:
    """The boundary between the accepted shift ``inside`` and the rejected ``outside``."""
    if accepted(outside):
        return outside
    a, b = inside, outside
    for _ in range(_BISECTIONS):
        mid = (a + b) / 2
        if accepted(mid):
            a = mid
        else:
            b = mid
    return (a + b) / 2


def _unpaired(
    n: tuple[int, int],
    c: np.ndarray,
    t: np.ndarray,
    log_scale: bool,
    rng: np.random.Generator,
    median_ratio: float | None,
    note: str,
) -> _Comparison:
    """Fallback without blocks: Mann-Whitney U and an independent bootstrap of median ratio."""
    from scipy import stats  # only this fallback needs scipy.stats, the slowest import here

    p = float(stats.mannwhitneyu(t, c, alternative="two-sided").pvalue)
    effect = float(np.median(t) - np.median(c))
    t_boot = np.median(t[rng.integers(0, len(t), (BOOTSTRAP_RESAMPLES, len(t)))], axis=1)
    c_boot = np.median(c[rng.integers(0, len(c), (BOOTSTRAP_RESAMPLES, len(c)))], axis=1)
    boot = t_boot - c_boot
    lo, hi = np.quantile(boot, [(1 - CI_LEVEL) / 2, (1 + CI_LEVEL) / 2])
    return _Comparison(
        n,
        effect=_relative(effect, log_scale),
        ci=(1 + _relative(float(lo), log_scale), 1 + _relative(float(hi), log_scale)),
        p=p,
        half_width=float(hi - lo) / 2,
        se=float(hi - lo) / 2 / ndtri(1 - (1 - CI_LEVEL) / 2),
        smallest_p=2 / math.comb(len(c) + len(t), len(c)),
        log_scale=log_scale,
        test="Mann-Whitney U",
        design="unpaired",
        units=min(n),
        median_ratio=median_ratio,
        note=note,
    )


def _relative(x: float, log_scale: bool) -> float:
    """A test-scale effect as a relative change (inf past a float's range: an MDE at a tiny
    sequential level can be thousands of standard errors)."""
    if not log_scale:
        return x
    try:
        return math.expm1(x)
    except OverflowError:
        return math.inf


def _holm(
    family: list[tuple[str, str, float]], alpha: float, level_fn: Callable[[float], float]
) -> dict[tuple[str, str], tuple[float, bool, float]]:
    """Holm step-down: (adjusted p, rejected, level used) per (metric, treatment).

    Step j (0-based, p ascending) compares the raw p with ``level_fn(alpha / (m - j))``; for a
    fixed design ``level_fn`` is the identity, for a sequential one the look's nominal level.
    """
    m = len(family)
    out: dict[tuple[str, str], tuple[float, bool, float]] = {}
    adjusted = 0.0
    rejecting = True
    for j, (metric, treatment, p) in enumerate(sorted(family, key=lambda x: (x[2], x[0], x[1]))):
        adjusted = max(adjusted, min(1.0, (m - j) * p))
        level = level_fn(alpha / (m - j))
        rejecting = rejecting and p <= level
        out[(metric, treatment)] = (adjusted, rejecting, level)
    return out


def _verdict(
    spec: MetricRule,
    c: _Comparison,
    holm: tuple[float, bool, float],
    mde_level: float,
) -> Verdict:
    """Combine test, interval and noise threshold into the verdict (before guards).

    A change is called only when the test passes its Holm level and the whole interval of the
    ratio lies beyond the noise band ``1 +/- noise_threshold``; a run whose units could never
    reach its level says so in its reason, and its MDE is infinite.
    """
    if c.refusal is not None:
        return Verdict(
            "not_comparable",
            reason=c.refusal.text,
            n=c.n,
            median_ratio=c.median_ratio,
            refused=c.refusal.kind,
        )
    common = dict(n=c.n, test=c.test, design=c.design, units=c.units, median_ratio=c.median_ratio)
    if spec.direction == "equal":
        if c.mismatch:
            return Verdict("regressed", reason=c.mismatch, **common)
        return Verdict("no_change", ratio=1.0, ci=(1.0, 1.0), **common)
    assert c.p is not None and c.ci is not None
    p_holm, rejected, level = holm
    threshold = spec.noise_threshold
    ratio = 1 + c.effect
    beyond = c.ci[0] > 1 + threshold or c.ci[1] < 1 - threshold
    mde = _mde(c, mde_level, threshold)
    common.update(ratio=ratio, ci=c.ci, p=c.p, p_holm=p_holm, mde=mde, level=level)
    if rejected and beyond:
        better = (c.effect < 0) == (spec.direction == "lower")
        return Verdict("improved" if better else "regressed", **common)
    return Verdict(
        "no_change", reason=_no_change_reason(c, threshold, rejected, level, mde, p_holm), **common
    )


def _no_change_reason(
    c: _Comparison, threshold: float, rejected: bool, level: float, mde: float, p_holm: float
) -> str:
    """Why a comparison is ``no_change``, in words that claim only what was shown: "within the
    noise threshold" only when the whole interval lies inside the band; a test that did not pass
    is "not shown to differ", with the MDE (what the run could have seen)."""
    assert c.ci is not None and c.p is not None
    ratio = 1 + c.effect
    interval = f"ratio {ratio:.4g}, interval [{c.ci[0]:.4g}, {c.ci[1]:.4g}]"
    if c.smallest_p > level and c.test != "identical values":
        return undecidable_text(c.units, c.smallest_p, level, c.design)
    if inside_band(c.ci, threshold):
        return f"within the noise threshold {threshold:.2%}: {interval}"
    if rejected:  # a difference, but the interval reaches into the band: its size is unsure
        return (
            f"not shown beyond the noise threshold {threshold:.2%}: the test passes, but the "
            f"interval reaches into the band 1 +/- {threshold:.2%}: {interval}"
        )
    return (
        f"not shown to differ (MDE {mde:.2%}): p={c.p:.3g} does not pass Holm's step-down "
        f"(adjusted p {p_holm:.3g}), and the interval reaches beyond the noise threshold "
        f"{threshold:.2%}: {interval}"
    )


def inside_band(ci: Sequence[float] | None, threshold: float) -> bool:
    """Whether an interval of the ratio lies wholly inside the noise band ``1 +/- threshold``:
    the only case in which a verdict may say "within the noise threshold"."""
    return ci is not None and 1 - threshold <= ci[0] and ci[1] <= 1 + threshold


def undecidable_text(units: int, smallest: float, level: float, design: str | None) -> str:
    """Why a comparison could never have been decided, with the arithmetic."""
    what = "seeds" if design == "paired seeds" else "blocks"
    need = min_blocks_to_decide(level)
    return (
        f"could never decide: with {units} {what} the smallest two-sided p is "
        f"{smallest:.3g} (2/2^{units}), above the level {level:.3g}; "
        f"deciding needs at least {need} {what}"
    )


def _mde(c: _Comparison, level: float, threshold: float) -> float:
    """The smallest relative effect the rule detects with 80% power at this n, noise and level
    (inf when the units can never reach the level).

    The rule needs the interval to clear the noise band and the test to pass at ``level``. By
    shift equivariance the interval's lower edge at a true effect d is d less its edge at none,
    so the MDE is the band plus the 80th percentile of that null edge: ``a w + b se`` with
    :func:`mde_terms` (no closed form holds for the inverted rank test at small n); the test's
    term scales ``w`` from the 95% interval to ``level``.
    """
    if c.smallest_p > level:
        return math.inf
    if c.half_width == 0 and c.se == 0:
        return threshold
    if c.df is not None:  # the counters' t rule: a closed form
        band = math.log1p(threshold)
        need = max(
            band + stdtrit(c.df, 1 - (1 - CI_LEVEL) / 2) * c.se, -stdtrit(c.df, level / 2) * c.se
        )
        return max(threshold, _relative(need + stdtrit(c.df, MDE_POWER) * c.se, True))
    a, b = mde_terms(c.units) if c.design != "unpaired" else (1.0, ndtri(MDE_POWER))
    widen = ndtri(1 - level / 2) / ndtri(1 - (1 - CI_LEVEL) / 2)
    band = math.log1p(threshold) if c.log_scale else threshold
    k = max(band + a * c.half_width + b * c.se, a * widen * c.half_width + b * c.se)
    return max(threshold, _relative(k, c.log_scale))


def mde_terms(units: int) -> tuple[float, float]:
    """The MDE's ``(a, b)`` at ``units`` paired units, from :data:`MDE_TERMS`."""
    rows = MDE_TERMS
    if units <= rows[0][0]:
        return rows[0][1], rows[0][2]
    for (n0, a0, b0), (n1, a1, b1) in zip(rows, rows[1:], strict=False):
        if units <= n1:
            f = (units - n0) / (n1 - n0)
            return a0 + f * (a1 - a0), b0 + f * (b1 - b0)
    return rows[-1][1], rows[-1][2]


def _apply_guards(
    specs: Mapping[str, MetricRule],
    verdicts: dict[str, dict[str, Verdict]],
    observations: Mapping[str, Sequence[Observation]],
    control: str,
    others: list[str],
    caveats: list[str],
    findings: list[str],
) -> None:
    """A treatment failing a guard cannot be called improved on a primary metric; each failure
    is a caveat of the run and, for a treatment other than the control, a finding about it."""
    guards = [m for m, s in specs.items() if is_guarded(s)]
    for treatment in [control, *others]:
        failures: list[str] = []
        for metric in guards:
            failures.extend(
                _guard_failures(metric, specs[metric], treatment, control, observations, verdicts)
            )
        if treatment == control:
            caveats.extend(f"control {control}: {f}" for f in failures)
            continue
        for f in failures:
            caveats.append(f"{treatment}: {f}")
            findings.append(f"{treatment}: {f}")
        if not failures:
            continue
        for metric, spec in specs.items():
            verdict = verdicts[metric][treatment]
            if spec.primary and verdict.verdict == "improved":
                verdicts[metric][treatment] = Verdict(
                    "not_comparable",
                    ratio=verdict.ratio,
                    ci=verdict.ci,
                    p=verdict.p,
                    p_holm=verdict.p_holm,
                    reason="; ".join(failures),
                    n=verdict.n,
                    mde=verdict.mde,
                    test=verdict.test,
                    design=verdict.design,
                    units=verdict.units,
                    level=verdict.level,
                    median_ratio=verdict.median_ratio,
                    refused=Refusal.FINDING,
                )


def _guard_failures(
    metric: str,
    spec: MetricRule,
    treatment: str,
    control: str,
    observations: Mapping[str, Sequence[Observation]],
    verdicts: dict[str, dict[str, Verdict]],
) -> list[str]:
    """Why ``treatment`` fails guard ``metric`` (:func:`.comparability.guard_failures`)."""
    values = [
        value
        for o in observations.get(metric, ())
        if o.treatment == treatment and (value := usable(spec, o.value)) is not None
    ]
    compared = None if treatment == control else verdicts[metric][treatment]
    return guard_failures(metric, spec, values, compared)


@lru_cache(maxsize=256)
def _nominal_levels(alpha: float, looks: tuple[int, ...], max_blocks: int) -> tuple[float, ...]:
    """Two-sided nominal p thresholds at the given looks (block counts, ascending).

    Lan-DeMets O'Brien-Fleming-like spending ``a(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t))`` with
    information fraction t = k / max_blocks. The first look's level is a(t) itself; later ones
    come from a fixed-seed simulation of the joint null distribution of the standardized
    statistics (Brownian motion, one increment per block): each boundary is the one at which
    the fraction of paths first crossing there equals that look's share of alpha.
    """
    rng = np.random.default_rng(_BOUNDARY_SEED)
    z_final = -ndtri(alpha / 2)  # the normal's inverse survival
    total = np.zeros(_BOUNDARY_PATHS)
    alive = np.ones(_BOUNDARY_PATHS, dtype=bool)
    levels: list[float] = []
    for k in range(1, looks[-1] + 1):
        total += rng.standard_normal(_BOUNDARY_PATHS)
        if k not in looks:
            continue
        t = k / max_blocks
        spent = alpha if t >= 1 else 2 * ndtr(-z_final / math.sqrt(t))
        z = np.abs(total) / math.sqrt(k)
        if levels:
            need = int(round(spent * _BOUNDARY_PATHS)) - int(np.count_nonzero(~alive))
            ranked = np.sort(z[alive])[::-1]
            level = 0.0
            if need > 0:
                bound = float(ranked[need - 1] + ranked[min(need, len(ranked) - 1)]) / 2
                level = 2 * ndtr(-bound)
        else:
            level = spent
        levels.append(level)
        if level > 0:
            alive &= z <= -ndtri(level / 2)
    return tuple(levels)
