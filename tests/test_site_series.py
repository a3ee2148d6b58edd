"""What the published site draws of a series, on made-up runs: one point per commit (two runs
of one commit pool their trials), every treatment beside the control, each run's CI gate, the
latest run's answer in the reports' words; and a treatment label holding markup stays text in
the chart, the tables and the answer."""

from __future__ import annotations

import re
import statistics

from pytest_benchmark_agent.records.series import Commit, RunPoint, Series
from pytest_benchmark_agent.report.changes import metric_changes
from pytest_benchmark_agent.report.site_series import (
    answer_lines,
    chart_html,
    chart_model,
    commits_table,
)
from pytest_benchmark_agent.stats.comparability import Verdict

HOSTILE = 'b--><script>alert(1)</script>&"'


def point(k: int, sha: str, control: list[float], treated: list[float], gate: str) -> RunPoint:
    """A run of commit ``sha``: the control ``a``'s values, the treatment's, and its verdict."""
    ratio = statistics.median(treated) / statistics.median(control)
    return RunPoint(
        run_id=f"run{k}",
        name="demo",
        tag="EXPLORATORY",
        state="complete",
        started=f"2026-01-01T00-00-{k:02d}",
        ci_gate=gate,
        commit=sha,
        dirty=False,
        code_label=sha[:7],
        source="/repo/bench.yaml",
        metrics={"p50_ms": {"direction": "lower", "primary": True}},
        values={"p50_ms": control},
        git=Commit(sha, k, "2026-01-01T00:00:00+00:00", f"commit {k}"),
        control="a",
        treatment_values={HOSTILE: {"p50_ms": treated}},
        verdicts={"p50_ms": {HOSTILE: Verdict("improved", ratio=ratio, ci=(ratio - 0.01, ratio))}},
    )


def series() -> Series:
    """Three runs: two of the first commit (one passed, one unjudged), one of the second."""
    first, second = "1" * 40, "2" * 40
    return Series(
        "demo",
        [
            point(0, first, [10.0, 11.0, 12.0], [5.0, 5.5], "passed"),
            point(1, first, [13.0, 14.0], [6.0], "unjudged"),
            point(2, second, [10.0, 10.5, 11.0], [2.0, 2.2], "passed"),
        ],
        [],
        by_commit=True,
    )


def test_two_runs_of_one_commit_are_one_point_with_their_trials_pooled() -> None:
    one = series()
    points, changes = metric_changes(one, "p50_ms")
    model = chart_model(one, "p50_ms", points, changes)
    assert [p["label"] for p in model["points"]] == ["1111111", "2222222"]
    first = model["points"][0]
    assert first["median"] == statistics.median([10.0, 11.0, 12.0, 13.0, 14.0]) and first["n"] == 5
    assert first["runs"] == ["run0", "run1"] and first["gates"] == ["passed", "unjudged"]
    assert first["treatments"] == {HOSTILE: statistics.median([5.0, 5.5, 6.0])}
    table = "\n".join(commits_table(model))
    assert "<td>passed, unjudged</td>" in table and "12 ms" in table and "5.5 ms" in table
    svg = chart_html(model)
    assert svg.count('id="PathCollection_') == 2  # a point per commit, not per run


def test_a_treatment_label_holding_markup_stays_text_everywhere() -> None:
    one = series()
    points, changes = metric_changes(one, "p50_ms")
    model = chart_model(one, "p50_ms", points, changes)
    for text in (chart_html(model), "\n".join(commits_table(model))):
        outside = re.sub(r"<!--.*?-->", "", text, flags=re.S)  # matplotlib's comments closed
        assert "<script" not in text and "-->" not in outside and "<!--" not in outside
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot; (median)" in "".join(
        commits_table(model)
    )
    (answer,) = answer_lines(one.points[-1])
    assert answer.startswith(f"{HOSTILE}: p50_ms 5x faster than a (x0.2, 95% ")
    assert answer.endswith(") - improved")


def test_a_run_without_a_verdict_or_a_ratio_has_no_answer() -> None:
    assert answer_lines(None) == []
    bare = series().points[0]
    bare.verdicts = {"p50_ms": {HOSTILE: Verdict("not_comparable", reason="no samples")}}
    assert answer_lines(bare) == []
