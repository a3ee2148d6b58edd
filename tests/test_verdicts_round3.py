"""Issue 35's verdict rules: every count of replicates runs, counters decide at three blocks,
words claim only what was shown, and a contradiction with any earlier run counts.

Real sessions on the synthetic generator of ``test_verdicts_round2`` (metrics of known truth),
records of its draws where only the judge across runs is tested (the contradiction), and the
analysis itself on many generated samples where a property must hold for every verdict.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import pytest
from gate2helpers import lazy_imports_done_outside_runs  # noqa: F401
from test_plan_verb import agent
from test_verdicts_round2 import measured, synthetic, verdict_of

from pytest_benchmark_agent.cli.outline import order_outline
from pytest_benchmark_agent.config import gate1
from pytest_benchmark_agent.config.metric import MetricSpec
from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.records.schema import TrialRecord
from pytest_benchmark_agent.stats.analysis import (
    Observation,
    PlainMetricRule,
    analyze_run,
    inside_band,
)

REPO_DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmark"


def pairs(control: list[float], treated: list[float]) -> dict[str, list[Observation]]:
    """One metric ``t``: block k of the control against block k of the treatment."""
    return {
        "t": [Observation("a", k, None, v) for k, v in enumerate(control)]
        + [Observation("b", k, None, v) for k, v in enumerate(treated)]
    }


# -- 1. a count that cannot decide is a warning, never a refusal --


def test_five_replicates_run_warn_with_the_arithmetic_and_stay_exploratory(project) -> None:
    synthetic(project, {"effect": {"b": 1.5}, "cv": 0.001}, replicates=5)
    planned = agent(project, "plan", "bench.yaml")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "UndecidableReplicatesWarning" in planned.stdout
    assert "2/2^5 = 0.0625" in " ".join(planned.stdout.split())
    result = project.run("bench.yaml", "-rw", subprocess=True)
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    assert "UndecidableReplicatesWarning" in out
    said = " ".join(out.split())
    assert "replicates: 5 blocks can never decide a timing's verdict" in said
    assert "2/2^5 = 0.0625, above the 0.05/1 = 0.05 that Holm's first step needs" in said
    assert "use replicates: 6" in said
    record = project.results()
    assert verdict_of(record)["reason"].startswith("could never decide: with 5 blocks")
    assert record["tag"] == "EXPLORATORY"
    # x1.5 with its whole interval beyond the 5% fail_threshold: never left unjudged
    failing = project.run("bench.yaml", "--bench-fail-on=regression", subprocess=True)
    assert failing.ret == 1, failing.stdout.str()


def test_the_plan_shows_the_same_warning_and_a_count_that_can_decide_none(tmp_path) -> None:
    def config(**overrides) -> BenchmarkConfig:
        document = {
            "name": "w",
            "params": {"mode": "a"},
            "treatment_variable": "mode",
            "treatments": ["a", "b", "c"],
            "stages": [
                {
                    "name": "m",
                    "kind": "measure",
                    "cmd": "echo t=1 {mode}",
                    "metrics_from": {"stdout": True, "fields": ["t"]},
                }
            ],
            "metrics": {"t": {"primary": True}},
        }
        return BenchmarkConfig.model_validate({**document, **overrides})

    why = gate1.replicates_cannot_decide(config(replicates=6))
    assert why is not None and "over 2 comparison(s)" in why and "use replicates: 7" in why
    assert gate1.replicates_cannot_decide(config(replicates=7)) is None
    assert gate1.replicates_cannot_decide(config(replicates=3)) is None  # below min_replicates
    with pytest.warns(gate1.UndecidableReplicatesWarning, match="2/2\\^6 = 0.03125"):
        gate1.check(config(replicates=6), tmp_path / "w.yaml")


# -- 2. counters decide at three blocks --


COUNTER = {"t": PlainMetricRule(primary=True, noise_threshold=0.002, min_replicates=3)}


def test_counts_decide_one_percent_at_three_blocks_and_identical_pairs_are_within() -> None:
    seeds_layout = [85_000_000, 87_500_000, 90_100_000]  # hash seeds move the whole count
    plus_one = [round(v * 1.01) for v in seeds_layout]
    floors = {"t": 0.0005}
    decided = analyze_run(
        pairs(seeds_layout, plus_one), COUNTER, ["a", "b"], "a", counter_floors=floors
    )
    verdict = decided.verdicts["t"]["b"]
    assert verdict.verdict == "regressed" and verdict.test.startswith("paired t on log ratios")
    assert verdict.ci[0] > 1.002 and verdict.mde < 0.01
    same = analyze_run(
        pairs(seeds_layout, seeds_layout), COUNTER, ["a", "b"], "a", counter_floors=floors
    )
    verdict = same.verdicts["t"]["b"]
    assert verdict.verdict == "no_change" and verdict.reason.startswith(
        "within the noise threshold"
    )
    ranked = analyze_run(pairs(seeds_layout, plus_one), COUNTER, ["a", "b"], "a")
    assert ranked.verdicts["t"]["b"].reason.startswith("could never decide")  # the rank test


def test_a_counted_file_of_three_replicates_does_not_warn() -> None:
    document = {
        "name": "c",
        "params": {"work": 1},
        "treatment_variable": "work",
        "treatments": [1, 2],
        "replicates": 3,
        "stages": [
            {"name": "m", "kind": "measure", "cmd": "true {work}", "counters": ["instructions"]}
        ],
        "metrics": {"instructions": {"primary": True}},
    }
    config = BenchmarkConfig.model_validate(document)
    assert config.metrics["instructions"].min_replicates == 3
    assert gate1.replicates_cannot_decide(config) is None


# -- 3. hash seeds: drawn per run, replayable --


def test_a_runs_hash_seeds_are_its_own_and_a_bad_replay_base_is_a_usage_error(project) -> None:
    from pytest_benchmark_agent.engine import counters
    from pytest_benchmark_agent.records import hashseeds

    one, other = hashseeds.hash_seed_base("run-1"), hashseeds.hash_seed_base("run-2")
    assert one != other and 0 <= one < hashseeds.HASH_SEEDS
    assert hashseeds.hash_seed(hashseeds.HASH_SEEDS - 1, 1) == 1  # wraps inside 1..HASH_SEEDS
    counting = counters.Counting(counters.Backend("cachegrind", "0", "valgrind"), [], Path("x"))
    assert counting.environment({}, 2, one)["PYTHONHASHSEED"] == str(hashseeds.hash_seed(one, 2))
    assert counting.environment({"PYTHONHASHSEED": "7"}, 2, one)["PYTHONHASHSEED"] == "7"
    synthetic(project, {"cv": 0.001}, replicates=6)
    for bad in ("abc", "-1", str(hashseeds.HASH_SEEDS), "1; rm -rf /"):
        result = project.run("bench.yaml", "--bench-hash-seeds", bad, subprocess=True)
        assert result.ret == 4, result.stdout.str()
        assert "give the hash_seed_base a run's results.yaml records" in result.stderr.str()
    assert not project.runs()  # nothing ran, nothing recorded


# -- 4. "within the noise threshold" only when the interval is inside the band --


def test_no_change_says_within_only_when_its_interval_lies_inside_the_band() -> None:
    """Many generated comparisons (n 3-20, noise 0.1-10%, effects -3%..+3%, bands 0.5-2%, the
    rank test and the counters' rule): every ``no_change`` that says "within" has its interval
    inside the band, and every one whose test did not pass and whose interval is not inside it
    says "not shown to differ" with its MDE."""
    rng = np.random.default_rng(35)
    seen = {"within": 0, "not shown to differ": 0}
    for case in range(400):
        n = int(rng.integers(3, 21))
        cv = float(rng.choice([0.001, 0.005, 0.02, 0.1]))
        effect = float(rng.choice([0.0, 0.003, -0.008, 0.015, -0.03]))
        band = float(rng.choice([0.005, 0.01, 0.02]))
        control = np.exp(rng.normal(0, cv, n)) * 10
        treated = control * (1 + effect) * np.exp(rng.normal(0, cv, n))
        spec = {"t": PlainMetricRule(primary=True, noise_threshold=band, min_replicates=3)}
        floors = {"t": 0.0005} if case % 2 else None
        result = analyze_run(
            pairs(list(control), list(treated)), spec, ["a", "b"], "a", counter_floors=floors
        )
        verdict = result.verdicts["t"]["b"]
        if verdict.verdict != "no_change" or verdict.reason.startswith("could never decide"):
            continue
        says_within = "within" in verdict.reason
        assert says_within == inside_band(verdict.ci, band), verdict
        if says_within:
            seen["within"] += 1
        elif "the test passes" not in verdict.reason:
            assert re.match(r"not shown to differ \(MDE \d+\.\d\d%\)", verdict.reason), verdict
            assert math.isfinite(verdict.mde)
            seen["not shown to differ"] += 1
    assert min(seen.values()) >= 20, seen  # both kinds were exercised


# -- 5. a contradiction with ANY earlier run counts --


def test_regressed_then_no_change_then_improved_ends_unreliable_naming_the_first(
    tmp_path: Path,
) -> None:
    """The issue's story: run 1 decides ``regressed``, run 2 (the effect shrunk) ``no_change``,
    run 3 (the effect flipped) ``improved``: run 3 contradicts run 1, not only run 2."""
    noisy = {"values": {"a": [10] * 6, "b": [14, 6.5, 13, 7, 14.5, 6.8]}}  # covers 0.7 and 1.3
    truths = ({"effect": {"b": 1.3}, "cv": 0.001}, noisy, {"effect": {"b": 0.7}, "cv": 0.001})
    first, second, third = (measured(tmp_path, f"r{i}", truth) for i, truth in enumerate(truths, 1))
    assert [verdict_of(r)["verdict"] for r in (first, second, third)] == [
        "regressed",
        "no_change",
        "improved",
    ]
    assert second["tag"] == "QUALIFIED"  # one decided, one not: inconclusive
    assert third["reproduces"]["problems"] == []  # against run 2 alone: inconclusive
    assert third["reproduces"]["run_id"] == "r2"  # the latest earlier run is the reference
    assert third["tag"] == "UNRELIABLE"
    assert any(
        reason.startswith("contradicts r1: `t` [b] improved") for reason in third["tag_reasons"]
    )


# -- 7. text that must stay true --


def test_the_outline_reads_the_recorded_positions() -> None:
    alternating = [
        TrialRecord(f"{t}{k}", t, k, "passed", "m", position=(k + i) % 2)
        for k in range(4)
        for i, t in enumerate(["a", "b"])
    ]
    said = order_outline(alternating, "a")
    assert "`a` in 2, `b` in 2 of 4" in said and "the order varied" in said
    control_first = [
        dataclasses.replace(t, position=0 if t.treatment == "a" else 1) for t in alternating
    ]
    said = order_outline(control_first, "a")
    assert "ran first in every block" in said and "would look like a treatment effect" in said
    unknown = [dataclasses.replace(t, position=None) for t in alternating]
    assert "cannot be ruled out" in order_outline(unknown, "a")


def test_the_format_reference_gives_each_metric_field_its_model_default() -> None:
    """FORMAT.md's MetricSpec table against the model (README once said a metric without a
    direction is an error, while FORMAT.md and the model default it to ``lower``)."""
    text = (REPO_DOCS / "FORMAT.md").read_text().split("### MetricSpec", 1)[1]
    rows = re.findall(r"^\| `(\w+)` \| [^|]+ \| ([^|]+) \|", text.split("\n\n###", 1)[0], re.M)
    assert rows
    from pytest_benchmark_agent.judge.evidence import DEFAULT_RUN_TO_RUN

    for field, written in rows:
        default = MetricSpec.model_fields[field].default
        shown = written.strip().strip("`").split(" ")[0]
        expected = {None: "none", False: "false", True: "true"}.get(default, str(default))
        if field == "fail_threshold":  # unset in the model: 5% (1% for a counter)
            from pytest_benchmark_agent.config.metric import SAMPLED_FAIL_THRESHOLD

            expected = f"{SAMPLED_FAIL_THRESHOLD:.0%}"
        if field == "run_to_run":  # unset in the model: the judge's default allowance applies
            expected = f"{DEFAULT_RUN_TO_RUN:.0%}"
        assert shown == expected or float(shown) == default, (field, written)
    readme = (REPO_DOCS.parent.parent / "README.md").read_text()
    assert "a metric without a direction," not in readme
