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
  (every swap up to :data:`.paired.EXACT_BLOCKS` blocks, else random ones), so the p is exact,
  never 0, and its floor is 2 / 2^n: :func:`.paired.min_blocks_to_decide`. The interval
  inverts the test where it can reach 95%, else it is Student's t interval on the paired log
  ratios.
* Counters (``counter_floors``: metrics a counting backend counted, with its noise): Student's
  paired t on the log ratios, the sd floored at the backend's noise
  (:func:`.paired.counted_t_test`), which has no 2 / 2^n floor and so decides from 3 blocks;
  judged against the band as above.
* Seeds: each (treatment, seed) is first reduced to its median; the same paired test then runs
  over seeds, so a single lucky seed is one unit among several, never a win.
* Incomplete blocks (a failed trial): the complete blocks when enough remain, otherwise an
  unpaired Mann-Whitney U test with an independent bootstrap of the ratio of medians.
* Sequential replication (:func:`.sequential.sequential_decision`): group-sequential
  boundaries from the Lan-DeMets O'Brien-Fleming-like spending function at geometrically
  spaced looks, combined with Holm as in Maurer & Bretz (2013), so stopping on a verdict keeps
  the error rate at alpha.

The t and normal distributions are :mod:`.distributions`' pure-Python ones: scipy.special cost
~220 ms to import, paid by every judged session. numpy stays a module-level import: pytester's
in-process runs unload the modules first imported inside them, and numpy cannot be imported
twice in a process, so the test suites count on importing this module to load it.

This module groups the samples, picks each comparison's design and turns the outcomes into
verdicts; the tests are stats/paired.py's and stats/unpaired.py's, Holm's correction
stats/holm.py's, the MDE stats/mde.py's and the looks of sequential replication
stats/sequential.py's.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

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
from pytest_benchmark_agent.stats.comparison import CI_LEVEL, Comparison, Key
from pytest_benchmark_agent.stats.describe import median, show_value
from pytest_benchmark_agent.stats.holm import holm_step_down
from pytest_benchmark_agent.stats.mde import min_detectable_effect
from pytest_benchmark_agent.stats.paired import (
    PairedUnits,
    counted_t_test,
    min_blocks_to_decide,
    rank_test,
)
from pytest_benchmark_agent.stats.unpaired import unpaired_test


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


