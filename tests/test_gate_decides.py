"""Issue 44: the gate and bisect decide. The gate's rule read on the interval, the default
``fail_threshold``, the adaptive blocks of ``--bench-against`` and their Pocock level, the
command-line design options (with their hostile inputs), and real sessions in real git
repositories (the synthetic metric of ``benchmarks/bench_against_counts.py``, of known truth).
The rates over many sessions are ``benchmarks/time_to_verdict.py``'s."""

from __future__ import annotations

import argparse
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from benchhelpers import git

from pytest_benchmark_agent.config.metric import MetricSpec, default_fail_threshold
from pytest_benchmark_agent.config.models import BenchmarkConfig, ReplicateRange
from pytest_benchmark_agent.engine.blocks import (
    SessionDesign,
    fail_threshold_option,
    midpoint_option,
    replicates_option,
)
from pytest_benchmark_agent.errors import ConfigError
from pytest_benchmark_agent.judge.evidence import gate_decision, judge_metric
from pytest_benchmark_agent.stats.comparability import Verdict
from pytest_benchmark_agent.stats.distributions import ndtri
from pytest_benchmark_agent.stats.sequential import look_schedule, pocock_level

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_against_counts.py"
_spec = importlib.util.spec_from_file_location("bench_against_counts", SCRIPT)
assert _spec is not None and _spec.loader is not None
counts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(counts)
Repo, bench_file = counts.Repo, counts.bench_file  # the synthetic repository


def verdict(low: float, high: float, word: str = "no_change", **more: object) -> Verdict:
    return Verdict(word, ratio=math.sqrt(low * high), ci=(low, high), mde=0.03, **more)


# -- the rule, read on the interval ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("low", "high", "word", "expected"),
    [
        (0.98, 1.03, "no_change", "passed"),  # a 5% regression is ruled out
        (1.01, 1.049, "regressed", "passed"),  # shown, and kept within 5%
        (1.06, 1.09, "regressed", "regressed"),  # the whole interval beyond 5%
        (1.06, 1.09, "no_change", "regressed"),  # ... whatever the verdict says
        (1.02, 1.08, "regressed", "regressed"),  # shown, and 5% not ruled out
        (0.99, 1.08, "no_change", None),  # neither ruled out nor shown: more blocks
        (0.90, 0.97, "improved", "passed"),
    ],
)
def test_the_gate_reads_fail_threshold_on_the_interval(
    low: float, high: float, word: str, expected: str | None
) -> None:
    assert gate_decision(verdict(low, high, word), 0.05, "lower", "gate") == expected


def test_higher_is_better_metrics_mirror_the_rule() -> None:
    assert gate_decision(verdict(0.97, 1.02), 0.05, "higher", "gate") == "passed"
    assert gate_decision(verdict(0.90, 0.94, "regressed"), 0.05, "higher", "gate") == "regressed"
    assert gate_decision(verdict(0.92, 1.01), 0.05, "higher", "gate") is None


def test_a_bisect_step_places_its_interval_against_the_midpoint() -> None:
    midpoint = 0.2247  # x1.2247, halfway (geometrically) from GOOD to a x1.5 BAD
    assert gate_decision(verdict(1.30, 1.70, "regressed"), midpoint, "lower", "midpoint") == (
        "regressed"
    )
    assert gate_decision(verdict(0.85, 1.15), midpoint, "lower", "midpoint") == "passed"
    # a significant regression that straddles the midpoint decides nothing
    assert gate_decision(verdict(1.05, 1.40, "regressed"), midpoint, "lower", "midpoint") is None


def test_the_gate_lines_say_which_rule_decided_without_contradicting_themselves() -> None:
    spec = MetricSpec(primary=True)
    passed = judge_metric("`m` [t]", verdict(0.98, 1.03), "m", spec)
    assert passed.outcome == "passed"
    assert passed.text.endswith("the interval rules out a regression beyond fail_threshold 5%")
    assert "could have seen" not in passed.text
    beyond = judge_metric("`m` [t]", verdict(1.06, 1.09, "regressed"), "m", spec)
    assert "beyond fail_threshold 5%" in beyond.text
    assert beyond.text.endswith("its whole interval lies beyond it")
    open_ = judge_metric("`m` [t]", verdict(0.99, 1.08), "m", spec)
    assert open_.outcome == "unjudged" and "could not rule out a 5% regression" in open_.text
    at_look = verdict(0.98, 1.03, extra={"ci_level": 0.9866})
    assert "98.7% interval [0.98, 1.03]" in judge_metric("`m` [t]", at_look, "m", spec).text


def test_an_interval_wholly_above_or_below_one_is_never_printed_no_change() -> None:
    assert verdict(1.002, 1.008).word == "changed"
    assert verdict(0.99, 0.998).word == "changed"
    assert verdict(0.99, 1.01).word == "no_change"
    assert verdict(1.06, 1.09, "regressed").word == "regressed"


