"""A run's ``index.json`` entry as a value: the few fields ``results_index.md``, ``history``,
``clean``, baseline resolution and the reproduction search read without opening the record.

:class:`IndexEntry` is built from a :class:`.RunRecord` by the writer that keeps ``index.json``
(:func:`.writer.build_index_entry`) and read back by its one loader (:func:`.writer.load_index`),
which checks a file's shape here and skips a malformed one as :func:`.record.load_run` skips a
bad run. The file's format is FORMAT.md's: :meth:`IndexEntry.to_dict` writes the same keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_benchmark_agent.records.frozen import FrozenDict, thaw

#: The fields of an entry its readers take, and the JSON types each may have.
_ENTRY_TYPES: dict[str, tuple[type, ...]] = {
    "run_id": (str,),
    "name": (str, type(None)),
    "state": (str, type(None)),
    "tag": (str, type(None)),
    "started": (str, type(None)),
    "ended": (str, type(None)),
    "counts": (dict,),
    "primary": (dict, type(None)),
    "verdicts": (dict, type(None)),
    "code": (dict, type(None)),
    "ci_gate": (str, type(None)),
    "config_hash": (str, type(None)),
    "comparison_key": (str, type(None)),
}


@dataclass(frozen=True)
class IndexEntry:
    """One run's ``index.json`` entry (an older entry lacks some keys: their defaults). Its
    mappings are the JSON objects as read, not copied (a scan reads 1,000 entries at a time):
    read only."""

    run_id: str
    name: str | None = None
    state: str | None = None
    tag: str | None = None
    started: str | None = None
    ended: str | None = None
    #: status -> number of trials (:func:`.tally.status_counts`).
    counts: Mapping[str, int] = field(default_factory=FrozenDict)
    treatment_variable: str | None = None
    #: The entry says the run measured one configuration (its ``treatment_variable`` is null;
    #: an entry from before the key was kept says nothing).
    one_configuration: bool = False
    control: str | None = None
    #: metric -> label -> ratio to the control, of the primary metrics.
    primary: Mapping[str, Mapping[str, Any]] = field(default_factory=FrozenDict)
    #: metric -> label -> verdict word, of the primary metrics; None: the entry lists none.
    verdicts: Mapping[str, Mapping[str, str | None]] | None = None
    config_hash: str | None = None
    #: The runs its record cites (its baseline, the run it reproduces).
    cites: tuple[str, ...] = ()
    flags: int = 0
    #: The code it measured (:func:`.writer.code_entry`: commit, short, branch, dirty, label).
    code: Mapping[str, Any] | None = None
    ci_gate: str | None = None
    comparison_key: str | None = None
    schema_version: int | None = None

    @property
    def commit(self) -> str | None:
        """The commit of the code it measured, where one is recorded."""
        commit = (self.code or {}).get("commit")
        return commit if isinstance(commit, str) and commit else None

    @property
    def dirty(self) -> bool:
        """Whether the code it measured had uncommitted changes."""
        return bool((self.code or {}).get("dirty"))

    @property
    def code_label(self) -> str | None:
        """The code it measured, as reports name it (``a1b2c3d``, ``a1b2c3d+dirty``)."""
        label = (self.code or {}).get("label")
        return None if label is None else str(label)

    @classmethod
    def from_dict(cls, data: Any) -> IndexEntry:
        """The entry a JSON value holds; ValueError saying what is wrong where it has not the
        shape of one."""
        entry = _checked(data)
        flags, cites = entry.get("flags"), entry.get("cites")
        variable = entry.get("treatment_variable")
        return cls(
            **{key: entry.get(key) for key in _ENTRY_TYPES if key not in _MAPPINGS},
            counts=entry.get("counts") or {},
            primary=entry.get("primary") or {},
            verdicts=entry.get("verdicts"),
            code=entry.get("code"),
            treatment_variable=variable if isinstance(variable, str) else None,
            one_configuration="treatment_variable" in entry and variable is None,
            control=None if entry.get("control") is None else str(entry["control"]),
            cites=tuple(c for c in cites if isinstance(c, str)) if isinstance(cites, list) else (),
            flags=flags if isinstance(flags, int) else 0,
            schema_version=_int(entry.get("schema_version")),
        )

    def to_dict(self) -> dict[str, Any]:
        """The entry as ``index.json`` holds it (FORMAT.md's keys, in its order)."""
        return {
            "schema_version": self.schema_version,
            "run_id": self.run_id,
            "name": self.name,
            "state": self.state,
            "tag": self.tag,
            "started": self.started,
            "ended": self.ended,
            "counts": thaw(self.counts),
            "treatment_variable": self.treatment_variable,
            "control": self.control,
            "primary": thaw(self.primary),
            "verdicts": thaw(self.verdicts),
            "config_hash": self.config_hash,
            "cites": list(self.cites),
            "flags": self.flags,
            "code": thaw(self.code),
            "ci_gate": self.ci_gate,
            "comparison_key": self.comparison_key,
        }


#: The fields of :data:`_ENTRY_TYPES` that :meth:`IndexEntry.from_dict` reads as mappings.
_MAPPINGS = ("counts", "primary", "verdicts", "code")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _checked(entry: Any) -> dict[str, Any]:
    """``entry`` if it has the shape of an index entry, else a ValueError saying what is
    wrong."""
    if not isinstance(entry, dict):
        raise ValueError(f"a JSON {type(entry).__name__}, not an object")
    for key, types in _ENTRY_TYPES.items():
        if key in entry and not isinstance(entry[key], types):
            raise ValueError(f"its {key!r} is a JSON {type(entry[key]).__name__}")
    if "run_id" not in entry:
        raise ValueError("it has no run_id")
    nested = [entry.get("counts") or {}, *(entry.get("primary") or {}).values()]
    nested += (entry.get("verdicts") or {}).values()
    if not all(isinstance(part, dict) for part in nested[1:]) or not all(
        isinstance(n, int) for n in nested[0].values()
    ):
        raise ValueError("its counts, primary or verdicts are not objects of the expected kind")
    return entry
