"""The per-metric plot: a column per treatment, a dot per passed trial, a grey line per block;
axes labelled with the metric's unit, a log axis for far-apart treatments, no offset notation,
and the SVG that report.html inlines."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest

matplotlib = pytest.importorskip("matplotlib")
from matplotlib.collections import PathCollection  # noqa: E402

from pytest_benchmark_agent.records.schema import TrialRecord  # noqa: E402
from pytest_benchmark_agent.report.plots import (  # noqa: E402
    NO_MATPLOTLIB,
    SINGLE_BLOCK,
    _figure,
    write_plots,
)
from pytest_benchmark_agent.stats.comparability import Verdict  # noqa: E402


def _typed(trial: dict) -> TrialRecord:
    """A trial record of the plotted fields (the id and stage a plot never reads)."""
    return TrialRecord(id=f"m[{trial['treatment']}-rep{trial['replicate']}]", stage="m", **trial)


def _trials(blocks: int, treatments: list[str]) -> list[TrialRecord]:
    """A passed trial per treatment per block; block k's value for treatment i is 10*k + i."""
    return [
        _typed(
            {
                "status": "passed",
                "treatment": t,
                "replicate": k,
                "seed": k,
                "host": "h",
                "metrics": {"wall_s": 10.0 * k + i, "rows/s": 5.0 + i},
            }
        )
        for k in range(blocks)
        for i, t in enumerate(treatments)
    ]


def test_every_block_is_one_segment_of_a_single_line_collection() -> None:
    trials = _trials(300, ["a", "b", "c"])
    trials.append(
        _typed(
            {
                "status": "passed",
                "treatment": "a",
                "replicate": 300,
                "seed": 300,
                "host": "h",
                "metrics": {"wall_s": 1.0},
            }
        )
    )  # a block of one: no line
    trials.append(
        _typed(
            {
                "status": "failed",
                "treatment": "b",
                "replicate": 300,
                "seed": 300,
                "host": "h",
                "metrics": {"wall_s": 99.0},
            }
        )
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
    trials = [dataclasses.replace(t, status="failed") for t in _trials(3, ["a", "b"])]
    trials.append(
        _typed(
            {
                "status": "passed",
                "treatment": "a",
                "replicate": 9,
                "seed": 9,
                "host": "h",
                "metrics": {},
            }
        )
    )
    trials.append(
        _typed(
            {
                "status": "passed",
                "treatment": "b",
                "replicate": 8,
                "seed": 8,
                "host": "h",
                "metrics": {},
            }
        )
    )
    assert _figure("wall_s", trials, ["a", "b"], {}) is None
    assert write_plots(tmp_path, trials, ["wall_s"], ["a", "b"], {}) == ([], None)
    assert list(tmp_path.iterdir()) == []


def test_a_single_trial_of_one_configuration_is_not_plotted(tmp_path) -> None:
    assert write_plots(tmp_path, _trials(1, ["a"]), ["wall_s"], ["a"], {}) == ([], SINGLE_BLOCK)


def test_two_treatments_are_plotted_from_a_single_block(tmp_path) -> None:
    files, note = write_plots(tmp_path, _trials(1, ["a", "b"]), ["wall_s"], ["a", "b"], {})
    assert files == ["plot-wall_s.png"] and note is None


def test_the_png_is_written_atomically_under_its_name(tmp_path) -> None:
    files, note = write_plots(
        tmp_path,
        _trials(4, ["a", "b"]),
        ["wall_s", "rows/s"],
        ["a", "b"],
        {"wall_s": {"b": Verdict("improved")}},
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


def _valued(values: dict[str, list[float]], metric: str = "wall_s") -> list[TrialRecord]:
    """Passed trials with the given values of ``metric``, block k holding each list's k-th."""
    return [
        _typed(
            {
                "status": "passed",
                "treatment": label,
                "replicate": k,
                "seed": None,
                "host": "h",
                "metrics": {metric: value},
            }
        )
        for label, column in values.items()
        for k, value in enumerate(column)
    ]


def test_the_axes_name_the_metric_its_unit_and_the_treatment_variable() -> None:
    trials = _valued({"a": [1.0, 1.1, 1.2], "b": [1.3, 1.4, 1.5]})
    axes = _figure("wall_s", trials, ["a", "b"], {}, variable="mode").axes[0]
    assert axes.get_ylabel() == "wall_s (s)"
    assert axes.get_xlabel() == "treatment (mode)"
    sized = _valued({"a": [5.0, 6.0], "b": [5.5, 6.5]}, "peak_rss_mb")
    assert _figure("peak_rss_mb", sized, ["a", "b"], {}).axes[0].get_ylabel() == (
        "peak_rss_mb (MiB)"
    )


def test_a_treatment_far_from_the_control_gets_a_log_axis() -> None:
    """x0.07 on a linear axis would sit on the floor; on a log one both columns are readable."""
    trials = _valued({"a": [100.0, 101.0, 99.0], "b": [7.0, 7.2, 6.9]}, "score")
    axes = _figure("score", trials, ["a", "b"], {}).axes[0]
    assert axes.get_yscale() == "log"
    assert axes.get_ylabel() == "score (log scale)"


def test_a_small_difference_has_a_linear_axis_from_zero_without_offset() -> None:
    """23% apart at 8.9e6: no ``1e6`` offset (which made it look like 100%), the axis from 0."""
    trials = _valued(
        {"a": [8.925e6, 8.926e6, 8.927e6], "b": [1.0977e7, 1.0978e7, 1.0979e7]}, "bytes"
    )
    figure = _figure("bytes", trials, ["a", "b"], {})
    axes = figure.axes[0]
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure).draw()
    assert axes.get_yscale() == "linear"
    assert axes.get_ylim()[0] == 0
    assert axes.yaxis.get_offset_text().get_text() == ""
    labels = [t.get_text() for t in axes.get_yticklabels() if t.get_text()]
    assert labels and not any("e" in label for label in labels), labels


def test_the_title_quotes_the_verdict_with_its_ratio_and_interval() -> None:
    trials = _valued({"a": [1.0, 1.1], "b": [2.0, 2.1]})
    verdicts = {"b": Verdict("regressed", ratio=1.93, ci=(1.8, 2.05))}
    axes = _figure("wall_s", trials, ["a", "b"], verdicts).axes[0]
    assert axes.get_title() == "wall_s (b: regressed x1.93 [1.8, 2.05])"


def test_the_svg_for_the_html_report_is_an_element_that_fetches_nothing(tmp_path) -> None:
    svg: dict[str, str] = {}
    files, note = write_plots(tmp_path, _trials(3, ["a", "b"]), ["wall_s"], ["a", "b"], {}, svg=svg)
    assert files == ["plot-wall_s.png"] and note is None
    assert list(svg) == ["wall_s"] and svg["wall_s"].startswith("<svg")
    assert "<!DOCTYPE" not in svg["wall_s"] and "<metadata" not in svg["wall_s"]
    assert 'href="http' not in svg["wall_s"] and "<script" not in svg["wall_s"]
    assert "wall_s (s)" in svg["wall_s"]  # its labels are text a browser draws


def test_matplotlib_is_a_plain_dependency_so_the_plain_install_draws() -> None:
    text = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    dependencies = re.search(r"(?ms)^dependencies = \[(.*?)^\]", text)
    assert dependencies and '"matplotlib>=' in dependencies.group(1)
    assert not re.search(r"(?m)^plots = ", text)  # no extra to know of
    assert "[plots]" not in NO_MATPLOTLIB
