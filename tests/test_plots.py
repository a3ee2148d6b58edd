"""The per-metric plot: a column per treatment, a dot per passed trial, a grey line per block."""

from __future__ import annotations

import sys

import pytest

matplotlib = pytest.importorskip("matplotlib")
from matplotlib.collections import PathCollection  # noqa: E402

from pytest_benchmark_agent.report.plots import (  # noqa: E402
    NO_MATPLOTLIB,
    SINGLE_BLOCK,
    _figure,
    write_plots,
)


def _trials(blocks: int, treatments: list[str]) -> list[dict]:
    """A passed trial per treatment per block; block k's value for treatment i is 10*k + i."""
    return [
        {
            "status": "passed",
            "treatment": t,
            "replicate": k,
            "seed": k,
            "host": "h",
            "metrics": {"wall_s": 10.0 * k + i, "rows/s": 5.0 + i},
        }
        for k in range(blocks)
        for i, t in enumerate(treatments)
    ]


def test_every_block_is_one_segment_of_a_single_line_collection() -> None:
    trials = _trials(300, ["a", "b", "c"])
    trials.append(
        {
            "status": "passed",
            "treatment": "a",
            "replicate": 300,
            "seed": 300,
            "host": "h",
            "metrics": {"wall_s": 1.0},
        }
    )  # a block of one: no line
    trials.append(
        {
            "status": "failed",
            "treatment": "b",
            "replicate": 300,
            "seed": 300,
            "host": "h",
            "metrics": {"wall_s": 99.0},
        }
    )  # not passed: not drawn
    axes = _figure("wall_s", trials, ["a", "b", "c"], {}).axes[0]

    assert len(axes.lines) == 0  # no artist per block
    (collection,) = axes.collections[:1]
    segments = collection.get_segments()
    assert len(segments) == 300
    first = segments[0]
    assert [round(x) for x in first[:, 0]] == [0, 1, 2]  # drawn in treatment order
    assert list(first[:, 1]) == [0.0, 1.0, 2.0]
    dots = [len(c.get_offsets()) for c in axes.collections if isinstance(c, PathCollection)]
    assert dots == [301, 300, 300]  # a scatter per treatment, every passed trial a dot


def test_the_block_line_follows_the_declared_treatment_order() -> None:
    trials = list(reversed(_trials(2, ["control", "treated"])))
    axes = _figure("wall_s", trials, ["control", "treated"], {}).axes[0]
    for segment in axes.collections[0].get_segments():
        assert segment[0, 0] < 0.5 < segment[1, 0]  # control's column, then treated's


def test_a_metric_without_passed_values_has_no_figure(tmp_path) -> None:
    trials = [{**t, "status": "failed"} for t in _trials(3, ["a", "b"])]
    trials.append(
        {
            "status": "passed",
            "treatment": "a",
            "replicate": 9,
            "seed": 9,
            "host": "h",
            "metrics": {},
        }
    )
    trials.append(
        {
            "status": "passed",
            "treatment": "b",
            "replicate": 8,
            "seed": 8,
            "host": "h",
            "metrics": {},
        }
    )
    assert _figure("wall_s", trials, ["a", "b"], {}) is None
    assert write_plots(tmp_path, trials, ["wall_s"], ["a", "b"], {}) == ([], None)
    assert list(tmp_path.iterdir()) == []


def test_a_single_block_is_not_plotted(tmp_path) -> None:
    assert write_plots(tmp_path, _trials(1, ["a", "b"]), ["wall_s"], ["a", "b"], {}) == (
        [],
        SINGLE_BLOCK,
    )


def test_the_png_is_written_atomically_under_its_name(tmp_path) -> None:
    files, note = write_plots(
        tmp_path,
        _trials(4, ["a", "b"]),
        ["wall_s", "rows/s"],
        ["a", "b"],
        {"wall_s": {"b": {"verdict": "improved"}}},
    )
    assert note is None
    assert files == ["plot-wall_s.png", "plot-rows_s.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(files)  # no temporary left
    assert (tmp_path / "plot-wall_s.png").read_bytes()[:4] == b"\x89PNG"


def test_a_missing_matplotlib_part_the_figure_needs_gives_the_report_sentence(
    tmp_path, monkeypatch
) -> None:
    """Each module _figure imports is probed first: no plot and the sentence, not a crash."""
    monkeypatch.setitem(sys.modules, "matplotlib.collections", None)
    assert write_plots(tmp_path, _trials(4, ["a", "b"]), ["wall_s"], ["a", "b"], {}) == (
        [],
        NO_MATPLOTLIB,
    )
    assert list(tmp_path.iterdir()) == []
