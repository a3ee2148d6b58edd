"""E-Divisive means with its permutation test (stats/changepoints.py), the median's
distribution-free interval (stats/describe.py), and change points placed on a series of runs
(report/changes.py), on series whose truth is known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_benchmark_agent.records.series import Commit, RunPoint, Series
from pytest_benchmark_agent.report.changes import bisect_command, metric_changes
from pytest_benchmark_agent.stats.changepoints import PERMUTATIONS, find_change_points
from pytest_benchmark_agent.stats.describe import median_interval


def noisy(levels: list[float], seed: int, cv: float = 0.01) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(level * rng.normal(1.0, cv)) for level in levels]


def test_a_flat_series_has_no_change_point() -> None:
    assert find_change_points(noisy([10.0] * 20, seed=1)) == []


def test_one_step_is_found_where_it_is_with_its_size_and_evidence() -> None:
    values = noisy([10.0] * 8 + [12.0] * 8, seed=2)
    [found] = find_change_points(values)
    assert found.index == 8
    assert found.ratio == pytest.approx(1.2, abs=0.02)
    assert found.permutations == PERMUTATIONS
    assert found.p_value == pytest.approx(1 / (PERMUTATIONS + 1))  # no shuffle reached it


def test_two_steps_are_both_found_in_order() -> None:
    values = noisy([10.0] * 8 + [13.0] * 8 + [9.0] * 8, seed=3)
    assert [c.index for c in find_change_points(values)] == [8, 16]


def test_a_step_falls_only_where_it_is_allowed() -> None:
    values = noisy([10.0] * 8 + [12.0] * 8, seed=4)
    assert [c.index for c in find_change_points(values, allowed=[8, 12])] == [8]
    assert {c.index for c in find_change_points(values, allowed=[4, 12])} <= {4, 12}
    assert find_change_points(values, allowed=[]) == []


def test_the_same_series_gives_the_same_answer() -> None:
    values = noisy([10.0] * 6 + [10.8] * 6, seed=5, cv=0.03)
    assert find_change_points(values) == find_change_points(list(values))


def test_too_short_a_series_has_no_change_point() -> None:
    assert find_change_points([1.0, 2.0, 3.0]) == []
    assert find_change_points([]) == []


def test_values_at_or_below_zero_are_compared_as_they_are() -> None:
    values = [0.0, 0.1, -0.1, 0.0, 5.0, 5.1, 4.9, 5.0]
    assert [c.index for c in find_change_points(values)] == [4]


def test_the_median_interval_is_the_binomial_order_statistics() -> None:
    assert median_interval(list(range(1, 21))) == (6, 15, pytest.approx(0.9586, abs=1e-4))
    low, high, coverage = median_interval([3.0, 1.0, 2.0])  # too few for 95%: the range
    assert (low, high, coverage) == (1.0, 3.0, 0.75)
    with pytest.raises(ValueError):
        median_interval([])


def series_of(values: list[float], commits: list[str]) -> Series:
    """A series of runs with these figures, one per run, on these (made-up) commits."""
    points = [
        RunPoint(
            run_id=f"run{k}",
            name="demo",
            tag="EXPLORATORY",
            state="complete",
            started=f"2026-01-01T00-00-{k:02d}",
            ci_gate=None,
            commit=sha,
            dirty=False,
            code_label=sha[:7],
            source="/repo/bench.yaml",
            metrics={"ms": {"direction": "lower"}},
            values={"ms": [value]},
            git=Commit(sha, k, "2026-01-01", f"commit {k}"),
        )
        for k, (value, sha) in enumerate(zip(values, commits, strict=True))
    ]
    return Series("demo", points, [], by_commit=True)


def test_bisect_gets_the_range_a_commit_wider_each_side_within_the_segments() -> None:
    values = noisy([10.0] * 8 + [13.0] * 3 + [9.0] * 8, seed=6)
    commits = [f"{k:040x}" for k in range(len(values))]
    _, changes = metric_changes(series_of(values, commits), "ms")
    assert [(c.before.run_id, c.after.run_id) for c in changes] == [
        ("run7", "run8"),
        ("run10", "run11"),
    ]
    assert [(c.good.run_id, c.bad.run_id) for c in changes] == [
        ("run6", "run9"),
        ("run9", "run12"),
    ]
    command = bisect_command(changes[0], Path("/repo"), Path("/home/my data"))
    assert command == (
        f"benchmark-agent bisect {commits[6][:12]} {commits[9][:12]} bench.yaml "
        "--home '/home/my data'"
    )


def test_runs_of_one_commit_are_never_split() -> None:
    values = noisy([10.0] * 6 + [12.0] * 6, seed=7)
    commits = [f"{k // 4:040x}" for k in range(len(values))]  # 4 runs per commit
    _, changes = metric_changes(series_of(values, commits), "ms")
    assert all(c.after.commit != c.before.commit for c in changes)
    assert {c.point.index for c in changes} <= {4, 8}
