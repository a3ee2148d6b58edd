"""The record types docs/benchmark/FORMAT.md defines (a trial, a prep event), checked where a
record is read back, in one place.

The engine fills a trial's fields as the stage runs, in a builder (``engine/trial.py``) that
it freezes once into a :class:`TrialRecord`: what hooks get and what the journal and
``results.yaml`` write (``to_dict``, thawed, secrets redacted). What reads one back (the
journal, a snapshot, an import) goes through ``from_dict``, so a record of the wrong shape is
refused naming the field, instead of failing later, deep in gate 2 or a report, as a
``KeyError``. Fields this version does not know (a newer writer's, a plugin's) are kept as they
are, in ``extra``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_benchmark_agent.records.frozen import freeze

STATUSES = (
    "passed",
    "failed",
    "guard:memory",
    "guard:vram",
    "not_comparable",
    "interrupted",
    "not_run",
)


#: Values read-only as they are: a record's field holding one needs no freezing.
_SCALARS = frozenset({str, int, float, bool, type(None)})
PREP_ACTIONS = ("built", "reused", "failed")
VERDICTS = ("improved", "regressed", "no_change", "not_comparable")
REFUSALS = ("too_small", "finding", "failed")


class RecordShapeError(ValueError):
    """A record of the wrong shape: names the field and what is wrong with it."""

    def __init__(self, field_name: str, problem: str, what: str = "trial") -> None:
        super().__init__(f"{what} field `{field_name}`: {problem} (docs/benchmark/FORMAT.md)")
        self.field = field_name


def _build(cls: Any, data: Mapping[str, Any]) -> Any:
    """``cls`` from a checked mapping: its named fields, every other key kept in ``extra``."""
    known = {name for name in cls.__dataclass_fields__ if name != "extra"}
    return cls(
        **{name: data[name] for name in known if name in data},
        extra={key: value for key, value in data.items() if key not in known},
    )


def _check(data: Any, shape: tuple[tuple[str, tuple[type, ...], bool], ...], what: str) -> None:
    """Raise :class:`RecordShapeError` for the first field of ``data`` that breaks ``shape``."""
    if not isinstance(data, Mapping):
        raise RecordShapeError("(record)", f"a {type(data).__name__}, not a mapping", what)
    for name, kinds, required in shape:
        value = data.get(name)
        if value is None:
            if required:
                raise RecordShapeError(name, "missing", what)
            continue
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise RecordShapeError(name, f"{value!r} is not {_KIND_NAMES[kinds]}", what)


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
    #: The rendered command, the trial's folder, and its output files (those written).
    command: str | None = None
    logs: str | None = None
    #: Its ``setup:`` command as run (command, exit code, wall and CPU time, its window).
    setup: Mapping[str, Any] | None = None
    #: What the engine measured of the stage (cpu_s: user_s + sys_s, the whole tree's).
    exit_code: int | None = None
    wall_s: float | None = None
    cpu_s: float | None = None
    user_s: float | None = None
    sys_s: float | None = None
    #: What held the stage's processes (``cgroup``, ``subreaper``, ``process-group``).
    containment: str | None = None
    stdout: str | None = None
    stderr: str | None = None
    guard_events: tuple[Mapping[str, Any], ...] = ()
    gpus: tuple[int, ...] = ()
    peak_vram_mb: float | None = None
    #: A counted trial's backend, the built-in metrics it distorted, its ``PYTHONHASHSEED``.
    counted_by: str | None = None
    distorted: tuple[str, ...] = ()
    hash_seed: str | None = None
    #: GPU-hours (wall time x pinned GPUs) and their cost, where the stage had GPUs.
    gpu_hours: float | None = None
    cost_usd: float | None = None
    #: The ``BENCH_EFFECTIVE`` params the stage (and its preps) reported.
    effective: Mapping[str, Any] = field(default_factory=dict)
    #: Where the stage said it imported the code under test from (``BENCH_CODE_FROM``).
    code_from: tuple[str, ...] = ()
    #: Every other field (a newer writer's, a plugin's), as written.
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Read-only all the way down: a record read back may hold a container in any field.
        # A scalar (most fields) is read-only as it is; made per trial, so checked cheaply.
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if type(value) not in _SCALARS:
                object.__setattr__(self, name, freeze(value))

    def get(self, name: str, default: Any = None) -> Any:
        """A field by its record name, named or in ``extra`` (a plugin's, a newer writer's)."""
        if name in self.extra:
            return self.extra[name]
        return getattr(self, name, default) if name in _TRIAL_FIELDS else default

    @classmethod
    def from_dict(cls, data: Any) -> TrialRecord:
        """The record ``data`` holds; :class:`RecordShapeError` naming the first bad field."""
        _check(data, _TRIAL_SHAPE, "trial")
        if data["status"] not in STATUSES:
            raise RecordShapeError("status", f"{data['status']!r} is none of {', '.join(STATUSES)}")
        return _build(cls, data)

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
        for name in ("reason", "host", "command", "logs", "setup"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        out.update(self._measured())
        out.update(self.extra)
        return out

    def _measured(self) -> dict[str, Any]:
        """The engine's fields of a stage that ran, as FORMAT.md names them: each group only
        where it applies (GPUs, counting, effective params, ``BENCH_CODE_FROM``)."""
        out: dict[str, Any] = {}
        for name in _MEASURED:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.guard_events:
            out["guard_events"] = list(self.guard_events)
        if self.gpus:
            out.update(gpus=list(self.gpus), peak_vram_mb=self.peak_vram_mb)
        if self.counted_by is not None:
            out.update(
                counted_by=self.counted_by, distorted=list(self.distorted), hash_seed=self.hash_seed
            )
        if self.gpu_hours is not None:
            out.update(gpu_hours=self.gpu_hours, cost_usd=self.cost_usd)
        if self.effective:
            out["effective"] = dict(self.effective)
        if self.code_from:
            out["code_from"] = list(self.code_from)
        return out


@dataclass(frozen=True)
class PrepEvent:
    """What happened to one prep in a run (``preps:`` of ``results.yaml``): built, reused or
    failed, with its signature and cache folder; a built one carries its stage's fields too."""

    stage: str
    signature: str
    action: str
    binding: str | None = None
    folder: str | None = None
    reason: str | None = None
    rebuild_reason: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra", freeze(self.extra))

    def get(self, name: str, default: Any = None) -> Any:
        """A field by its record name, named or in ``extra`` (``gpu_hours``, ``cost_usd``)."""
        if name in self.extra:
            return self.extra[name]
        return getattr(self, name, default) if name in _PREP_FIELDS else default

    @classmethod
    def from_dict(cls, data: Any) -> PrepEvent:
        """The event ``data`` holds; :class:`RecordShapeError` naming the first bad field."""
        _check(data, _PREP_SHAPE, "prep")
        if data["action"] not in PREP_ACTIONS:
            raise RecordShapeError(
                "action", f"{data['action']!r} is none of {', '.join(PREP_ACTIONS)}", "prep"
            )
        return _build(cls, data)

    def to_dict(self) -> dict[str, Any]:
        """The event as written: its named fields (those set), then the others."""
        out: dict[str, Any] = {"stage": self.stage, "signature": self.signature}
        for name in ("binding", "action", "folder", "reason", "rebuild_reason"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        out.update(self.extra)
        return out


def check_verdict(data: Any) -> None:
    """Refuse a verdict record (``verdicts:`` metric -> label -> record) of the wrong shape with
    :class:`RecordShapeError` naming the field: the tag and every later comparison read it."""
    _check(data, _VERDICT_SHAPE, "verdict")
    if data["verdict"] not in VERDICTS:
        raise RecordShapeError(
            "verdict", f"{data['verdict']!r} is none of {', '.join(VERDICTS)}", "verdict"
        )
    ci = data.get("ci")
    if ci is not None and not (
        isinstance(ci, list)
        and len(ci) == 2
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in ci)
    ):
        raise RecordShapeError("ci", f"{ci!r} is not a pair of numbers", "verdict")
    refused = data.get("refused")
    if refused is not None and refused not in REFUSALS:
        raise RecordShapeError(
            "refused", f"{refused!r} is none of {', '.join(REFUSALS)}", "verdict"
        )


