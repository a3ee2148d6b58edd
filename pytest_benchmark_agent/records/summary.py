"""A row of a run's ``summary``: one treatment's statistics of one metric, of one shape.

A number's row holds ``n, median, mean, stdev, cv, min, max`` and ``ratio_to_control``; an
exact metric's (``direction: equal``) holds ``n, distinct, values`` (docs/benchmark/FORMAT.md).
:class:`SummaryRow` tells the two apart once, where the row is made, and says so as ``exact``,
so no reader guesses the kind from the keys. It stays a read-only mapping of the recorded
fields: ``results.yaml`` is written from it unchanged, and ``result.stats(metric)[label]["n"]``
reads as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_benchmark_agent.records.frozen import FrozenDict


class SummaryRow(FrozenDict):
    """One treatment's statistics of one metric, read-only; ``exact`` for an exact metric's
    distinct values and their counts (never a median or a CV)."""

    __slots__ = ("exact",)

    exact: bool

    def __init__(self, data: Mapping[str, Any] = ()) -> None:  # type: ignore[assignment]
        super().__init__(data)
        object.__setattr__(self, "exact", "values" in self._data)

    def __repr__(self) -> str:
        return f"SummaryRow({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (SummaryRow, (self._data,))


def summary_table(data: Any) -> FrozenDict:
    """metric -> label -> :class:`SummaryRow` from a record's ``summary`` mapping (a value of
    another kind kept as read, frozen)."""
    if not isinstance(data, Mapping):
        return FrozenDict()
    return FrozenDict(
        {
            metric: FrozenDict(
                {
                    label: SummaryRow(row) if isinstance(row, Mapping) else row
                    for label, row in per.items()
                }
            )
            if isinstance(per, Mapping)
            else per
            for metric, per in data.items()
        }
    )
