"""The tuner on small deterministic landscapes: convergence, refusals, constraints, halts,
budgets and resume.

Most tests drive the strategies through ``ScriptedRounds``, a test double of the round runner
that builds each round's record in-process from a landscape (metric = f(point) times seeded
noise), so the selection logic runs hundreds of comparisons in seconds. The end-to-end tests
at the bottom run real rounds: ``pytest --bench`` sessions of a stage printing the landscape.
"""

from __future__ import annotations

import math
import random
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from benchhelpers import BenchProject

from pytest_benchmark_agent.cli.main import main as cli_main
from pytest_benchmark_agent.cli.tune import STRATEGY_NAMES
from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.config.tuning import TuneSettings
from pytest_benchmark_agent.engine.plan import point_label
from pytest_benchmark_agent.records.reader import load_yaml
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.stats import sequential
from pytest_benchmark_agent.stats.analysis import Judging
from pytest_benchmark_agent.stats.sequential import Looks
from pytest_benchmark_agent.tune.entry import run_tune
from pytest_benchmark_agent.tune.rounds import (
    RoundOutcome,
    RoundRequest,
    SubprocessRounds,
    unrecorded,
)
from pytest_benchmark_agent.tune.space import load_space
from pytest_benchmark_agent.tune.strategies import STRATEGIES
from pytest_benchmark_agent.tune.tuner import ResumeMismatch, Tuner

Measure = Callable[[dict[str, Any], int], dict[str, Any]]


class ScriptedRounds:
    """Test double of ``SubprocessRounds``: a round's record built from ``measure(point, rep)``.

    ``measure`` returns a trial's ``metrics`` (and optionally ``status``/``reason``); trials
    are laid out in blocks (replicate k of every point adjacent), as the engine runs them.
    """

    def __init__(
        self,
        measure: Measure,
        replicates: int = 5,
        wall_s: float = 0.01,
        stop_after: int | None = None,
        spend: dict[str, float] | None = None,
    ):
        self.measure = measure
        self.replicates = replicates
        self.wall_s = wall_s
        self.spend = spend or {}  # each trial's GPU-hours and cost, as the engine records them
        self.stop_after = stop_after  # a sequential session that stopped after this many blocks
        self.requests: list[RoundRequest] = []

    def __call__(self, request: RoundRequest) -> RoundOutcome:
        self.requests.append(request)
        trials = []
        for rep in range(self.replicates):
            for point in request.points:
                skipped = self.stop_after is not None and rep >= self.stop_after
                outcome = (
                    {"status": "not_run", "metrics": {}}
                    if skipped
                    else {"status": "passed", **self.spend, **self.measure(point, rep)}
                )
                label = point_label(point)
                trials.append(
                    {
                        "id": f"measure[point={label}-rep{rep}]",
                        "treatment": label,
                        "replicate": rep,
                        "seed": None,
                        "stage": "measure",
                        "wall_s": self.wall_s,
                        **outcome,
                    }
                )
        record: dict[str, Any] = {"state": "complete", "trials": trials, "preps": []}
        if self.stop_after is not None:
            record["sequential"] = {"blocks_used": self.stop_after}
        return RoundOutcome(request.run_id, RunRecord.from_dict(record), self.wall_s * len(trials))


def landscape(
    f: Callable[[dict[str, Any]], float],
    noise: float = 0.005,
    seed: int = 0,
    recall: Callable[[dict[str, Any]], float] = lambda p: 1.0,
) -> Measure:
    """Latency ``f(point)`` times uniform noise of +-``noise``, and a noiseless recall."""
    rng = random.Random(seed)

    def measure(point: dict[str, Any], rep: int) -> dict[str, Any]:
        return {
            "metrics": {
                "p50_ms": f(point) * (1 + rng.uniform(-noise, noise)),
                "recall": recall(point),
            }
        }

    return measure


def tuning(**overrides: Any) -> dict[str, Any]:
    """A tuning file over x (0..6) and y (0..4), starting at the corner (0, 0)."""
    document: dict[str, Any] = {
        "name": "land",
        "params": {"x": 0, "y": 0},
        "search_space": {"x": [0, 1, 2, 3, 4, 5, 6], "y": [0, 1, 2, 3, 4]},
        "objective": {"metric": "p50_ms", "direction": "lower"},
        "constraints": ["recall >= 0.95"],
        "replicates": 5,
        "stages": [
            {
                "name": "measure",
                "kind": "measure",
                "cmd": "land {x} {y}",
                "metrics_from": {"stdout": True, "fields": ["p50_ms", "recall"]},
            }
        ],
        "metrics": {
            "p50_ms": {"direction": "lower", "noise_threshold": 0.01},
            "recall": {"direction": "higher"},
        },
    }
    document.update(overrides)
    return document


