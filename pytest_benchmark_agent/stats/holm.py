"""The multiple-comparison correction of gate 2: Holm's step-down over every metric x
treatment comparison of a run, at levels a sequential design may lower.
"""

from __future__ import annotations

from collections.abc import Callable


def holm_step_down(
    family: list[tuple[str, str, float]], alpha: float, level_fn: Callable[[float], float]
) -> dict[tuple[str, str], tuple[float, bool, float]]:
    """Holm step-down: (adjusted p, rejected, level used) per (metric, treatment).

    Step j (0-based, p ascending) compares the raw p with ``level_fn(alpha / (m - j))``; for a
    fixed design ``level_fn`` is the identity, for a sequential one the look's nominal level.
    """
    m = len(family)
    out: dict[tuple[str, str], tuple[float, bool, float]] = {}
    adjusted = 0.0
    rejecting = True
    for j, (metric, treatment, p) in enumerate(sorted(family, key=lambda x: (x[2], x[0], x[1]))):
        adjusted = max(adjusted, min(1.0, (m - j) * p))
        level = level_fn(alpha / (m - j))
        rejecting = rejecting and p <= level
        out[(metric, treatment)] = (adjusted, rejecting, level)
    return out