def test_fail_threshold_defaults_to_5_percent_1_for_counts_never_below_noise() -> None:
    assert default_fail_threshold("p50_ms", MetricSpec()) == 0.05
    assert default_fail_threshold("instructions", MetricSpec(noise_threshold=0.002)) == 0.01
    assert default_fail_threshold("p50_ms", MetricSpec(noise_threshold=0.08)) == 0.08
    assert default_fail_threshold("p50_ms", MetricSpec(fail_threshold=0.02)) == 0.02


# -- the looks' level -----------------------------------------------------------------------------


def test_pocock_level_holds_alpha_over_the_adaptive_looks() -> None:
    """One look is the fixed design; more looks lower the level; and testing every look of
    8..40 at it rejects a true null in about alpha of 20,000 simulated runs (normal blocks)."""
    looks = look_schedule(8, 40)
    assert looks == (8, 10, 13, 17, 22, 28, 40)
    level = pocock_level(0.05, looks)
    assert abs(pocock_level(0.05, (8,)) - 0.05) < 0.003
    assert 0.011 < level < 0.016 and pocock_level(0.05, look_schedule(3, 40)) < level
    rng = np.random.default_rng(7)
    steps = rng.standard_normal((20_000, 40)).cumsum(axis=1)
    z = np.stack([np.abs(steps[:, k - 1]) / math.sqrt(k) for k in looks], axis=1)
    bound = -ndtri(level / 2)
    rejected = float(np.mean((z > bound).any(axis=1)))
    assert 0.04 < rejected < 0.06


# -- the command line's design --------------------------------------------------------------------


def config(**fields: object) -> BenchmarkConfig:
    stage = {
        "name": "m",
        "kind": "measure",
        "cmd": "true",
        "metrics_from": {"stdout": True, "fields": ["v"]},
    }
    document = {"name": "d", "stages": [stage], "metrics": {"v": {"primary": True}}, **fields}
    return BenchmarkConfig.model_validate(document)


def test_adaptive_blocks_are_the_default_only_for_revisions_without_declared_replicates() -> None:
    design = SessionDesign()
    adaptive = design.apply(config(), "f.yaml", revisions=True).replicates
    assert adaptive == ReplicateRange(min=8, max=40, until="gate")
    assert design.apply(config(), "f.yaml", revisions=False).replicates == 7
    assert design.apply(config(replicates=5), "f.yaml", revisions=True).replicates == 5
    declared = design.apply(config(replicates={"min": 6, "max": 12}), "f.yaml", revisions=True)
    assert declared.replicates == ReplicateRange(min=6, max=12)  # until: the judge's default


def test_a_counted_primary_starts_its_adaptive_blocks_at_three() -> None:
    counted = config(
        stages=[{"name": "m", "kind": "measure", "cmd": "true", "counters": ["instructions"]}],
        metrics={"instructions": {"primary": True}},
    )
    replicates = SessionDesign().apply(counted, "f.yaml", revisions=True).replicates
    assert replicates == ReplicateRange(min=3, max=40, until="gate")


def test_the_command_line_replaces_replicates_and_thresholds_for_one_session() -> None:
    design = SessionDesign(replicates=(4, 9), fail_thresholds={"": 0.1})
    applied = design.apply(config(replicates=20), "f.yaml", revisions=False)
    assert applied.replicates == ReplicateRange(min=4, max=9)
    assert applied.metrics["v"].fail_threshold == 0.1
    hunting = SessionDesign(midpoints={"v": 1.2247}).apply(config(), "f.yaml", revisions=True)
    assert hunting.replicates.until == "midpoint"
    assert hunting.metrics["v"].fail_threshold == pytest.approx(0.2247)


def test_a_design_option_naming_no_primary_metric_is_refused_by_name() -> None:
    with pytest.raises(ConfigError) as caught:
        SessionDesign(fail_thresholds={"p99": 0.05}).apply(config(), "f.yaml", revisions=False)
    assert "--bench-fail-threshold" in str(caught.value) and "p99" in str(caught.value)
    assert "name one of its primary metrics (v)" in str(caught.value)


@pytest.mark.parametrize("text", ["0", "-3", "5:3", "a", "3:", ":4", "8:99999", "1e3"])
def test_hostile_replicates_options_are_usage_errors(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="--bench-replicates 8:40"):
        replicates_option(text)


def test_replicates_options_read_a_count_or_a_range() -> None:
    assert replicates_option("12") == 12 and replicates_option("8:40") == (8, 40)


@pytest.mark.parametrize("text", ["0", "150%", "nan", "inf", "p50=", "x", "-5%"])
def test_hostile_fail_thresholds_are_usage_errors(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="above 0 and at most 100%"):
        fail_threshold_option(text)


def test_fail_thresholds_read_a_fraction_or_a_percentage_per_metric() -> None:
    assert fail_threshold_option("5%") == ("", 0.05)
    assert fail_threshold_option("p50_ms=0.02") == ("p50_ms", 0.02)


@pytest.mark.parametrize("text", ["1.2", "=1.2", "m=1", "m=0", "m=-2", "m=nan", "m=x"])
def test_hostile_midpoints_are_usage_errors(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="METRIC=RATIO"):
        midpoint_option(text)


# -- real sessions ---------------------------------------------------------------------------------