def bowl(point: dict[str, Any]) -> float:
    """A smooth landscape whose unconstrained minimum is at x=4, y=1 (y is 0 when not tuned)."""
    return 10 + 2 * (point["x"] - 4) ** 2 + 3 * (point.get("y", 0) - 1) ** 2


def tuner_for(
    document: dict[str, Any],
    runner: ScriptedRounds,
    *,
    settings: TuneSettings | None = None,
    replay: list | None = None,
) -> Tuner:
    config = BenchmarkConfig.model_validate(document)
    space = load_space(config, Path("bench.yaml"))
    return Tuner(
        space, config, settings or TuneSettings(), runner, tune_id="t", replay=replay or []
    )


def tuned(document: dict[str, Any], measure: Measure, strategy: str, **kwargs: Any) -> Tuner:
    tuner = tuner_for(document, ScriptedRounds(measure), **kwargs)
    tuner.run(strategy)
    return tuner


def test_the_cli_names_every_strategy() -> None:
    assert sorted(STRATEGIES) == sorted(STRATEGY_NAMES)


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_each_strategy_converges_to_the_optimum(strategy: str) -> None:
    tuner = tuned(tuning(), landscape(bowl), strategy)
    assert tuner.halt is None and tuner.converged
    assert tuner.incumbent == {"x": 4, "y": 1}
    assert tuner.path[0]["label"] == "x=0,y=0" and tuner.path[-1]["label"] == "x=4,y=1"
    assert all(step["ratio"] < 1 for step in tuner.path[1:])


def test_refine_and_coordinate_use_fewer_trials_than_the_grid() -> None:
    used = {s: tuned(tuning(), landscape(bowl), s).spent.trials for s in STRATEGIES}
    # 34 candidates need 11 blocks (2/2^11 <= 0.05/34): 3 sessions of 5; then the move's
    # confirmation, 2 points in 2 sessions (6 blocks for one comparison)
    assert used["grid"] == 35 * 3 * 5 + 2 * 2 * 5
    assert used["refine"] < used["grid"] and used["coordinate"] < used["grid"]


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_noise_level_gains_never_move_the_incumbent(strategy: str) -> None:
    def gentle(point: dict[str, Any]) -> float:  # at most 0.6% better than the start
        return 10 * (1 - 0.001 * point["x"])

    tuner = tuned(tuning(), landscape(gentle, noise=0.01), strategy)
    assert tuner.incumbent == {"x": 0, "y": 0}
    assert len(tuner.path) == 1
    refused = [c for c in tuner.candidates if c.observed_better]
    assert refused and all(c.decision == "no_change" for c in refused)
    assert all("not shown to differ from x=0,y=0" in c.reason for c in refused)


def test_lucky_noisy_trials_are_selected_at_most_at_the_error_rate() -> None:
    """On a flat landscape every observed "best" is luck; a naive argmin always moves."""
    moved = naive = 0
    for seed in range(40):
        tuner = tuned(tuning(), landscape(lambda p: 10.0, noise=0.05, seed=seed), "grid")
        moved += tuner.incumbent != {"x": 0, "y": 0}
        start = statistics.median(
            t["metrics"]["p50_ms"] for t in tuner.trials if t["treatment"] == "x=0,y=0"
        )
        naive += min(c.median for c in tuner.candidates) < start
    # Holm keeps a false selection per round <= alpha, and the confirmation round must
    # agree: a false move needs two independent false positives
    assert moved == 0
    assert naive >= 0.9 * 40  # ... while the best observed median nearly always beats the start


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_the_best_point_breaking_a_constraint_is_refused(strategy: str) -> None:
    def recall(point: dict[str, Any]) -> float:  # x=4 and beyond break recall >= 0.95
        return 1 - 0.015 * point["x"]

    tuner = tuned(tuning(), landscape(bowl, recall=recall), strategy)
    assert tuner.incumbent == {"x": 3, "y": 1}
    failed = [c for c in tuner.candidates if c.decision == "constraint_failed"]
    assert failed and all(c.point["x"] >= 4 for c in failed)
    assert re.search(r"recall >= 0\.95: (\d+) of \1 samples break it", failed[0].reason)


