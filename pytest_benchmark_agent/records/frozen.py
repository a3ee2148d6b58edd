"""Values that can be read and never written: what a run's record is made of.

A record is passed to every hook implementation, the judge's readers, the reports and the verbs;
frozen all the way down, no reader can change what another reads after it. :func:`freeze` makes
a value so once, when the record is made (a snapshot of the live run, or a run folder read
back); :func:`thaw` gives the plain, writable copy the writers serialize.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

_READ_ONLY = (
    "a run's record is read-only; a plugin adds caveats by returning them from "
    "pytest_bench_run_caveats (docs/benchmark/DESIGN.md)"
)


class FrozenDict(Mapping[str, Any]):
    """A mapping that can be read and never written (its values frozen in turn)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] = ()) -> None:  # type: ignore[assignment]
        object.__setattr__(self, "_data", {key: freeze(value) for key, value in dict(data).items()})

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"FrozenDict({self._data!r})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(_READ_ONLY)

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (self._data,))


def freeze(value: Any) -> Any:
    """``value`` read-only all the way down: mappings :class:`FrozenDict`, lists and tuples
    tuples, sets frozensets; scalars, paths and frozen dataclasses as they are."""
    if isinstance(value, FrozenDict):
        return value
    if isinstance(value, Mapping):
        return FrozenDict(value)
    if isinstance(value, (list, tuple)):
        return tuple(freeze(item) for item in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(value)
    return value


def thaw(value: Any) -> Any:
    """A plain, writable deep copy of a frozen value (dicts and lists), records as their
    ``to_dict``: what the writers serialize."""
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):  # a record's fields may hold frozen values (a trial's extra ones)
        return thaw(to_dict())
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(item) for item in value]
    return value
