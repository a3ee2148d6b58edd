"""The one observation extractor: the same records give gate 2, the baseline and the tuner the
same samples."""

from __future__ import annotations

import dataclasses
from typing import Any

from pytest_benchmark_agent.judge.observations import observations, sample_table
from pytest_benchmark_agent.records.schema import TrialRecord


def trial(treatment: str, replicate: int, stage: str, **metrics: Any) -> TrialRecord:
    return TrialRecord(
        id=f"{stage}[{treatment}-rep{replicate}]",
        treatment=treatment,
        replicate=replicate,
        seed=None,
        status="passed",
        stage=stage,
        position=0 if treatment == "a" else 1,
        metrics=metrics,
    )


def two_stage_trials() -> list[TrialRecord]:
    """Two measure stages: ``query`` reports ``latency`` and both report the built-in wall_s."""
    out = []
    for rep in range(3):
        for label, base in (("a", 1.0), ("b", 2.0)):
            out.append(trial(label, rep, "query", latency=base, wall_s=base))
            out.append(trial(label, rep, "load", wall_s=10 * base))
    return out


def test_a_metric_of_one_stage_is_read_from_that_stage_and_no_duplicate_is_claimed() -> None:
    obs, caveats = observations(
        two_stage_trials(), ["latency", "wall_s"], ["a", "b"], stage_of={"wall_s": "load"}
    )
    assert caveats == []  # one trial per stage and block is not a trial recorded twice
    assert sorted(o.value for o in obs["latency"]) == [1.0] * 3 + [2.0] * 3
    # wall_s pinned to the load stage: the query stage's wall_s never stands in for it
    assert sorted(o.value for o in obs["wall_s"]) == [10.0] * 3 + [20.0] * 3


def test_only_passed_trials_of_the_named_treatments_count() -> None:
    trials = two_stage_trials()
    trials[0] = dataclasses.replace(trials[0], status="failed")
    trials.append(trial("c", 0, "query", latency=9.0))
    table, _ = sample_table(trials, ["latency"], ["a", "b"])
    assert ("a", 0, None) not in table["latency"]
    assert {key[0] for key in table["latency"]} == {"a", "b"}


def test_rename_and_offset_put_another_run_beside_this_one() -> None:
    table, _ = sample_table(
        two_stage_trials(), ["latency"], [], rename={"a": "reference"}, offset=1000
    )
    assert sorted(table["latency"]) == [("reference", 1000 + r, None) for r in range(3)]


def test_the_position_in_the_block_travels_with_each_sample() -> None:
    table, _ = sample_table(two_stage_trials(), ["latency"], ["a", "b"])
    assert {key[0]: drawn.position for key, drawn in table["latency"].items()} == {"a": 0, "b": 1}