def test_a_constraint_must_hold_on_every_sample() -> None:
    def recall(point: dict[str, Any]) -> float:
        return 1.0

    def measure(point: dict[str, Any], rep: int) -> dict[str, Any]:
        low = point["x"] == 4 and rep == 2  # one sample of the best point dips below
        return {"metrics": {"p50_ms": bowl(point), "recall": 0.9 if low else recall(point)}}

    tuner = tuned(tuning(search_space={"x": [0, 1, 2, 3, 4, 5, 6]}), measure, "grid")
    assert tuner.incumbent["x"] in (3, 5)
    (four,) = [c for c in tuner.candidates if c.point["x"] == 4]
    assert four.decision == "constraint_failed"
    assert "2 of 10 samples break it (worst 0.9)" in four.reason  # one dip in each session


def test_indistinguishable_improvements_keep_the_simpler_point() -> None:
    def twin(point: dict[str, Any]) -> float:  # x=2 and x=5 equally good, x=2 nearer the start
        return {2: 5.0, 5: 5.0}.get(point["x"], 10.0)

    tuner = tuned(tuning(search_space={"x": [0, 1, 2, 3, 4, 5, 6]}), landscape(twin), "grid")
    assert tuner.incumbent["x"] == 2
    (five,) = [c for c in tuner.candidates if c.point["x"] == 5]
    assert five.decision == "tied"
    assert tuner.ties == [
        "round 0: x=5 and x=2 both improved on x=0 and were "
        "not shown to differ from each other; selected the simpler x=2."
    ]


def test_a_failing_start_halts_as_ungrounded() -> None:
    def measure(point: dict[str, Any], rep: int) -> dict[str, Any]:
        if point["x"] == 0:
            return {"status": "failed", "metrics": {}, "reason": "stage 'measure' exited 1"}
        return {"metrics": {"p50_ms": bowl(point), "recall": 1.0}}

    tuner = tuned(tuning(), measure, "coordinate")
    assert tuner.halt is not None and tuner.halt.kind == "ungrounded"
    assert "the incumbent x=0,y=0 has 0 passed trial(s) of 10" in tuner.halt.message
    assert "first failure: stage 'measure' exited 1" in tuner.halt.message
    assert len(tuner.rounds) == 1 and tuner.rounds[0]["status"] == "halted"
    assert tuner.incumbent == {"x": 0, "y": 0} and not tuner.candidates


def test_a_non_comparable_start_halts_as_ungrounded() -> None:
    def measure(point: dict[str, Any], rep: int) -> dict[str, Any]:
        status = "not_comparable" if point["x"] == 0 else "passed"
        return {
            "status": status,
            "metrics": {"p50_ms": bowl(point), "recall": 1.0},
            "reason": "effective params differ from declared: x declared 0, used 1",
        }

    tuner = tuned(tuning(), measure, "grid")
    assert tuner.halt.kind == "ungrounded"
    assert "x=0,y=0 is not comparable: effective params differ" in tuner.halt.message


def test_a_start_breaking_a_constraint_halts_as_ungrounded() -> None:
    tuner = tuned(tuning(), landscape(bowl, recall=lambda p: 0.9), "refine")
    assert tuner.halt.kind == "ungrounded"
    assert "breaks the constraint recall >= 0.95 (10 of 10 samples break it" in tuner.halt.message


def _effective_mismatch(bad: Callable[[dict[str, Any]], bool]) -> Measure:
    def measure(point: dict[str, Any], rep: int) -> dict[str, Any]:
        if bad(point):
            return {
                "status": "not_comparable",
                "metrics": {"p50_ms": 1.0, "recall": 1.0},
                "reason": "effective params differ from declared",
            }
        return {"metrics": {"p50_ms": bowl(point), "recall": 1.0}}

    return measure


def test_a_streak_of_non_comparable_candidates_halts() -> None:
    tuner = tuned(
        tuning(search_space={"x": [0, 1, 2, 3, 4, 5, 6]}),
        _effective_mismatch(lambda p: p["x"] >= 3),
        "grid",
    )
    assert tuner.halt.kind == "streak"
    assert tuner.halt.message.startswith(
        "3 candidates in a row were not comparable (x=3, x=4, "
        "x=5; the limit is 3); the last: effective "
        "params differ from declared"
    )
    # the supported move of the same round still happened before the halt
    assert tuner.incumbent == {"x": 2}
    assert tuner.rounds[0]["status"] == "halted"