#: (field, accepted types, required) checked by :meth:`TrialRecord.from_dict`.
_TRIAL_SHAPE: tuple[tuple[str, tuple[type, ...], bool], ...] = (
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
#: The same for :meth:`PrepEvent.from_dict`.
_PREP_SHAPE: tuple[tuple[str, tuple[type, ...], bool], ...] = (
    ("stage", (str,), True),
    ("signature", (str,), True),
    ("action", (str,), True),
    ("binding", (str,), False),
    ("folder", (str,), False),
    ("reason", (str,), False),
    ("rebuild_reason", (str,), False),
)
#: The same for :func:`check_verdict`.
_VERDICT_SHAPE: tuple[tuple[str, tuple[type, ...], bool], ...] = (
    ("verdict", (str,), True),
    ("ratio", (int, float), False),
    ("p", (int, float), False),
    ("p_holm", (int, float), False),
    ("mde", (int, float), False),
    ("reason", (str,), False),
    ("refused", (str,), False),
)
_KIND_NAMES = {
    (str,): "a string",
    (int,): "an integer",
    (Mapping,): "a mapping",
    (int, float): "a number",
}
#: The engine's scalar fields of a stage that ran, in the order a trial record writes them.
_MEASURED = ("exit_code", "wall_s", "cpu_s", "user_s", "sys_s", "containment", "stdout", "stderr")
#: The fields each record type names (any other key is in its ``extra``).
_TRIAL_FIELDS = frozenset(TrialRecord.__dataclass_fields__) - {"extra"}
_PREP_FIELDS = frozenset(PrepEvent.__dataclass_fields__) - {"extra"}