@dataclass(frozen=True)
class Judging:
    """What a run's comparisons are judged with besides their samples and rules: the family's
    ``alpha`` (Holm's, over every metric x treatment comparison), the ``seed`` of the random
    label swaps, and ``counter_floors``: the metrics a counting backend counted, each with the
    backend's calibrated noise (judged by :func:`counted_t_test`)."""

    alpha: float = 0.05
    seed: int = 0
    counter_floors: Mapping[str, float] = field(default_factory=dict)


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
    :func:`counted_t_test` instead of the rank test, so they decide from 3 blocks.
    """
    judging = Judging(alpha, seed, counter_floors or {})
    return analyze(observations, specs, treatments, control, judging, lambda a: a)


def analyze(
    observations: Mapping[str, Sequence[Observation]],
    specs: Mapping[str, MetricRule],
    treatments: Sequence[str],
    control: str,
    judging: Judging,
    level_fn: Callable[[float], float],
    ci_level: float = CI_LEVEL,
) -> RunAnalysis:
    """Compare, correct with Holm (levels from ``level_fn``), apply guards, collect caveats;
    intervals at ``ci_level`` (a look of the gate's adaptive blocks: its own level)."""
    alpha, seed, counter_floors = judging.alpha, judging.seed, judging.counter_floors
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha} must lie strictly between 0 and 1")
    if control not in treatments:
        raise ValueError(f"control {control!r} is not one of the treatments {list(treatments)}")
    others = [t for t in treatments if t != control]
    caveats: list[str] = []
    comparisons: dict[str, dict[str, Comparison]] = {}
    for metric, spec in specs.items():
        _check_spec(metric, spec)
        groups = _group(metric, spec, observations.get(metric, ()), treatments, caveats)
        per: dict[str, Comparison] = {}
        for treatment in others:
            rng = np.random.default_rng(
                [seed, zlib.crc32(metric.encode()), zlib.crc32(treatment.encode())]
            )
            per[treatment] = _compare(
                spec, groups[control], groups[treatment], rng, counter_floors.get(metric), ci_level
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
    holm = holm_step_down(family, alpha, level_fn)
    mde, nothing = level_fn(alpha / max(len(family), 1)), (1.0, False, alpha)
    verdicts = {
        metric: {
            t: _at_level(_verdict(specs[metric], c, holm.get((metric, t), nothing), mde), ci_level)
            for t, c in per.items()
        }
        for metric, per in comparisons.items()
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


def _at_level(verdict: Verdict, ci_level: float) -> Verdict:
    """A verdict whose interval is not at 95% says its level (``ci_level`` in the record)."""
    if ci_level == CI_LEVEL or verdict.ci is None:
        return verdict
    return dataclasses.replace(verdict, extra={**verdict.extra, "ci_level": ci_level})


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
    ci_level: float = CI_LEVEL,
) -> Comparison:
    """Pick the design (paired blocks, paired seeds, unpaired) and run its test: the rank test,
    or for a counter (``floor``: its backend's noise) the floored paired t rule."""
    n = (len(control), len(treated))
    refused = refusal(spec, n)
    if refused is not None:
        return Comparison(n, refusal=refused)
    if spec.direction == "equal":
        return _identity(n, control, treated)
    c_med = median(list(control.values()))  # never inf for two values near the float limit
    t_med = median(list(treated.values()))
    median_ratio = t_med / c_med if c_med != 0 else None
    if median_ratio is not None and not np.isfinite(median_ratio):
        return _beyond_a_float(n, t_med, c_med)
    values = [*control.values(), *treated.values()]
    if min(values) == max(values):
        same = {"test": "identical values", "design": "none", "median_ratio": median_ratio}
        return Comparison(n, ci=(1.0, 1.0), p=1.0, units=min(n), **same)
    log_scale = min(values) > 0
    if not log_scale and c_med == 0:
        return Comparison(
            n, refusal=Refused(Refusal.FAILED, "relative effect undefined: the control median is 0")
        )
    scale = 1.0 if log_scale else abs(c_med)

    def tf(x: list[Sample]) -> np.ndarray:
        return np.log(np.array(x)) if log_scale else np.array(x) / scale

    units = _paired_units(spec, control, treated, n)
    if isinstance(units, Comparison):
        return units
    if units is None:
        blocks = len(set(control) & set(treated))
        return unpaired_test(
            n,
            tf(list(control.values())),
            tf(list(treated.values())),
            log_scale,
            rng,
            median_ratio,
            f"only {blocks} complete blocks of n={list(n)}: compared unpaired with "
            "Mann-Whitney U, so drift between blocks does not cancel",
        )
    paired = PairedUnits(n, tf(units[0]), tf(units[1]), units[2], median_ratio, units[3])
    if floor is not None and log_scale:
        return counted_t_test(paired, floor, ci_level)
    return rank_test(paired, log_scale, rng, ci_level)


def _beyond_a_float(n: tuple[int, int], t_med: float, c_med: float) -> Comparison:
    """The refusal of a comparison whose ratio of medians overflows a float (``1e150`` over
    ``1e-300``): no effect, interval or verdict can be given as a ratio."""
    reason = f"relative effect beyond a float: the medians {t_med:g} / {c_med:g} overflow"
    return Comparison(n, refusal=Refused(Refusal.FAILED, reason))


def _paired_units(
    spec: MetricRule, control: dict[Key, Sample], treated: dict[Key, Sample], n: tuple[int, int]
) -> tuple[list[Sample], list[Sample], str, str | None] | Comparison | None:
    """The units to pair, one value per side each, with their design and a note on what was
    dropped: each seed's median, or the complete blocks. A refusal where fewer than 2 seeds
    have both sides; None where too few complete blocks remain (compare unpaired)."""
    if next(iter(control))[1] is not None:  # seeded
        c_seed, t_seed = _per_seed(control), _per_seed(treated)
        shared = sorted(set(c_seed) & set(t_seed), key=str)
        if len(shared) < 2:
            return Comparison(
                n,
                refusal=Refused(
                    Refusal.TOO_SMALL, f"fewer than 2 seeds on both sides ({len(shared)})"
                ),
            )
        note = None
        if len(shared) < max(len(c_seed), len(t_seed)):
            note = f"seeds without both sides dropped; compared {len(shared)} seeds"
        return [c_seed[s] for s in shared], [t_seed[s] for s in shared], "paired seeds", note
    blocks = sorted(set(control) & set(treated))
    if len(blocks) < spec.min_replicates:
        return None
    note = None
    if not len(blocks) == len(control) == len(treated):
        note = f"incomplete blocks: compared the {len(blocks)} complete blocks of n={list(n)}"
    return [control[k] for k in blocks], [treated[k] for k in blocks], "paired blocks", note


def _per_seed(samples: dict[Key, float]) -> dict[int | None, float]:
    """The median of each seed's replicates: seeds, not replicates, are the units compared."""
    by_seed: dict[int | None, list[float]] = {}
    for (_, s), v in samples.items():
        by_seed.setdefault(s, []).append(v)
    return {s: float(np.median(v)) for s, v in by_seed.items()}


def _identity(
    n: tuple[int, int], control: dict[Key, Sample], treated: dict[Key, Sample]
) -> Comparison:
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
    return Comparison(n, test="identity", design="identity", units=len(treated), mismatch=mismatch)


def _verdict(
    spec: MetricRule,
    c: Comparison,
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
    mde = min_detectable_effect(c, mde_level, threshold)
    common.update(ratio=ratio, ci=c.ci, p=c.p, p_holm=p_holm, mde=mde, level=level)
    if rejected and beyond:
        better = (c.effect < 0) == (spec.direction == "lower")
        return Verdict("improved" if better else "regressed", **common)
    return Verdict(
        "no_change", reason=_no_change_reason(c, threshold, rejected, level, mde, p_holm), **common
    )


def _no_change_reason(
    c: Comparison, threshold: float, rejected: bool, level: float, mde: float, p_holm: float
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