def test_the_streak_length_is_configurable() -> None:
    measure = _effective_mismatch(lambda p: p["x"] in (1, 2))
    tuner = tuned(tuning(search_space={"x": [0, 1, 2, 3, 4]}), measure, "grid")
    assert tuner.halt is None and tuner.incumbent == {"x": 4}
    tuner = tuned(
        tuning(search_space={"x": [0, 1, 2, 3, 4]}),
        measure,
        "grid",
        settings=TuneSettings(max_noncomparable_streak=2),
    )
    assert tuner.halt.kind == "streak"
    assert tuner.halt.message.startswith("2 candidates in a row were not comparable (x=1, x=2;")


def test_isolated_non_comparable_candidates_do_not_halt() -> None:
    tuner = tuned(
        tuning(search_space={"x": [0, 1, 2, 3, 4, 5, 6]}),
        _effective_mismatch(lambda p: p["x"] in (1, 3, 5)),
        "grid",
    )
    assert tuner.halt is None and tuner.incumbent == {"x": 4}
    assert sum(c.decision == "not_comparable" for c in tuner.candidates) == 3


def test_the_trial_budget_halts_before_a_round_it_cannot_afford() -> None:
    runner = ScriptedRounds(landscape(bowl))
    tuner = tuner_for(tuning(budget={"trials": 150}), runner)
    tuner.run("grid")  # the grid needs 35 points x 3 sessions x 5 replicates = 525 trials
    assert tuner.halt.kind == "budget" and not runner.requests
    assert tuner.halt.message.startswith(
        "budget.trials: the next round needs 525 trials and 150 of 150 remain"
    )
    assert (
        "The round runs 3 sessions: 34 comparison(s) in Holm's family, so the first level is "
        "0.05/34 = 0.00147; with n blocks the paired test's smallest two-sided p is 2/2^n, "
        "so deciding needs n >= 11" in tuner.halt.message
    )


def test_the_trial_budget_stops_a_multi_round_search_between_rounds() -> None:
    runner = ScriptedRounds(landscape(bowl))
    tuner = tuner_for(tuning(budget={"trials": 80}), runner)
    tuner.run("coordinate")  # x's line: 7 points x 2 sessions = 70 trials; its confirmation 20
    assert tuner.halt.kind == "budget" and tuner.spent.trials <= 80
    assert len(runner.requests) == 2 and tuner.spent.trials == 70
    assert tuner.incumbent == {"x": 0, "y": 0}  # not moved: the move was never confirmed
    (unconfirmed,) = [c for c in tuner.candidates if c.decision == "unconfirmed"]
    assert "its confirmation round did not judge it (budget)" in unconfirmed.reason


def test_the_wall_clock_budget_halts_once_spent() -> None:
    runner = ScriptedRounds(landscape(bowl), wall_s=1.0)  # 35 s per session of the x line
    tuner = tuner_for(tuning(budget={"wall_clock_s": 50}), runner)
    tuner.run("coordinate")
    assert tuner.halt.kind == "budget"
    assert tuner.halt.message.startswith("budget.wall_clock_s spent (70s of 50s)")
    assert [r.timeout_s for r in runner.requests] == [50, 15]  # the second session: what is left


def test_no_session_of_a_round_starts_once_the_wall_clock_budget_is_spent() -> None:
    runner = ScriptedRounds(landscape(bowl), wall_s=1.0)  # the x line's first session: 35 s
    tuner = tuner_for(tuning(budget={"wall_clock_s": 35}), runner)
    tuner.run("coordinate")
    assert len(runner.requests) == 1  # its second session had no time left
    assert tuner.halt.kind == "budget"
    assert "round 0 did not finish (budget.wall_clock_s ran out during it)" in tuner.halt.message
    assert tuner.rounds[0]["status"] == "unfinished"


#: A trial's spending on one pinned GPU for 36 s at $2/GPU-hour (engine/context.py's gpu_spend).
GPU_SPEND = {"gpu_hours": 0.01, "cost_usd": 0.02}


def _gpu_tuning(**budget: float) -> dict[str, Any]:
    return tuning(resources={"gpus": 1, "price_per_gpu_hour": 2.0}, budget=budget)


def test_the_gpu_hour_budget_halts_on_the_estimate_of_the_next_round() -> None:
    runner = ScriptedRounds(landscape(bowl), wall_s=36.0, spend=GPU_SPEND)  # 0.01 GPU-hour each
    tuner = tuner_for(_gpu_tuning(gpu_hours=0.8), runner)
    tuner.run("coordinate")  # x's line: 70 trials = 0.7 GPU-hours; its confirmation 0.2 more
    assert tuner.halt.kind == "budget" and len(runner.requests) == 2
    assert tuner.spent.gpu_hours == pytest.approx(0.7)
    assert tuner.halt.message.startswith(
        "budget.gpu_hours: 0.7 GPU-hours spent and the next round is estimated at 0.2 more (of 0.8)"
    )


