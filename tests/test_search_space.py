"""The search space of tuning files: lattices, objective, constraints, settings, and errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_benchmark_agent.config.models import BenchmarkConfig, load_config
from pytest_benchmark_agent.errors import ConfigError
from pytest_benchmark_agent.tune.space import Dimension, load_space


def tuning(**overrides: Any) -> dict[str, Any]:
    """A small tuning file: one measure stage reporting latency and recall."""
    document: dict[str, Any] = {
        "name": "tuning",
        "params": {"heap_factor": 0.6, "query_cut": 10, "mode": "fast"},
        "search_space": {"heap_factor": {"min": 0.6, "max": 2.0, "steps": 8}},
        "objective": {"metric": "p50_ms", "direction": "lower"},
        "constraints": ["recall@10 >= 0.99"],
        "replicates": 5,
        "stages": [
            {
                "name": "search",
                "kind": "measure",
                "cmd": "search --hf {heap_factor} --cut {query_cut} --mode {mode}",
                "metrics_from": {"stdout": True, "fields": ["p50_ms", "recall@10"]},
            }
        ],
        "metrics": {"p50_ms": {"direction": "lower"}, "recall@10": {"direction": "higher"}},
    }
    document.update(overrides)
    return document


def space_of(document: dict[str, Any]):
    return load_space(BenchmarkConfig.model_validate(document), Path("tune.yaml"))


def problems_of(document: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        space_of(document)
    return str(info.value)


def test_a_linear_range_is_an_evenly_spaced_lattice() -> None:
    space = space_of(tuning())
    (dim,) = space.dimensions
    assert dim.values == (0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
    assert dim.ordered and space.start == {"heap_factor": 0.6}
    assert space.objective == "p50_ms" and space.direction == "lower"
    assert [c.text for c in space.constraints] == ["recall@10 >= 0.99"]


def test_a_log_range_is_geometric() -> None:
    space = space_of(
        tuning(
            params={"heap_factor": 1.0, "query_cut": 10, "mode": "fast"},
            search_space={"heap_factor": {"min": 0.01, "max": 100, "steps": 5, "scale": "log"}},
        )
    )
    assert space.dimensions[0].values == (0.01, 0.1, 1.0, 10.0, 100.0)


def test_an_integer_start_keeps_integer_values() -> None:
    space = space_of(tuning(search_space={"query_cut": {"min": 5, "max": 20, "steps": 4}}))
    assert space.dimensions[0].values == (5, 10, 15, 20)
    assert all(isinstance(v, int) for v in space.dimensions[0].values)


def test_numeric_lists_are_ordered_and_other_lists_categorical() -> None:
    space = space_of(tuning(search_space={"query_cut": [20, 5, 10], "mode": ["fast", "exact"]}))
    cut, mode = space.dimensions
    assert cut.values == (5, 10, 20) and cut.ordered
    assert mode.values == ("fast", "exact") and not mode.ordered
    assert space.grid()[:3] == [
        {"query_cut": 5, "mode": "fast"},
        {"query_cut": 5, "mode": "exact"},
        {"query_cut": 10, "mode": "fast"},
    ]


def test_distance_counts_changed_params_then_lattice_steps() -> None:
    space = space_of(tuning(search_space={"query_cut": [5, 10, 20], "mode": ["fast", "exact"]}))
    start = {"query_cut": 10, "mode": "fast"}
    assert space.distance(start, {"query_cut": 20, "mode": "fast"}) == (1, 1)
    assert space.distance(start, {"query_cut": 5, "mode": "exact"}) == (2, 2)


@pytest.mark.parametrize(
    ("size", "expected"),
    [(5, [0, 1, 2, 3, 4]), (8, [0, 2, 4, 6, 7]), (33, [0, 8, 16, 24, 32]), (2, [0, 1])],
)
def test_refine_starts_from_a_coarse_grid_of_at_least_four_points(
    size: int, expected: list[int]
) -> None:
    assert Dimension("x", tuple(range(size)), ordered=True).coarse_indices() == expected


def test_an_off_lattice_start_snaps_to_its_nearest_value() -> None:
    space = space_of(tuning(params={"heap_factor": 0.75, "query_cut": 10, "mode": "fast"}))
    assert space.indices(space.start) == (1,)


def test_constraint_syntax_errors_name_the_entry() -> None:
    text = problems_of(tuning(constraints=["recall@10 => 0.99"]))
    assert "constraints[0]: 'recall@10 => 0.99' is not of the form METRIC OP NUMBER" in text
    assert 'Fix: write e.g. "recall@10 >= 0.99"' in text


def test_a_constraint_on_an_unknown_metric_suggests_the_declared_one() -> None:
    text = problems_of(tuning(constraints=["recal@10 >= 0.99"]))
    assert "constraints[0]: metric 'recal@10' is not declared (did you mean 'recall@10'?)" in text


def test_constraints_accept_each_operator_and_builtin_metrics() -> None:
    space = space_of(tuning(constraints=["recall@10>0.9", "peak_rss_mb <= 512", "p50_ms < 1e3"]))
    assert [(c.metric, c.op, c.bound) for c in space.constraints] == [
        ("recall@10", ">", 0.9),
        ("peak_rss_mb", "<=", 512.0),
        ("p50_ms", "<", 1000.0),
    ]
    recall = space.constraints[0]
    assert recall.holds(0.95) and not recall.holds(0.9) and recall.worst([0.97, 0.93]) == 0.93


def test_a_tuning_file_needs_an_objective_on_a_declared_metric() -> None:
    assert "objective: is required in a tuning file" in problems_of(tuning(objective=None))
    text = problems_of(tuning(objective={"metric": "p50", "direction": "lower"}))
    assert "objective.metric: 'p50' is not a declared metric (did you mean 'p50_ms'?)" in text


def test_the_objective_direction_must_agree_with_the_metric() -> None:
    text = problems_of(tuning(objective={"metric": "p50_ms", "direction": "higher"}))
    assert "objective.direction: is higher, but metrics.p50_ms.direction is lower" in text


def test_too_few_replicates_for_gate_2_is_refused_before_anything_runs() -> None:
    text = problems_of(tuning(replicates=3))
    assert "replicates: is 3, below metrics.p50_ms.min_replicates (5)" in text


def test_every_problem_is_reported_at_once() -> None:
    text = problems_of(
        tuning(
            treatment_variable="heap_factor",
            treatments=[0.6, 1.0],
            search_space={
                "heap_factor": {"min": 2.0, "max": 0.6, "steps": 3},
                "nope": [1, 2],
                "mode": ["exact", "slow"],
            },
            metrics={
                "p50_ms": {"direction": "lower"},
                "recall@10": {"direction": "higher", "primary": True},
            },
        )
    )
    assert "treatments: a tuning file varies its search_space params" in text
    assert "search_space.heap_factor: min (2) must be below max (0.6)" in text
    assert "search_space.nope: is tuned but not declared under params" in text
    assert "params.mode: starts at 'fast', which is not one of search_space.mode" in text
    assert "metrics.recall@10.primary: marks 'recall@10' primary" in text


def test_the_start_must_lie_inside_the_space() -> None:
    text = problems_of(tuning(params={"heap_factor": 3.0, "query_cut": 10, "mode": "fast"}))
    assert "params.heap_factor: starts at 3, outside search_space.heap_factor (0.6 .. 2)" in text


def test_log_scale_needs_a_positive_min() -> None:
    text = problems_of(
        tuning(search_space={"heap_factor": {"min": 0, "max": 2, "steps": 3, "scale": "log"}})
    )
    assert "search_space.heap_factor.min: is 0, but scale: log needs min > 0" in text


def test_a_list_needs_two_distinct_values() -> None:
    assert "lists 1 value(s)" in problems_of(tuning(search_space={"query_cut": [10]}))
    assert "repeats ['10']" in problems_of(tuning(search_space={"query_cut": [10, 10, 20]}))


def test_a_file_without_a_search_space_is_not_a_tuning_file() -> None:
    assert "search_space: is missing" in problems_of(tuning(search_space=None))


def test_settings_default_and_configured(tmp_path: Path) -> None:
    path = tmp_path / "bench.yaml"
    path.write_text("name: t\n")
    assert load_config(path).tune.max_noncomparable_streak == 3
    path.write_text("name: t\ntune: {max_noncomparable_streak: 5}\n")
    assert load_config(path).tune.max_noncomparable_streak == 5


def test_bad_settings_name_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bench.yaml"
    path.write_text("name: t\ntune: {max_noncomparable_streak: 0, max_streak: 2}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    text = str(info.value)
    assert "tune.max_noncomparable_streak: Input should be greater than or equal to 1" in text
    assert "tune.max_streak: is not a known key" in text
    assert "accepted keys here: max_noncomparable_streak" in text
