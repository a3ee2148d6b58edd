"""The fields of a tuning file: the search space's dimensions, the objective, and how a tune
guards its own loop (``tune:``).
"""

from __future__ import annotations

from typing import Any, Literal

from pytest_benchmark_agent.config.fields import Count, FileModel, Float, Steps, by_shape


class Range(FileModel):
    """A numeric search range of a tuning file."""

    min: Float
    max: Float
    steps: Steps
    scale: Literal["linear", "log"] = "linear"


#: A dimension of ``search_space``: the values to try, or a numeric range.
Dimension = by_shape(
    f"a list or a mapping of {', '.join(Range.model_fields)}",
    values=(list[Any], (list, tuple)),
    range=(Range, (dict, Range)),
)


class TuneSettings(FileModel):
    """How a tune guards its own loop (the ``tune:`` block of a tuning file)."""

    max_noncomparable_streak: Count = 3


class Objective(FileModel):
    """What a tune optimizes: a metric and its better direction."""

    metric: str
    direction: Literal["lower", "higher"]