def test_the_cost_budget_halts_on_the_estimate_of_the_next_round() -> None:
    runner = ScriptedRounds(landscape(bowl), wall_s=36.0, spend=GPU_SPEND)  # $0.02 per trial
    tuner = tuner_for(_gpu_tuning(cost_usd=1.6), runner)
    tuner.run("coordinate")  # x's line costs $1.40; its confirmation would cost $0.40 more
    assert tuner.halt.kind == "budget" and len(runner.requests) == 2
    assert tuner.spent.cost_usd == pytest.approx(1.4)
    assert tuner.halt.message.startswith("budget.cost_usd: 1.4 USD spent")


def test_a_zero_gpu_budget_refuses_gpu_stages() -> None:
    runner = ScriptedRounds(landscape(bowl))
    tuner = tuner_for(_gpu_tuning(gpu_hours=0), runner)
    tuner.run("grid")
    assert tuner.halt.kind == "budget" and "budget.gpu_hours is 0" in tuner.halt.message
    assert not runner.requests


def test_resume_replays_finished_rounds_without_running_them() -> None:
    measure = landscape(bowl)
    first = tuner_for(tuning(budget={"trials": 80}), ScriptedRounds(measure))
    first.run("coordinate")
    assert first.halt.kind == "budget"
    replay = [(summary, _record_of(first, summary["round"])) for summary in first.rounds]
    runner = ScriptedRounds(landscape(bowl, seed=1))
    second = tuner_for(tuning(budget={"trials": 1000}), runner, replay=replay)
    second.run("coordinate")
    assert second.halt is None and second.incumbent == {"x": 4, "y": 1}
    assert len(first.rounds) == 1  # the x line; its confirmation did not fit the budget
    assert sorted({r.index for r in runner.requests}) == list(range(1, len(second.rounds)))
    assert second.spent.trials == 70 + 5 * sum(len(r.points) for r in runner.requests)
    assert second.rounds[0]["run_id"] == first.rounds[0]["run_id"]


def test_resume_refuses_a_record_that_no_longer_matches_the_file() -> None:
    first = tuned(tuning(budget={"trials": 80}), landscape(bowl), "coordinate")
    replay = [(summary, _record_of(first, summary["round"])) for summary in first.rounds]
    changed = tuning(search_space={"x": [0, 2, 4, 6], "y": [0, 1, 2, 3, 4]})
    with pytest.raises(ResumeMismatch, match="round 0 of tune t evaluated"):
        tuner_for(changed, ScriptedRounds(landscape(bowl)), replay=replay).run("coordinate")


def _record_of(tuner: Tuner, index: int) -> RunRecord:
    trials = [t for t in tuner.trials if t["round"] == index]
    return RunRecord.from_dict({"state": "complete", "trials": trials, "preps": []})


def test_a_move_needs_its_confirmation_round_too() -> None:
    """x=2 looks twice as fast in its selection round only (a lucky round): not moved."""
    runner = ScriptedRounds(lambda point, rep: {})

    def lucky(point: dict[str, Any], rep: int) -> dict[str, Any]:
        first_round = runner.requests[-1].index == 0
        fast = point["x"] == 2 and first_round
        return {"metrics": {"p50_ms": (5.0 if fast else 10.0) * (1 + 0.001 * rep), "recall": 1}}

    runner.measure = lucky
    tuner = tuner_for(tuning(search_space={"x": [0, 1, 2, 3, 4, 5, 6]}), runner)
    tuner.run("grid")
    assert tuner.incumbent == {"x": 0} and len(tuner.path) == 1
    assert [r["confirms"] for r in tuner.rounds] == [None, 0]
    assert tuner.rounds[1]["points"] == ["x=0", "x=2"]
    (two,) = [c for c in tuner.candidates if c.round == 0 and c.label == "x=2"]
    assert two.decision == "unconfirmed" and two.verdict["verdict"] == "improved"
    assert "but not in its confirmation round 1" in two.reason
    (again,) = [c for c in tuner.candidates if c.round == 1]
    assert again.decision == "no_change" and again.reason.startswith("confirmation of round 0")
    assert tuner.rounds[0]["outcome"] == "kept x=0: x=2 was not confirmed in round 1"


