"""Every verdict path of the gate-2 statistics, on fixed-seed synthetic samples."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import yaml
from scipy import stats

from pytest_benchmark_agent.stats.analysis import (
    Observation,
    PlainMetricRule,
    analyze_run,
)
from pytest_benchmark_agent.stats.sequential import Looks, look_schedule, sequential_decision

TREATMENTS = ["base", "new"]
PRIMARY = PlainMetricRule(direction="lower", primary=True)


def blocks(
    n: int,
    factor: float,
    *,
    cv: float = 0.03,
    seed: int = 1,
    drift: float = 0.0,
    base: float = 10.0,
    start: int = 0,
) -> list[Observation]:
    """``n`` blocks of (base, new); new is ``factor`` times base; drift is shared per block."""
    rng = np.random.default_rng(seed)
    level = np.exp(np.cumsum(rng.normal(0.0, drift, n))) if drift else np.ones(n)
    out = []
    for k in range(n):
        noise = np.exp(rng.normal(0.0, cv, 2))
        out.append(Observation("base", start + k, None, float(base * level[k] * noise[0])))
        out.append(Observation("new", start + k, None, float(base * level[k] * factor * noise[1])))
    return out


def constant(n: int, base: float, new: float) -> list[Observation]:
    """A deterministic metric (e.g. recall) with one value per treatment."""
    return [Observation(t, k, None, v) for k in range(n) for t, v in (("base", base), ("new", new))]


def verdict(observations, specs, treatments=TREATMENTS, **kw):
    analysis = analyze_run(observations, specs, treatments, "base", **kw)
    return analysis, {
        m: {t: v.to_dict() for t, v in per.items()} for m, per in analysis.verdicts.items()
    }


def test_clear_speedup_is_improved_with_full_record():
    analysis, v = verdict({"t": blocks(10, 0.8)}, {"t": PRIMARY})
    rec = v["t"]["new"]
    assert rec["verdict"] == "improved"
    assert rec["ratio"] == pytest.approx(0.8, rel=0.03)
    assert rec["ci"][0] < rec["ratio"] < rec["ci"][1] < 1
    assert rec["p_holm"] == rec["p"] < 0.05
    assert rec["n"] == [10, 10] and rec["units"] == 10
    assert rec["design"] == "paired blocks" and rec["test"].startswith("block-swap rank test")
    assert 0.01 <= rec["mde"] < 0.2
    assert analysis.refusals == [] and analysis.caveats == []
    assert yaml.safe_load(yaml.safe_dump(analysis.as_record()))["verdicts"]["t"]["new"] == rec


def test_slowdown_is_regressed_and_higher_is_better_flips_it():
    _, v = verdict({"t": blocks(10, 1.2)}, {"t": PRIMARY})
    assert v["t"]["new"]["verdict"] == "regressed"
    _, v = verdict(
        {"qps": blocks(10, 1.2)}, {"qps": PlainMetricRule(direction="higher", primary=True)}
    )
    assert v["qps"]["new"]["verdict"] == "improved"


def test_significant_effect_inside_noise_threshold_is_no_change():
    _, v = verdict({"t": blocks(10, 0.995, cv=0.0005)}, {"t": PRIMARY})
    rec = v["t"]["new"]
    assert rec["p"] == 2 / 2**10 and rec["ci"][1] < 1  # real (every block), but only 0.5%
    assert rec["verdict"] == "no_change"
    assert rec["reason"].startswith("within the noise threshold 1.00%: ratio 0.99")
    _, v = verdict(
        {"t": blocks(10, 0.995, cv=0.0005)},
        {"t": PlainMetricRule(primary=True, noise_threshold=0.002)},
    )
    assert v["t"]["new"]["verdict"] == "improved"


def test_a_real_effect_whose_interval_reaches_into_the_band_is_not_called_within_it():
    """The test passes and the estimate is past the band, but the interval's near end lies
    inside it: no_change, and the reason says the size is unsure rather than 'within'."""
    _, v = verdict({"t": blocks(10, 0.985, cv=0.01, seed=1)}, {"t": PRIMARY})
    rec = v["t"]["new"]
    assert rec["p"] < 0.05 and rec["ci"][0] < 0.99 < rec["ci"][1] < 1
    assert rec["verdict"] == "no_change"
    assert rec["reason"].startswith(
        "not shown beyond the noise threshold 1.00%: the test passes, but the interval reaches "
        "into the band 1 +/- 1.00%: ratio 0.98"
    )


def test_effect_smaller_than_the_noise_is_no_change_with_its_detectable_effect():
    _, v = verdict({"t": blocks(5, 0.97, cv=0.2, seed=3)}, {"t": PRIMARY})
    rec = v["t"]["new"]
    assert rec["verdict"] == "no_change"
    assert rec["mde"] > 0.1  # a 3% effect was never detectable at n=5 with 20% noise


def test_detectable_effect_shrinks_with_more_blocks():
    small = verdict({"t": blocks(5, 1.0, cv=0.05)}, {"t": PRIMARY})[1]["t"]["new"]["mde"]
    large = verdict({"t": blocks(40, 1.0, cv=0.05)}, {"t": PRIMARY})[1]["t"]["new"]["mde"]
    assert 0.01 < large < small


def test_the_mde_is_the_effect_detected_four_times_in_five():
    """At a true effect equal to the median reported MDE the rule decides about 80% of runs
    (80 seeded runs of 10 blocks: sampling error about 4.5 points; the calibration's table
    measures it with hundreds per cell)."""
    mdes = [
        verdict({"t": blocks(10, 1.0, cv=0.05, seed=s)}, {"t": PRIMARY})[1]["t"]["new"]["mde"]
        for s in range(40)
    ]
    mde = float(np.median(mdes))
    hits = [
        verdict({"t": blocks(10, 1 + mde, cv=0.05, seed=100 + s)}, {"t": PRIMARY})[1]["t"]["new"]
        for s in range(80)
    ]
    power = np.mean([h["verdict"] == "regressed" for h in hits])
    assert 0.68 <= power <= 0.92


def test_mde_terms_interpolate_between_the_calibrated_rows():
    from pytest_benchmark_agent.stats.mde import MDE_TERMS, mde_terms

    assert mde_terms(3) == mde_terms(6) == MDE_TERMS[0][1:]
    (n0, a0, b0), (n1, a1, b1) = next(
        (low, high)
        for low, high in zip(MDE_TERMS, MDE_TERMS[1:], strict=False)
        if high[0] - low[0] > 1
    )
    f = 1 / (n1 - n0)  # one unit past the lower row
    assert mde_terms(n0 + 1) == pytest.approx((a0 + f * (a1 - a0), b0 + f * (b1 - b0)))
    assert mde_terms(500) == MDE_TERMS[-1][1:]


def test_too_few_replicates_is_not_comparable():
    analysis, v = verdict({"t": blocks(3, 0.5)}, {"t": PRIMARY})
    assert v["t"]["new"]["verdict"] == "not_comparable"
    assert v["t"]["new"]["reason"] == "too few replicates (n=3, needed 5)"
    assert analysis.refusals == ["t [new]: not comparable: too few replicates (n=3, needed 5)"]
    # allowed to compare 3 blocks, it compares them, but no test respecting them can decide
    _, v = verdict({"t": blocks(3, 0.5)}, {"t": PlainMetricRule(primary=True, min_replicates=3)})
    assert v["t"]["new"]["verdict"] == "no_change" and v["t"]["new"]["mde"] == float("inf")
    assert v["t"]["new"]["reason"] == (
        "could never decide: with 3 blocks the smallest two-sided p is 0.25 (2/2^3), above the "
        "level 0.05; deciding needs at least 6 blocks"
    )


def test_missing_samples_are_not_comparable():
    analysis, v = verdict({"t": blocks(6, 0.5)}, {"t": PRIMARY, "recall": PlainMetricRule()})
    assert v["recall"]["new"] == {
        **v["recall"]["new"],
        "verdict": "not_comparable",
        "reason": "no samples for the control",
    }
    assert "recall [new]: not comparable: no samples for the control" in analysis.refusals


def test_holm_correction_turns_two_marginal_wins_into_no_change():
    z = np.array([-1.5, -1, -0.5, 0, 0, 0, 0, 0.5, 1, 1.5])
    base = 10 * (1 + 0.01 * np.arange(10))

    def marginal(order):
        new = base * np.exp(-0.05 + 0.078 * z[order])
        return [Observation("base", k, None, float(base[k])) for k in range(10)] + [
            Observation("new", k, None, float(new[k])) for k in range(10)
        ]

    x, y = marginal(np.arange(10)), marginal(np.arange(10)[::-1])
    _, alone = verdict({"x": x}, {"x": PRIMARY})
    assert alone["x"]["new"]["verdict"] == "improved"
    assert 0.025 < alone["x"]["new"]["p"] < 0.05
    _, both = verdict({"x": x, "y": y}, {"x": PRIMARY, "y": PlainMetricRule()})
    for metric in ("x", "y"):
        rec = both[metric]["new"]
        assert rec["p"] < 0.05 < rec["p_holm"]
        assert rec["verdict"] == "no_change" and "Holm" in rec["reason"]


def test_holm_spans_treatments_too():
    treatments = ["base", "new", "other"]
    obs = blocks(10, 0.7) + [
        Observation("other", o.replicate, None, o.value)
        for o in blocks(10, 1.0, seed=9)
        if o.treatment == "new"
    ]
    _, v = verdict({"t": obs}, {"t": PRIMARY}, treatments)
    assert v["t"]["new"]["verdict"] == "improved"
    assert v["t"]["new"]["p_holm"] == pytest.approx(2 * v["t"]["new"]["p"])
    assert v["t"]["other"]["verdict"] == "no_change"


def test_guard_regression_blocks_the_win_but_not_a_regression():
    specs = {"t": PRIMARY, "recall": PlainMetricRule(direction="higher", guard=True)}
    obs = {"t": blocks(8, 0.7), "recall": blocks(8, 0.9, base=0.9, seed=2)}
    analysis, v = verdict(obs, specs)
    assert v["recall"]["new"]["verdict"] == "regressed"
    assert v["t"]["new"]["verdict"] == "not_comparable"
    assert v["t"]["new"]["reason"].startswith("guard recall regressed")
    assert v["t"]["new"]["ratio"] == pytest.approx(0.7, rel=0.05)  # the effect is still shown
    assert any(c.startswith("new: guard recall regressed") for c in analysis.caveats)
    assert any(r.startswith("t [new]: not comparable: guard recall") for r in analysis.refusals)

    _, v = verdict({"t": blocks(8, 1.3), "recall": obs["recall"]}, specs)
    assert v["t"]["new"]["verdict"] == "regressed"


def test_floor_blocks_the_win():
    specs = {"t": PRIMARY, "recall": PlainMetricRule(direction="higher", floor=0.95)}
    analysis, v = verdict({"t": blocks(7, 0.7), "recall": constant(7, 0.951, 0.949)}, specs)
    assert v["recall"]["new"]["verdict"] == "no_change"  # -0.2% is noise-level...
    assert v["t"]["new"]["verdict"] == "not_comparable"  # ...but it is below the floor
    assert v["t"]["new"]["reason"] == "guard recall median 0.949 is below its floor 0.95"
    _, v = verdict({"t": blocks(7, 0.7), "recall": constant(7, 0.951, 0.951)}, specs)
    assert v["t"]["new"]["verdict"] == "improved"


def test_control_below_floor_is_a_caveat():
    specs = {"t": PRIMARY, "recall": PlainMetricRule(direction="higher", floor=0.95)}
    analysis, _ = verdict({"t": blocks(6, 0.7), "recall": constant(6, 0.90, 0.96)}, specs)
    assert analysis.caveats == ["control base: guard recall median 0.9 is below its floor 0.95"]


def test_ceiling_blocks_the_win():
    specs = {"t": PRIMARY, "rss": PlainMetricRule(direction="lower", guard=True, ceiling=100)}
    _, v = verdict({"t": blocks(7, 0.7), "rss": constant(7, 90.0, 120.0)}, specs)
    assert v["t"]["new"]["verdict"] == "not_comparable"
    assert "guard rss median 120 is above its ceiling 100" in v["t"]["new"]["reason"]


def test_equal_guard_any_differing_value_blocks_the_win():
    specs = {"t": PRIMARY, "checksum": PlainMetricRule(direction="equal", guard=True)}
    same = constant(6, 4242.0, 4242.0)
    _, v = verdict({"t": blocks(6, 0.7), "checksum": same}, specs)
    assert v["checksum"]["new"]["verdict"] == "no_change"
    assert v["t"]["new"]["verdict"] == "improved"

    one_off = [
        o if (o.treatment, o.replicate) != ("new", 4) else Observation("new", 4, None, 17.0)
        for o in same
    ]
    analysis, v = verdict({"t": blocks(6, 0.7), "checksum": one_off}, specs)
    assert v["checksum"]["new"]["verdict"] == "regressed"
    assert v["checksum"]["new"]["reason"] == (
        "1 of 6 values differ from the control's 4242 (e.g. 17)"
    )
    assert v["t"]["new"]["verdict"] == "not_comparable"
    assert "guard checksum regressed (1 of 6 values differ" in v["t"]["new"]["reason"]
    assert v["checksum"]["new"]["p"] is None  # an identity check is not in the Holm family


def seeded(seeds, replicates, factor_for_seed, seed_spread=0.3, cv=0.02, rng_seed=5):
    """Samples with a large per-seed offset shared by both treatments (same data per seed)."""
    rng = np.random.default_rng(rng_seed)
    out = []
    for s in seeds:
        level = 10 * np.exp(rng.normal(0, seed_spread))
        for k in range(replicates):
            noise = np.exp(rng.normal(0, cv, 2))
            out.append(Observation("base", k, s, float(level * noise[0])))
            out.append(Observation("new", k, s, float(level * factor_for_seed(s) * noise[1])))
    return out


def test_a_single_lucky_seed_cannot_carry_a_win():
    obs = seeded(range(1, 6), 3, lambda s: 0.5 if s == 3 else 1.0)
    _, v = verdict({"t": obs}, {"t": PRIMARY})
    rec = v["t"]["new"]
    assert rec["design"] == "paired seeds" and rec["units"] == 5 and rec["n"] == [15, 15]
    assert rec["verdict"] == "no_change"


def test_a_consistent_effect_across_seeds_wins_despite_seed_spread():
    obs = seeded(range(1, 7), 3, lambda s: 0.9)
    _, v = verdict({"t": obs}, {"t": PRIMARY})
    assert v["t"]["new"]["verdict"] == "improved"
    assert v["t"]["new"]["ratio"] == pytest.approx(0.9, rel=0.02)


def test_seed_missing_on_one_side_is_dropped_with_a_caveat():
    obs = [
        o
        for o in seeded(range(1, 7), 2, lambda s: 0.9)
        if not (o.treatment == "new" and o.seed == 6)
    ]
    analysis, v = verdict({"t": obs}, {"t": PRIMARY})
    assert v["t"]["new"]["units"] == 5
    assert analysis.caveats == ["t [new]: seeds without both sides dropped; compared 5 seeds"]


def test_drift_between_blocks_cancels_in_the_paired_comparison():
    obs = blocks(12, 1.05, cv=0.01, drift=0.1, seed=4)
    base = [o.value for o in obs if o.treatment == "base"]
    new = [o.value for o in obs if o.treatment == "new"]
    assert stats.mannwhitneyu(new, base).pvalue > 0.05  # drift hides the 5% from unpaired tests
    _, v = verdict({"t": obs}, {"t": PRIMARY})
    assert v["t"]["new"]["verdict"] == "regressed"


def test_a_failed_trial_leaves_the_complete_blocks_paired():
    obs = [o for o in blocks(8, 0.8) if (o.treatment, o.replicate) != ("new", 3)]
    analysis, v = verdict({"t": obs}, {"t": PRIMARY})
    rec = v["t"]["new"]
    assert rec["verdict"] == "improved" and rec["design"] == "paired blocks"
    assert rec["n"] == [8, 7] and rec["units"] == 7
    assert analysis.caveats == [
        "t [new]: incomplete blocks: compared the 7 complete blocks of n=[8, 7]"
    ]


def test_too_few_complete_blocks_fall_back_to_mann_whitney():
    obs = blocks(3, 0.8) + blocks(3, 0.8, start=10, seed=2)
    obs = [o for o in obs if not (o.treatment == "new" and o.replicate >= 10)]
    obs += [
        Observation("new", 20 + o.replicate, None, o.value)
        for o in blocks(3, 0.8, start=0, seed=3)
        if o.treatment == "new"
    ]
    analysis, v = verdict({"t": obs}, {"t": PRIMARY})
    rec = v["t"]["new"]
    assert rec["test"] == "Mann-Whitney U" and rec["design"] == "unpaired"
    assert rec["verdict"] == "improved"
    assert "drift between blocks does not cancel" in analysis.caveats[0]


def test_non_positive_values_compare_as_differences_relative_to_the_control():
    obs = [Observation(o.treatment, o.replicate, None, o.value - 10.5) for o in blocks(8, 1.1)]
    _, v = verdict({"score": obs}, {"score": PlainMetricRule(direction="higher", primary=True)})
    assert v["score"]["new"]["verdict"] == "improved"  # -0.5 -> +0.5 on average
    zero = constant(6, 0.0, 0.0) + [
        Observation("base", 9, None, 1.0),
        Observation("new", 9, None, 2.0),
    ]
    _, v = verdict({"errors": zero}, {"errors": PlainMetricRule()})
    assert v["errors"]["new"]["reason"] == "relative effect undefined: the control median is 0"


def test_identical_values_are_no_change():
    _, v = verdict({"t": constant(6, 3.0, 3.0)}, {"t": PRIMARY})
    assert v["t"]["new"]["verdict"] == "no_change" and v["t"]["new"]["ci"] == [1.0, 1.0]


def test_same_input_same_output_whatever_the_order():
    def run(obs, seed):
        return analyze_run({"t": obs}, {"t": PRIMARY}, TREATMENTS, "base", seed=seed).as_record()

    exact = blocks(9, 0.97, cv=0.05)  # every label swap enumerated: the seed plays no part
    assert run(exact, 7) == run(exact[::-1], 7) == run(exact, 8)
    drawn = blocks(15, 0.97, cv=0.05)  # random swaps, drawn from the seed
    assert run(drawn, 7) == run(drawn[::-1], 7)
    assert run(drawn, 7)["verdicts"]["t"]["new"]["p"] != run(drawn, 8)["verdicts"]["t"]["new"]["p"]


def test_metrics_without_a_spec_get_no_verdict():
    analysis, _ = verdict({"t": blocks(6, 0.8), "cpu_s": blocks(6, 0.8)}, {"t": PRIMARY})
    assert set(analysis.verdicts) == {"t"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"treatments": ["base"], "obs": blocks(5, 1.0)}, "unknown treatment 'new'"),
        ({"obs": blocks(5, 1.0) + blocks(1, 1.0)}, "two observations for treatment 'base'"),
        ({"spec": PlainMetricRule(direction="faster")}, "metrics.t.direction='faster'"),
        ({"spec": PlainMetricRule(noise_threshold=-1)}, "metrics.t.noise_threshold=-1"),
        ({"control": "missing"}, "control 'missing' is not one of the treatments"),
        (
            {"obs": blocks(5, 1.0) + [Observation("new", 9, 1, 1.0)]},
            "some observations have a seed",
        ),
    ],
)
def test_bad_input_names_what_to_fix(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        analyze_run(
            {"t": kwargs.get("obs", blocks(5, 1.0))},
            {"t": kwargs.get("spec", PRIMARY)},
            kwargs.get("treatments", TREATMENTS),
            kwargs.get("control", "base"),
        )


def sequential(obs, k, lo=5, hi=20, specs=None):
    return sequential_decision(
        {"t": [o for o in obs if o.replicate < k]},
        specs or {"t": PRIMARY},
        TREATMENTS,
        "base",
        blocks_done=k,
        looks=Looks(lo, hi),
    )


def test_look_schedule_grows_geometrically_and_ends_at_max():
    assert look_schedule(5, 20) == (5, 7, 9, 12, 15, 20)
    assert look_schedule(5, 5) == (5,)
    assert look_schedule(3, 4) == (3, 4)


def test_sequential_stops_early_on_a_big_effect():
    obs = blocks(20, 0.7, cv=0.03)
    first = sequential(obs, 5)
    assert not first.stop and first.level < 0.001  # the first look spends almost nothing
    stop = next(k for k in range(5, 21) if sequential(obs, k).stop)
    decision = sequential(obs, stop)
    assert stop < 20 and decision.reason == f"every primary verdict decided after {stop} blocks"
    assert decision.analysis.verdicts["t"]["new"].verdict == "improved"
    assert decision.analysis.verdicts["t"]["new"].level == decision.level < 0.05


def test_sequential_runs_to_max_when_there_is_no_effect():
    obs = blocks(20, 1.0, cv=0.05, seed=11)
    stops = [k for k in range(5, 21) if sequential(obs, k).stop]
    assert stops == [20]
    final = sequential(obs, 20)
    assert final.reason.startswith("reached max 20 blocks; undecided: t[new] (no_change)")
    assert 0.03 < final.level < 0.05


def test_sequential_stops_when_the_ci_is_inside_the_noise_band():
    decision = sequential(blocks(20, 1.0, cv=0.001), 5)
    assert decision.stop and decision.analysis.verdicts["t"]["new"].verdict == "no_change"


def test_sequential_never_stops_between_looks():
    decision = sequential(blocks(20, 0.5, cv=0.02), 6)
    assert not decision.stop and decision.reason == "6 of 20 blocks; next look at block 7"
    # valid if forced to end, which spends this look's tiny share of alpha: no 6 blocks reach it
    assert decision.analysis.verdicts["t"]["new"].reason.startswith("could never decide")


def test_sequential_with_min_equal_max_is_the_fixed_design():
    obs = blocks(8, 0.97, cv=0.04, seed=2)
    fixed = analyze_run({"t": obs}, {"t": PRIMARY}, TREATMENTS, "base").as_record()
    decision = sequential(obs, 8, lo=8, hi=8)
    assert decision.stop and decision.analysis.as_record() == fixed


def test_a_noisy_first_look_has_an_unbounded_mde_instead_of_an_overflow():
    # the first of looks up to 40 blocks has a level near 1e-8: its t quantile at 2 df is in the
    # thousands, thousands of standard errors beyond what expm1 can take
    decision = sequential(blocks(5, 1.0, cv=0.5, seed=4), 5, hi=40)
    assert not decision.stop and decision.analysis.verdicts["t"]["new"].mde == float("inf")


def test_sequential_refuses_bad_bounds():
    with pytest.raises(ValueError, match="blocks_done=3 is below min_blocks=5"):
        sequential(blocks(5, 1.0), 3)
    with pytest.raises(ValueError, match="need 1 <= min <= max"):
        sequential(blocks(5, 1.0), 5, lo=6, hi=5)


def test_peeking_with_alpha_spending_keeps_false_positives_down():
    """Stopping at the first 'significant' look inflates false positives; spending does not.

    No noise threshold: the test alone decides, as it would for a tiny threshold."""
    naive = spent = 0
    runs = 150
    specs = {"t": PlainMetricRule(primary=True, noise_threshold=0.0)}
    for r in range(runs):
        obs = blocks(20, 1.0, cv=0.05, seed=1000 + r)
        for k in look_schedule(5, 20):
            part = {"t": [o for o in obs if o.replicate < k]}
            if analyze_run(part, specs, TREATMENTS, "base").verdicts["t"]["new"].verdict != (
                "no_change"
            ):
                naive += 1
                break
        for k in look_schedule(5, 20):
            decision = sequential(obs, k, specs=specs)
            if decision.stop:
                spent += decision.analysis.verdicts["t"]["new"].verdict != "no_change"
                break
    assert spent <= 0.06 * runs < naive


def test_tied_discrete_values_still_get_a_finite_interval():
    rng = np.random.default_rng(8)
    obs = []
    for k in range(12):
        obs.append(Observation("base", k, None, float(rng.choice([0.92, 0.92, 0.91]))))
        obs.append(Observation("new", k, None, float(rng.choice([0.90, 0.90, 0.89]))))
    _, v = verdict({"recall": obs}, {"recall": PlainMetricRule(direction="higher", primary=True)})
    rec = v["recall"]["new"]
    assert rec["verdict"] == "regressed"
    assert all(np.isfinite(rec["ci"])) and rec["ci"][0] <= rec["ratio"] <= rec["ci"][1] < 1


def test_importing_the_analysis_imports_no_scipy():
    """Its import is paid by every judged session that compares: scipy.stats comes with the
    Mann-Whitney fallback only."""
    code = (
        "import sys; import pytest_benchmark_agent.stats.analysis; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'scipy'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['numpy']"


def test_an_equal_guard_on_text_blocks_the_win_and_is_decided_at_the_first_look():
    specs = {"t": PRIMARY, "digest": PlainMetricRule(direction="equal", guard=True)}
    digests = [
        Observation(t, k, None, "00ff" if (t, k) != ("new", 2) else "00fe")
        for k in range(6)
        for t in TREATMENTS
    ]
    _, v = verdict({"t": blocks(6, 0.7), "digest": digests}, specs)
    assert v["digest"]["new"]["reason"] == (
        "1 of 6 values differ from the control's 00ff (e.g. 00fe)"
    )
    assert v["t"]["new"]["verdict"] == "not_comparable"
    assert "guard digest regressed" in v["t"]["new"]["reason"]
    only = {"digest": PlainMetricRule(direction="equal", primary=True)}
    decision = sequential_decision(
        {"digest": digests[:10]},
        only,
        TREATMENTS,
        "base",
        blocks_done=5,
        looks=Looks(5, 20),
    )
    assert decision.stop and decision.reason == "every primary verdict decided after 5 blocks"
    assert decision.analysis.verdicts["digest"]["new"].reason == (
        "1 of 5 values differ from the control's 00ff (e.g. 00fe)"
    )
