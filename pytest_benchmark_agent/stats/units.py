"""A metric's unit, read from its name, and its values as a person reads them.

The benchmark file declares no unit, so the name's suffix is the convention (the built-ins
follow it: ``wall_s``, ``cpu_s``, ``peak_rss_mb``): ``_s``/``_ms``/``_us``/``_ns`` are times,
``_b``/``_bytes``/``_kb``/``_mb``/``_gb`` sizes (binary multiples), ``/s`` or ``_per_s``
rates. Values print with four significant figures in a scaled unit (``8.512 MiB``,
``76.7 ms``) or with thousands separators (``8,925,741``), never as ``8.925e+06``.

The statistics every report shows (a ratio, its interval, a share, a p-value, a verdict with
its ratio) are formatted here too, once, so report.md, report.html, the terminal, the job
summary, the exports and ``--junitxml`` print the same figure the same way.
"""

from __future__ import annotations

import math
from typing import Any

_TIMES = {"_ns": 1e-9, "_us": 1e-6, "_ms": 1e-3, "_s": 1.0}
_SIZES = {"_bytes": 1, "_b": 1, "_kb": 1024, "_mb": 1024**2, "_gb": 1024**3}
_TIME_STEPS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
_SIZE_STEPS = ((1024**4, "TiB"), (1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB"), (1, "B"))


def unit_of(metric: str) -> str:
    """The unit a metric's name declares ("s", "MiB", "per second"), or "" for none."""
    name = metric.lower()
    if name.endswith(("/s", "_per_s", "_per_sec")):
        return "per second"
    for suffix in _TIMES:
        if name.endswith(suffix):
            return suffix[1:]
    for suffix in _SIZES:
        if name.endswith(suffix):
            return {"_kb": "KiB", "_mb": "MiB", "_gb": "GiB"}.get(suffix, "B")
    return ""


def axis_label(metric: str) -> str:
    """``metric (unit)``, the axis label of its plot."""
    unit = unit_of(metric)
    return f"{metric} ({unit})" if unit else metric


def human(value: Any, metric: str = "") -> str:
    """A number for a person: times and sizes in a scaled unit, large counts with thousands
    separators, others in four significant figures; anything else as text."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-" if value is None else str(value)
    if not math.isfinite(value):
        return str(value)
    name = metric.lower()
    if unit_of(name) == "per second":  # tokens_per_s is a rate, not a time ending in "_s"
        return f"{plain(value)}/s"
    for suffix, scale in _TIMES.items():
        if name.endswith(suffix):
            return _scaled(value * scale, _TIME_STEPS)
    for suffix, scale in _SIZES.items():
        if name.endswith(suffix):
            return _scaled(value * scale, _SIZE_STEPS)
    return plain(value)


def plain(value: float) -> str:
    """Four significant figures below 100,000, else the integer part with separators (a float
    from 10^15 on, past a float's exact digits, in four figures with its exponent: ``1e150``
    is not 151 digits of noise)."""
    if not isinstance(value, int) and abs(value) >= 1e15:
        return f"{value:.3e}"
    if isinstance(value, int) or abs(value) >= 1e5:
        return f"{value:,.0f}"
    if value != 0 and abs(value) < 1e-3:
        return f"{value:.3e}"
    return f"{value:.4g}"


def _scaled(value: float, steps: tuple[tuple[float, str], ...]) -> str:
    """``value`` (in the base unit) in the largest step it reaches, four significant figures."""
    for scale, name in steps:
        if abs(value) >= scale or value == 0 and name in ("s", "B"):
            return f"{value / scale:.4g} {name}"
    scale, name = steps[-1]
    return f"{value / scale:.4g} {name}"


def number(value: Any) -> str:
    """A statistic without a unit: four significant figures for a float, ``-`` for none."""
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def ratio(value: Any, digits: int = 4) -> str:
    """Gate 2's ratio as ``x1.234`` (``digits`` significant figures), ``-`` for none."""
    return "-" if value is None else f"x{value:.{digits}g}"


def interval(ci: Any) -> str:
    """A 95% interval as ``[0.912, 0.958]``, ``-`` for none (or a side unknown)."""
    if not ci or None in ci:
        return "-"
    return f"[{number(float(ci[0]))}, {number(float(ci[1]))}]"


def pct(value: Any, sign: str = "") -> str:
    """A fraction (a CV, an MDE, an effect) as a percentage with one decimal, ``-`` for none
    (``sign="+"``: always signed)."""
    return "-" if value is None else f"{100 * value:{sign}.1f}%"


def p_value(value: Any) -> str:
    """A p-value with four decimals, ``<0.0001`` below that, ``-`` for none."""
    if value is None:
        return "-"
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def verdict_text(verdict: Any) -> str:
    """A :class:`.Verdict` as one phrase: ``improved x0.912 [0.88, 0.94]``."""
    text = str(verdict.verdict)
    if verdict.ratio is not None:
        text += f" {ratio(verdict.ratio)}"
    if verdict.ci:
        text += f" {interval(verdict.ci)}"
    return text


#: The units of a time: a change of one is "faster"/"slower", of anything else "higher"/"lower".
TIME_UNITS = ("s", "ms", "us", "ns")


def is_time(metric: str) -> bool:
    """Whether ``metric``'s name declares a time (``p50_ms``, ``cpu_s``, ``wall_ns``)."""
    return unit_of(metric) in TIME_UNITS


def change_words(metric: str, value: Any) -> str:
    """A ratio (this over that) as a person says it: ``48x faster``, ``1.75x slower`` for a
    time, ``250x lower``, ``1.5x higher`` for anything else, ``the same`` at x1; the factor is
    the ratio or its inverse, whichever is at least 1 (three significant figures). "" for
    none or a ratio that is not positive."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        return ""
    if not math.isfinite(value):
        return ""
    factor = 1 / value if value < 1 else value
    if f"{factor:.3g}" == "1":
        return "the same"
    down, up = ("faster", "slower") if is_time(metric) else ("lower", "higher")
    return f"{factor:.3g}x {down if value < 1 else up}"


def change_text(metric: str, value: Any, ci: Any, than: str = "", level: Any = None) -> str:
    """The one way a comparison's ratio is said everywhere (terminal, reports, job summary,
    site): ``48x faster than none (x0.0209, 95% [0.0185, 0.0275])``. The words come from the
    ratio itself and the interval is the ratio's own (no symmetric "+-" that would allow what
    the interval rules out), at its ``level`` (95% unless a look of adaptive blocks set
    another); ``than`` names the other side. "" without a ratio."""
    words = change_words(metric, value)
    if not words:
        return ""
    other = f" than {than}" if than and words != "the same" else (f" as {than}" if than else "")
    shown = f"{100 * level:.3g}%" if isinstance(level, float) else "95%"
    bounds = f", {shown} {interval(ci)}" if ci and None not in ci else ""
    return f"{words}{other} ({ratio(value, 3)}{bounds})"