def test_a_confirmed_move_chains_the_confirmation_ratio() -> None:
    tuner = tuned(tuning(search_space={"x": [0, 1, 2, 3, 4, 5, 6]}), landscape(bowl), "grid")
    assert tuner.incumbent == {"x": 4}
    (step,) = tuner.path[1:]
    assert step["round"] == 0 and step["confirmed_in"] == 1
    confirmation = next(c for c in tuner.candidates if c.round == 1)
    assert confirmation.decision == "confirmed"
    assert step["ratio"] == confirmation.verdict["ratio"]
    assert step["selection_ratio"] == pytest.approx(bowl({"x": 4}) / bowl({"x": 0}), rel=0.02)


def test_a_sequential_round_is_judged_at_its_look_with_the_sessions_alpha_spending() -> None:
    document = tuning(search_space={"x": [0, 1, 2, 3]}, replicates={"min": 8, "max": 16})
    runner = ScriptedRounds(landscape(bowl), replicates=16, stop_after=10)  # looks: 8, 10, 16
    tuner = tuner_for(document, runner)
    tuner.run("grid")
    assert tuner.incumbent == {"x": 3}
    judged = [c for c in tuner.candidates if c.round == 0]
    assert all(c.verdict["n"] == [10, 10] for c in judged)  # the look the session stopped at
    levels = sorted(c.verdict["level"] for c in judged)
    spent = [  # Holm's levels at look 10 of (8, 10, 16), as the session's own gate 2 used them
        sequential.sequential_decision(
            {}, {}, ["a", "b"], "a", blocks_done=10, looks=Looks(8, 16), judging=Judging(alpha=a)
        ).level
        for a in (0.05 / 3, 0.05 / 2, 0.05)
    ]
    assert levels == pytest.approx(spent)
    fixed = (0.05 / 3, 0.05 / 2, 0.05)  # a fixed design's Holm levels
    assert all(level < bound for level, bound in zip(levels, fixed, strict=True))


def test_a_round_its_replicates_could_never_decide_is_refused_with_the_arithmetic() -> None:
    document = tuning(search_space={"x": [0, 1, 2, 3, 4, 5, 6]}, replicates={"min": 5, "max": 6})
    runner = ScriptedRounds(landscape(bowl), replicates=6)
    tuner = tuner_for(document, runner)
    tuner.run("grid")
    assert tuner.halt.kind == "replicates" and not runner.requests
    assert tuner.halt.message.startswith("round 0 was not run: replicates.max is 6: 6 comparison")
    assert "and 2/2^6 = 0.0312 is above" in tuner.halt.message
    arithmetic = r"deciding needs n >= (\d+) .* Raise replicates.max to at least \1"
    assert re.search(arithmetic, tuner.halt.message)


def test_seeds_too_few_to_decide_a_round_are_refused_more_blocks_would_not_help() -> None:
    document = tuning(search_space={"x": [0, 1, 2, 3, 4]}, seeds=[1, 2, 3, 4, 5])
    runner = ScriptedRounds(landscape(bowl))
    tuner = tuner_for(document, runner)
    tuner.run("grid")
    assert tuner.halt.kind == "replicates" and not runner.requests
    assert "the paired units are the 5 seeds" in tuner.halt.message
    assert tuner.halt.message.endswith("Use at least 8 seeds, or fewer candidates per round.")


# -- end to end: real rounds, each a pytest --bench session -----------------------------------

LAND = """\
import pathlib, random, sys
x = float(sys.argv[1])
calls = pathlib.Path("calls.txt")
n = int(calls.read_text()) if calls.exists() else 0
calls.write_text(str(n + 1))
noise = random.Random(n).uniform(-0.004, 0.004)
if {fail}:
    sys.exit("cannot measure here")
if {mismatch}:
    print("BENCH_EFFECTIVE x=99")
print(f"p50_ms={{(10 + 3 * (x - 3) ** 2) * (1 + noise)}}")
print(f"recall={{1 - 0.01 * x}}")
"""


def land_project(
    project: BenchProject, *, fail: str = "False", mismatch: str = "False", **overrides: Any
) -> Path:
    """A 1-D tuning file over x in 0..6 (optimum 3; recall >= 0.975 excludes x >= 3)."""
    project.write("land.py", LAND.format(fail=fail, mismatch=mismatch))
    document = {
        "name": "land",
        "params": {"x": 0},
        "search_space": {"x": [0, 1, 2, 3, 4, 5, 6]},
        "objective": {"metric": "p50_ms", "direction": "lower"},
        "constraints": ["recall >= 0.975"],
        "replicates": 5,
        "stages": [
            {
                "name": "measure",
                "kind": "measure",
                "cmd": f"{sys.executable} land.py {{x}}",
                "metrics_from": {"stdout": True, "fields": ["p50_ms", "recall"]},
            }
        ],
        "metrics": {"p50_ms": {"direction": "lower"}, "recall": {"direction": "higher"}},
    }
    document.update(overrides)
    return project.bench(document)