def defaults(**more: object) -> dict:
    """The synthetic benchmark with the defaults: no replicates, no fail_threshold."""
    document = bench_file()
    document.pop("replicates")
    document["metrics"]["cost"].pop("fail_threshold")
    return {**document, **more}


def frozen(repo: Repo) -> dict:
    """The config the one run of ``repo`` ran (its config.yaml)."""
    (run,) = (repo.home / "runs").iterdir()
    return yaml.safe_load((run / "config.yaml").read_text())["config"]


def test_a_readme_only_commit_passes_on_adaptive_blocks_with_the_defaults(tmp_path: Path) -> None:
    repo = Repo(tmp_path, noise_seed=5)
    repo.base(defaults())
    repo.commit("docs only", **{"README.md": "a demo, better explained\n"})
    done = repo.bench("--bench-against", "HEAD~1", "--bench-fail-on=regression,unjudged")
    assert done.returncode == 0, done.stdout + done.stderr
    results = repo.record()
    assert results["ci_gate"]["outcome"] == "passed"
    assert frozen(repo)["replicates"] == {"min": 8, "max": 40, "until": "gate"}
    sequential = results["sequential"]
    assert sequential["stopped"] and 8 <= sequential["blocks_used"] <= 40
    assert "the CI gate can decide" in sequential["reason"]
    said = [x for x in done.stdout.splitlines() if "rules out a regression beyond" in x]
    assert any("98.7% interval [" in line for line in said)  # the look's level, named


def test_a_five_percent_regression_fails_the_gate_with_the_defaults(tmp_path: Path) -> None:
    repo = Repo(tmp_path, noise_seed=6)
    repo.base(defaults())
    repo.commit("5% more work", **{"cost.txt": "1.05"})
    done = repo.bench("--bench-against", "HEAD~1", "--bench-fail-on=regression")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "beyond fail_threshold 5%" in done.stdout
    assert repo.record()["ci_gate"]["outcome"] == "regressed"


def test_a_declared_range_works_for_one_configuration_under_bench_against(
    tmp_path: Path,
) -> None:
    """Gate 1 refused a range for a file of one configuration before --bench-against could run
    it (the remedy the tool printed was refused); both sides compare it now."""
    repo = Repo(tmp_path, noise_seed=7)
    repo.base(defaults(replicates={"min": 6, "max": 12}))
    repo.commit("docs only", **{"README.md": "docs\n"})
    alone = repo.bench()
    assert alone.returncode == 2 and "replicates" in alone.stdout  # no in-run verdict alone
    done = repo.bench("--bench-against", "HEAD~1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert repo.record()["sequential"]["min"] == 6


def test_bench_replicates_replaces_the_files_count_for_one_session(tmp_path: Path) -> None:
    repo = Repo(tmp_path, noise_seed=8)
    repo.base(defaults())
    repo.commit("docs only", **{"README.md": "docs\n"})
    done = repo.bench("--bench-against", "HEAD~1", "--bench-replicates", "9")
    assert done.returncode == 0, done.stdout + done.stderr
    results = repo.record()
    assert frozen(repo)["replicates"] == 9 and results["sequential"] is None
    assert max(t["replicate"] for t in results["trials"]) == 8
    assert git(repo.path, "status", "--porcelain") == ""


def test_a_hostile_bench_replicates_is_a_usage_error_naming_the_fix(tmp_path: Path) -> None:
    repo = Repo(tmp_path)
    repo.base(defaults())
    done = repo.bench("--bench-replicates", "9:3")
    assert done.returncode == 4
    assert "--bench-replicates 8:40" in done.stderr and not (repo.home / "runs").exists()


def test_unjudged_is_a_warning_in_the_job_summary_and_fails_only_when_asked(
    tmp_path: Path,
) -> None:
    """Two blocks can decide nothing: the gate is unjudged, the job summary warns, and the
    session passes unless --bench-fail-on names unjudged."""
    repo = Repo(tmp_path, noise_seed=9)
    repo.base(defaults())
    repo.commit("docs only", **{"README.md": "docs\n"})
    summary = tmp_path / "summary.md"
    repo.env["GITHUB_STEP_SUMMARY"] = str(summary)
    done = repo.bench("--bench-against", "HEAD~1", "--bench-replicates", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    text = summary.read_text()
    assert "gate **unjudged**" in text and "> [!WARNING]" in text
    assert "it fails the job only with `--bench-fail-on=unjudged`" in text
    strict = repo.bench(
        "--bench-against", "HEAD~1", "--bench-replicates", "2", "--bench-fail-on=unjudged"
    )
    assert strict.returncode == 1, strict.stdout + strict.stderr


def test_the_time_to_verdict_benchmark_prints_its_table() -> None:
    """benchmarks/time_to_verdict.py, one session of the README-only cell: its row, with the
    outcome counts, their Wilson intervals and the seconds (the counts are the script's)."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "time_to_verdict.py"
    done = subprocess.run(
        [sys.executable, str(script), "--sessions", "1", "--cells", "aa"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("aa (defaults)")]
    assert "n=1" in row and "passed   1/1 [21-100%]" in row and "median " in row and " p90 " in row
