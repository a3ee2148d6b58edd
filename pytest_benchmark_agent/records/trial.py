"""The trial record as a type: the fields docs/benchmark/FORMAT.md defines, checked where a
record is read back, in one place.

The engine still fills a trial's fields as the stage runs (a plain mapping that the journal and
``results.yaml`` write as is); what reads a trial back (the journal, a snapshot, an import)
goes through :meth:`TrialRecord.from_dict`, so a record of the wrong shape is refused naming
the field, instead of failing later, deep in gate 2 or a report, as a ``KeyError``. Fields this
version does not know (a newer writer's, a plugin's) are kept as they are, in ``extra``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

STATUSES = (
    "passed",
    "failed",
    "guard:memory",
    "guard:vram",
    "not_comparable",
    "interrupted",
    "not_run",
)


class TrialRecordError(ValueError):
    """A trial record of the wrong shape: names the field and what is wrong with it."""

    def __init__(self, field_name: str, problem: str) -> None:
        super().__init__(f"trial field `{field_name}`: {problem} (docs/benchmark/FORMAT.md)")
        self.field = field_name


@dataclass(frozen=True)
class TrialRecord:
    """One trial, as ``trials:`` of ``results.yaml`` and each line of ``trials.jsonl`` hold it."""

    id: str
    treatment: str
    replicate: int
    status: str
    stage: str
    seed: int | None = None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    started: str | None = None
    ended: str | None = None
    peak_rss_mb: float | None = None
    reason: str | None = None
    position: int | None = None
    host: str | None = None
    #: Every other field (command, logs, effective, guard events, ...), as written.
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Any) -> TrialRecord:
        """The record ``data`` holds; :class:`TrialRecordError` naming the first bad field."""
        if not isinstance(data, Mapping):
            raise TrialRecordError("(record)", f"a {type(data).__name__}, not a mapping")
        known = {name for name in cls.__dataclass_fields__ if name != "extra"}
        for name, kinds, required in _SHAPE:
            value = data.get(name)
            if value is None:
                if required:
                    raise TrialRecordError(name, "missing")
                continue
            if isinstance(value, bool) or not isinstance(value, kinds):
                raise TrialRecordError(name, f"{value!r} is not {_KIND_NAMES[kinds]}")
        if data["status"] not in STATUSES:
            raise TrialRecordError("status", f"{data['status']!r} is none of {', '.join(STATUSES)}")
        return cls(
            **{name: data.get(name) for name in known if name in data},
            extra={key: value for key, value in data.items() if key not in known},
        )

    def to_dict(self) -> dict[str, Any]:
        """The record as written: the fixed fields in FORMAT.md's order, then the others."""
        out: dict[str, Any] = {
            "id": self.id,
            "treatment": self.treatment,
            "replicate": self.replicate,
            "seed": self.seed,
            "position": self.position,
            "status": self.status,
            "metrics": dict(self.metrics),
            "started": self.started,
            "ended": self.ended,
            "peak_rss_mb": self.peak_rss_mb,
            "stage": self.stage,
        }
        for name in ("reason", "host"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        out.update(self.extra)
        return out


#: (field, accepted types, required) checked by :meth:`TrialRecord.from_dict`.
_SHAPE: tuple[tuple[str, tuple[type, ...], bool], ...] = (
    ("id", (str,), True),
    ("treatment", (str,), True),
    ("replicate", (int,), True),
    ("status", (str,), True),
    ("stage", (str,), True),
    ("seed", (int,), False),
    ("metrics", (Mapping,), False),
    ("started", (str,), False),
    ("ended", (str,), False),
    ("peak_rss_mb", (int, float), False),
    ("reason", (str,), False),
    ("position", (int,), False),
    ("host", (str,), False),
)
_KIND_NAMES = {
    (str,): "a string",
    (int,): "an integer",
    (Mapping,): "a mapping",
    (int, float): "a number",
}