def tune_record(project: BenchProject) -> dict[str, Any]:
    tunes = [
        p for p in project.runs() if (load_yaml(p / "results.yaml") or {}).get("kind") == "tune"
    ]
    assert len(tunes) == 1
    return load_yaml(tunes[0] / "results.yaml")


def test_pytest_bench_tune_selects_the_best_feasible_point(project: BenchProject) -> None:
    land_project(project)
    result = project.pytester.runpytest_subprocess(
        "--bench", "--bench-tune=grid", "bench.yaml", "--bench-home", str(project.home)
    )
    assert result.ret == 0, result.stdout.str()
    record = tune_record(project)
    assert record["state"] == "complete" and record["selected"] == {"x": 2}
    assert record["incumbents"][-1]["label"] == "x=2" and record["chained_ratio"] < 0.5
    three = next(t for t in record["trials"] if t["treatment"] == "x=3")
    assert three["round"] == 0 and three["incumbent"] == "x=0"
    assert three["verdict"] == "improved" and three["decision"] == "constraint_failed"
    (round_run,) = [p for p in project.runs() if p.name == record["rounds"][0]["run_id"]]
    assert load_yaml(round_run / "results.yaml")["treatment_variable"] == "point"
    report = (project.home / "runs" / record["run_id"] / "report.md").read_text()
    assert "## What Went Wrong" in report
    assert "**Constraint failed:** round 0 `x=3`: recall >= 0.975: 10 of 10 samples" in report
    assert ("objective.png" in report) or ("No plot: matplotlib is not installed" in report)
    assert "selected x=2" in result.stdout.str()


