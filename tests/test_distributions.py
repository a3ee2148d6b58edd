"""distributions: the pure-Python t and normal functions against scipy.special (and closed forms
where scipy itself is off), over the df and tails gate 2 uses and beyond."""

from __future__ import annotations

import math

import pytest
from scipy import special

from pytest_benchmark_agent.stats.distributions import ndtr, ndtri, stdtr, stdtrit

#: Integer and non-integer df (Welch and Yuen give fractions), up to 1e6.
DFS = [1, 1.3, 2, 2.5, 3, 4.7, 5, 9, 10, 10.5, 19, 30, 99.3, 100, 1e3, 3333.3, 1e4, 1e5, 1e6]
#: Tail probabilities, down to 1e-12 and far beyond (scipy's stdtrit fails near 1e-300).
TAILS = [1e-100, 1e-30, 1e-12, 1e-9, 1e-6, 1e-3, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.4, 0.49]


def tolerance(df: float) -> float:
    """Below 1e-12 up to df 1e3; the continued fraction's rounding grows toward 1e-10 at 1e6."""
    return 1e-12 if df <= 1e3 else 2e-10


@pytest.mark.parametrize("df", DFS)
def test_the_t_cdf_matches_scipy_in_both_tails_and_the_centre(df: float) -> None:
    for q in TAILS:
        t = float(special.stdtrit(df, q))
        for x in (t, -t, t / 3, -t / 3):
            assert stdtr(df, x) == pytest.approx(special.stdtr(df, x), rel=tolerance(df), abs=0)


@pytest.mark.parametrize("df", DFS)
def test_the_t_quantile_matches_scipy_and_inverts_the_cdf(df: float) -> None:
    for q in [*TAILS, 0.8, 0.975, 1 - 1e-6, 1 - 1e-12]:
        t = stdtrit(df, q)
        assert t == pytest.approx(special.stdtrit(df, q), rel=tolerance(df), abs=0)
        assert stdtr(df, t) == pytest.approx(q, rel=tolerance(df), abs=0)


def test_closed_forms_at_one_and_two_degrees_where_scipy_loses_digits_near_zero() -> None:
    for t in (1e-12, 1e-8, 1e-3, 0.5, 7.0, 1e6, 1e150, 1e200):
        assert stdtr(1, -t) == pytest.approx(math.atan(1 / t) / math.pi, rel=1e-14)
        assert stdtr(1, t) == pytest.approx(0.5 + math.atan(t) / math.pi, rel=1e-14)
        if t < 1e150:  # P(T < -t) = (1 - t / sqrt(2 + t^2)) / 2, without the cancellation
            root = math.sqrt(2 + t * t)
            assert stdtr(2, -t) == pytest.approx(1 / (root * (root + t)), rel=1e-12)
    for q in (1e-300, 1e-12, 0.3, 0.5 - 1e-9):
        assert stdtrit(1, q) == pytest.approx(-1 / math.tan(math.pi * q), rel=1e-12)


def test_edges_follow_scipy() -> None:
    assert stdtrit(5, 0.0) == -math.inf and stdtrit(5, 1.0) == math.inf
    assert stdtrit(5, 0.5) == 0.0 and stdtr(5, 0.0) == 0.5
    assert stdtr(5, -math.inf) == 0.0 and stdtr(5, math.inf) == 1.0
    assert stdtr(5, -1e200) == pytest.approx(special.stdtr(5, -1e200), rel=1e-12)
    assert ndtri(0.0) == -math.inf and ndtri(1.0) == math.inf
    assert math.isnan(ndtri(1.5)) and math.isnan(stdtrit(3, -0.1))
    assert stdtr(math.inf, -2.0) == ndtr(-2.0) and stdtrit(math.inf, 0.1) == ndtri(0.1)
    with pytest.raises(ValueError, match="df=0"):
        stdtr(0, 1.0)


def test_the_normal_functions_match_scipy_deep_into_the_tails() -> None:
    for x in [-37.5, -30.0, -20.0, -8.0, -5.0, -1.0, -1e-9, 0.0, 0.5, 3.0, 8.0]:
        assert ndtr(x) == pytest.approx(special.ndtr(x), rel=1e-12, abs=0)
    for q in [*TAILS, 0.5, 0.8, 0.975, 1 - 1e-12]:
        assert ndtri(q) == pytest.approx(special.ndtri(q), rel=1e-14, abs=0)
