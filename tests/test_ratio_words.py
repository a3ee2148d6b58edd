"""The one way a ratio is said (``units.change_text``): a time is faster or slower, anything
else higher or lower, the factor is at least 1, and the interval printed is the ratio's own
(the terminal's old ``+-`` allowed a slowdown its interval ruled out)."""

from __future__ import annotations

import math

import pytest

from pytest_benchmark_agent.report.summary_lines import comparison_text
from pytest_benchmark_agent.stats.comparability import Verdict
from pytest_benchmark_agent.stats.units import change_text, change_words, is_time


@pytest.mark.parametrize(
    ("metric", "value", "said"),
    [
        ("p50_ms", 0.02085, "48x faster"),
        ("cpu_ms", 1.75, "1.75x slower"),
        ("wall_s", 0.5, "2x faster"),
        ("latency_us", 2.0, "2x slower"),
        ("segments", 0.004, "250x lower"),
        ("peak_rss_mb", 1.25, "1.25x higher"),
        ("tokens_per_s", 1.5, "1.5x higher"),  # a rate, not a time ending in "_s"
        ("score", 1.0004, "the same"),
    ],
)
def test_a_ratio_is_said_in_words_that_fit_its_metric(metric: str, value: float, said: str) -> None:
    assert change_words(metric, value) == said


def test_the_interval_is_the_ratios_own_and_agrees_with_the_words() -> None:
    text = change_text("p50_ms", 0.0799, (0.0711, 0.0822), "none")
    assert text == "12.5x faster than none (x0.0799, 95% [0.0711, 0.0822])"
    assert "+-" not in text
    # the old line read "x1.75 +- 0.95 faster (interval x1.4 to x3.29)": now ratio and interval
    assert (
        change_text("cpu_ms", 1.75, (1.4, 3.29), "a")
        == "1.75x slower than a (x1.75, 95% [1.4, 3.29])"
    )
    assert change_text("score", 1.0, None, "a") == "the same as a (x1)"
    assert is_time("cpu_ms") and is_time("wall_s") and not is_time("tokens_per_s")


@pytest.mark.parametrize("value", [None, 0, 0.0, -0.5, math.nan, math.inf, True, "0.5", [0.5]])
def test_no_ratio_or_a_broken_one_is_said_as_nothing(value: object) -> None:
    assert change_words("p50_ms", value) == ""
    assert change_text("p50_ms", value, (0.1, 0.2), "a") == ""
    assert comparison_text("b", "a", "p50_ms", Verdict("not_comparable", ratio=value)) == ""


def test_an_interval_with_a_side_unknown_is_left_out() -> None:
    assert change_text("p50_ms", 0.5, (None, 0.6), "a") == "2x faster than a (x0.5)"


def test_the_comparison_line_ends_with_the_verdict_in_words() -> None:
    said = comparison_text("b", "a", "p50_ms", Verdict("no_change", ratio=1.02, ci=(0.98, 1.06)))
    assert said == "b: p50_ms 1.02x slower than a (x1.02, 95% [0.98, 1.06]) - no change detected"
    refused = Verdict("not_comparable", ratio=0.5, ci=(0.4, 0.6), reason="hosts disagree")
    assert comparison_text("b", "a", "wall_s", refused).endswith(
        " - not comparable: hosts disagree"
    )