def test_the_cli_tunes_and_resumes_without_rerunning_finished_rounds(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    # the coarse round (0, 2, 4, 6: 2 sessions, 40 trials) and its confirmation (20) fit
    path = land_project(project, budget={"trials": 60})
    home = ["--home", str(project.home)]
    assert cli_main([*home, "tune", str(path), "--strategy", "refine"]) == 1
    halted = tune_record(project)
    assert halted["state"] == "halted" and halted["halt"]["kind"] == "budget"
    assert halted["selected"] == {"x": 2} and len(halted["rounds"]) == 2
    assert halted["rounds"][1]["confirms"] == 0
    calls = int((project.path / "calls.txt").read_text())
    document = yaml.safe_load(path.read_text())
    document["budget"] = {"trials": 100}
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    assert cli_main([*home, "tune", str(path), "--resume", "latest"]) == 0
    resumed = tune_record(project)
    assert resumed["run_id"] == halted["run_id"] and resumed["state"] == "complete"
    assert resumed["rounds"][:2] == halted["rounds"]
    assert resumed["selected"] == {"x": 2}
    new_calls = int((project.path / "calls.txt").read_text()) - calls
    assert new_calls == sum(r["trials"] for r in resumed["rounds"][2:]) > 0
    assert "resuming: 2 round(s) replayed" in capsys.readouterr().out


def test_a_start_that_cannot_run_halts_with_exit_code_1(project: BenchProject) -> None:
    path = land_project(project, fail="x == 0")
    lines: list[str] = []
    assert run_tune(path, "coordinate", project.home, echo=lines.append) == 1
    record = tune_record(project)
    assert record["state"] == "halted" and record["selected"] is None
    assert record["halt"]["kind"] == "ungrounded"
    assert "the incumbent x=0 has 0 passed trial(s) of 10" in record["halt"]["message"]
    assert any(line.startswith("HALTED (ungrounded)") for line in lines)
    report = (project.home / "runs" / record["run_id"] / "report.md").read_text()
    assert "**Halted (ungrounded):** the incumbent x=0 has 0 passed trial(s)" in report


def test_non_comparable_candidates_halt_the_tune(project: BenchProject) -> None:
    path = land_project(project, mismatch="x >= 1")
    assert run_tune(path, "grid", project.home, echo=lambda line: None) == 1
    record = tune_record(project)
    assert record["halt"]["kind"] == "streak"
    assert "effective params differ from declared" in record["halt"]["message"]
    assert record["selected"] == {"x": 0}
    assert [c["decision"] for c in record["candidates"]] == ["not_comparable"] * 6


def test_the_wall_clock_budget_stops_a_running_round(project: BenchProject) -> None:
    """Round 0 (35 trials of at least 1 s) outlasts the 8 s budget, which leaves a loaded
    machine's session time to start and record its first trials."""
    path = land_project(project, budget={"wall_clock_s": 8})
    text = path.read_text().replace("land.py {x}", "land.py {x}; sleep 1")
    path.write_text(text)
    assert run_tune(path, "grid", project.home, echo=lambda line: None) == 1
    record = tune_record(project)
    assert record["halt"]["kind"] == "budget"
    assert (
        "round 0 did not finish (budget.wall_clock_s ran out during it)"
        in record["halt"]["message"]
    )
    assert record["rounds"][0]["status"] == "unfinished"
    round_record = load_yaml(project.home / "runs" / record["rounds"][0]["run_id"] / "results.yaml")
    assert round_record["state"] == "interrupted"


def test_a_budget_that_ends_before_the_round_records_halts_the_tune(project: BenchProject) -> None:
    """A session stopped by the wall clock before it wrote its record is the budget's halt,
    not a round that could not run (a slow start on a loaded machine)."""
    path = land_project(project)
    rounds = SubprocessRounds(path, project.home, project.home / "tune-logs")
    outcome = rounds(RoundRequest(0, "r0", [{"x": 0}, {"x": 1}], timeout_s=0.01))
    assert outcome.timed_out and outcome.record == unrecorded("r0")


def test_a_round_that_cannot_collect_fails_the_tune(project: BenchProject) -> None:
    path = land_project(project)
    path.write_text(path.read_text().replace("land.py {x}", "land.py {x} {nope}"))
    lines: list[str] = []
    assert run_tune(path, "grid", project.home, echo=lines.append) == 2
    record = tune_record(project)
    assert record["state"] == "failed"
    assert "unknown placeholder {nope}" in record["failure"]


def test_a_bad_tuning_file_is_refused_before_any_round(project: BenchProject) -> None:
    path = land_project(project, constraints=["recall ~ 0.9"])
    lines: list[str] = []
    assert run_tune(path, "grid", project.home, echo=lines.append) == 2
    assert "constraints[0]: 'recall ~ 0.9' is not of the form METRIC OP NUMBER" in lines[0]
    assert not project.home.exists()


WINNER = """\
import pathlib, random, sys
x = float(sys.argv[1])
calls = pathlib.Path("calls.txt")
n = int(calls.read_text()) if calls.exists() else 0
calls.write_text(str(n + 1))
noise = random.Random(n).gauss(0, 0.03)
print(f"p50_ms={(2.5 if x == 3 else 10.0) * (1 + noise)}")
"""


def test_a_clear_winner_is_selected_at_the_default_replicates(project: BenchProject) -> None:
    """x=3 is 4x faster in every block; the file leaves replicates at the default."""
    project.write("winner.py", WINNER)
    path = project.bench(
        {
            "name": "winner",
            "params": {"x": 0},
            "search_space": {"x": [0, 1, 2, 3, 4]},
            "objective": {"metric": "p50_ms", "direction": "lower"},
            "stages": [
                {
                    "name": "measure",
                    "kind": "measure",
                    "cmd": f"{sys.executable} winner.py {{x}}",
                    "metrics_from": {"stdout": True, "fields": ["p50_ms"]},
                }
            ],
            "metrics": {"p50_ms": {"direction": "lower"}},
        }
    )
    assert run_tune(path, "grid", project.home, echo=lambda line: None) == 0
    record = tune_record(project)
    assert record["selected"] == {"x": 3}
    selection, confirmation = record["rounds"]
    per_session = BenchmarkConfig.model_fields["replicates"].default
    sessions = math.ceil(8 / per_session)  # 4 candidates: 2/2^n <= 0.05/4 needs n >= 8
    assert selection["blocks"] == sessions * per_session
    assert len(selection["run_ids"]) == sessions
    assert "so deciding needs n >= 8 (2/2^8 = 0.00781)" in selection["blocks_why"]
    assert confirmation["confirms"] == 0 and confirmation["points"] == ["x=0", "x=3"]
    assert len(confirmation["run_ids"]) == math.ceil(6 / per_session)  # 2/2^6 <= 0.05
    assert record["incumbents"][-1]["confirmed_in"] == 1
    assert record["incumbents"][-1]["ratio"] < 0.3
    for run_id in selection["run_ids"] + confirmation["run_ids"]:
        assert (project.home / "runs" / run_id / "results.yaml").is_file()
    report = (project.home / "runs" / record["run_id"] / "report.md").read_text()
    assert "Blocks per round: the fewest at which its comparisons can be decided at all" in report
