"""Read-only views of a live run, for the hook implementations that follow it.

Every ``pytest_bench_*`` hook receives a :class:`RunView` and the trial as a
:class:`FrozenMapping`: an exporter, a dashboard or the engine's own writers read everything the
records hold, and none can change a verdict, a caveat or a trial that another implementation (or
gate 2) reads after it. A plugin that has something to add to the run returns it from
``pytest_bench_run_caveats``: the one way in, recorded and judged like the engine's own caveats.

Freezing is lazy (a container is wrapped when it is read, not copied), so a hook called once per
trial costs the same on a run of ten trials as on one of ten thousand. :func:`thaw` gives plain,
writable copies for what is serialized (``json``, the YAML writer).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_benchmark_agent.records.run import BenchRun

_READ_ONLY = (
    "a hook's view of the run is read-only ({what}); a plugin adds caveats by returning them "
    "from pytest_bench_run_caveats (docs/benchmark/DESIGN.md)"
)


class ReadOnlyError(AttributeError, TypeError):
    """A hook implementation tried to change the run or a trial it was shown."""


class FrozenMapping(Mapping[str, Any]):
    """A mapping that can be read (its containers frozen in turn) and never written."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return frozen(self._data[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"FrozenMapping({self._data!r})"

    def __setitem__(self, key: str, value: Any) -> None:
        raise ReadOnlyError(_READ_ONLY.format(what=f"cannot set [{key!r}]"))

    def __delitem__(self, key: str) -> None:
        raise ReadOnlyError(_READ_ONLY.format(what=f"cannot delete [{key!r}]"))


class FrozenSequence(Sequence[Any]):
    """A list that can be read (its containers frozen in turn) and never written."""

    __slots__ = ("_data",)

    def __init__(self, data: Sequence[Any]) -> None:
        self._data = data

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return FrozenSequence(self._data[index])
        return frozen(self._data[index])

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"FrozenSequence({self._data!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenSequence):
            return list(self._data) == list(other._data)
        return isinstance(other, (list, tuple)) and list(self._data) == list(other)

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so unhashable like one

    def __setitem__(self, index: Any, value: Any) -> None:
        raise ReadOnlyError(_READ_ONLY.format(what="cannot set an item"))

    def __delitem__(self, index: Any) -> None:
        raise ReadOnlyError(_READ_ONLY.format(what="cannot delete an item"))

    def append(self, value: Any) -> None:
        raise ReadOnlyError(_READ_ONLY.format(what="cannot append"))

    def extend(self, values: Any) -> None:
        raise ReadOnlyError(_READ_ONLY.format(what="cannot extend"))

    def __iadd__(self, values: Any) -> FrozenSequence:
        raise ReadOnlyError(_READ_ONLY.format(what="cannot extend"))


def frozen(value: Any) -> Any:
    """``value`` for reading only: dicts and lists wrapped, sets frozen, the rest as they are
    (scalars, paths, and the plan, which is built once and never changed by the engine)."""
    if isinstance(value, (FrozenMapping, FrozenSequence)):
        return value
    if isinstance(value, dict):
        return FrozenMapping(value)
    if isinstance(value, list):
        return FrozenSequence(value)
    if isinstance(value, set):
        return frozenset(value)
    return value


def thaw(value: Any) -> Any:
    """A plain, writable deep copy of what :func:`frozen` wrapped (dicts and lists)."""
    if isinstance(value, FrozenMapping):
        value = value._data
    elif isinstance(value, FrozenSequence):
        value = value._data
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(item) for item in value]
    return value


class RunView:
    """A run as hooks see it: every attribute and method of :class:`.BenchRun`, read-only.

    Methods return frozen results too, except :meth:`results`, the whole record as a plain copy
    (what the writers serialize)."""

    __slots__ = ("_run",)

    def __init__(self, run: BenchRun) -> None:
        object.__setattr__(self, "_run", run)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._run, name)
        if callable(value) and not isinstance(value, type):

            def call(*args: Any, **kwargs: Any) -> Any:
                return frozen(value(*args, **kwargs))

            return call
        return frozen(value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise ReadOnlyError(_READ_ONLY.format(what=f"cannot set run.{name}"))

    def __delattr__(self, name: str) -> None:
        raise ReadOnlyError(_READ_ONLY.format(what=f"cannot delete run.{name}"))

    def __repr__(self) -> str:
        return f"RunView({self._run.run_id})"

    def results(self) -> dict[str, Any]:
        """The whole record, as ``results.yaml`` holds it: a copy, so writing it changes nothing."""
        return thaw(self._run.results())
