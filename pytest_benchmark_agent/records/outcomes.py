"""What the judge concludes about a run beyond its verdicts, as typed, frozen values.

The CI gate (:class:`GateRecord`), the reproduction check (:class:`ReproductionRecord`) and the
sequential looks (:class:`SequentialRecord`) are held on :class:`.record.Judgement` and
:class:`.record.RunRecord` as themselves, so a reader asks ``run.ci_gate.outcome`` instead of a
mapping's key. Each is read from its ``results.yaml`` mapping once (``read``) and turned back
into the same mapping only by ``to_dict``, for the writer and the exporters
(docs/benchmark/FORMAT.md keeps its keys).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_benchmark_agent.records.frozen import FrozenDict, freeze, thaw


def _texts(value: Any) -> tuple[Any, ...]:
    """A recorded list as a tuple (anything else, absent or malformed, as none)."""
    return tuple(value) if isinstance(value, (list, tuple)) else ()


def _rest(data: Mapping[str, Any], known: tuple[str, ...]) -> FrozenDict:
    """The fields of ``data`` a newer writer added, kept as read."""
    return freeze({k: v for k, v in data.items() if k not in known})


@dataclass(frozen=True)
class GateRecord:
    """The CI gate's outcome (``passed``, ``regressed``, ``unjudged``) and its reasons, the
    first saying how it was judged: what ``--bench-fail-on`` and ``compare --fail-on`` act on."""

    outcome: str
    reasons: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=FrozenDict)

    _KEYS = ("outcome", "reasons")

    @property
    def word(self) -> str:
        """The outcome as the session prints it: ``passed``, else in capitals."""
        return self.outcome if self.outcome == "passed" else self.outcome.upper()

    def fails(self, fail_on: Any) -> bool:
        """Whether ``--fail-on`` / ``--bench-fail-on`` (``regression``, ``unjudged``) fails on
        this outcome."""
        return ("regression" in fail_on and self.outcome == "regressed") or (
            "unjudged" in fail_on and self.outcome == "unjudged"
        )

    @classmethod
    def read(cls, data: Any) -> GateRecord | None:
        """The gate a record's mapping holds; None for none (absent, empty, or without an
        outcome)."""
        if data is None or isinstance(data, GateRecord):
            return data
        if not isinstance(data, Mapping) or not isinstance(data.get("outcome"), str):
            return None
        return cls(
            outcome=data["outcome"],
            reasons=tuple(str(r) for r in _texts(data.get("reasons"))),
            extra=_rest(data, cls._KEYS),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "reasons": list(self.reasons), **thaw(self.extra)}


@dataclass(frozen=True)
class ReproductionRecord:
    """The run this one reproduces or is anchored to (``kind``), whether it did (``ok``) and
    why; or, with no such run (``kind`` None), why earlier runs of the config were no reruns
    (``skipped``)."""

    run_id: str | None
    kind: str | None = None  # "reproduction" | "anchor"
    ok: bool = False
    lines: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    tag: str | None = None
    caveats: tuple[str, ...] = ()
    benign_differences: tuple[str, ...] = ()
    limits: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=FrozenDict)

    _CHECK = ("kind", "ok", "lines", "problems", "tag", "caveats", "benign_differences", "limits")

    @property
    def reproduced(self) -> bool:
        """A faithful rerun that agreed with the run it reran (an anchor never is one)."""
        return self.ok and self.kind == "reproduction"

    @classmethod
    def read(cls, data: Any) -> ReproductionRecord | None:
        """The reproduction a record's mapping holds; None for none."""
        if data is None or isinstance(data, ReproductionRecord):
            return data
        if not isinstance(data, Mapping) or not data:
            return None
        return cls(
            run_id=data.get("run_id"),
            kind=data.get("kind"),
            ok=bool(data.get("ok")),
            lines=_texts(data.get("lines")),
            problems=_texts(data.get("problems")),
            tag=data.get("tag"),
            caveats=_texts(data.get("caveats")),
            benign_differences=_texts(data.get("benign_differences")),
            limits=_texts(data.get("limits")),
            skipped=_texts(data.get("skipped")),
            extra=_rest(data, ("run_id", *cls._CHECK, "skipped")),
        )

    def to_dict(self) -> dict[str, Any]:
        """FORMAT.md's ``reproduces``: the check's fields only where a run was checked."""
        out: dict[str, Any] = {"run_id": self.run_id}
        if self.kind is not None:
            out.update({name: thaw(getattr(self, name)) for name in self._CHECK})
        out["skipped"] = list(self.skipped)
        return {**out, **thaw(self.extra)}


@dataclass(frozen=True)
class SequentialRecord:
    """Where sequential replication stopped: the range of blocks, the blocks the verdicts use,
    why, each look taken, and the trials that ran on after the stop (recorded, not analysed)."""

    min_blocks: int
    max_blocks: int
    blocks_used: int
    stopped: bool
    reason: str
    looks: tuple[Mapping[str, Any], ...] = ()
    late_trials: int | None = None
    extra: Mapping[str, Any] = field(default_factory=FrozenDict)

    _KEYS = ("min", "max", "blocks_used", "stopped", "reason", "looks", "late_trials")

    @classmethod
    def read(cls, data: Any) -> SequentialRecord | None:
        """The sequential looks a record's mapping holds; None for none."""
        if data is None or isinstance(data, SequentialRecord):
            return data
        if not isinstance(data, Mapping) or not data:
            return None
        return cls(
            min_blocks=data.get("min") or 0,
            max_blocks=data.get("max") or 0,
            blocks_used=data.get("blocks_used") or 0,
            stopped=bool(data.get("stopped")),
            reason=str(data.get("reason") or ""),
            looks=freeze(_texts(data.get("looks"))),
            late_trials=data.get("late_trials"),
            extra=_rest(data, cls._KEYS),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "min": self.min_blocks,
            "max": self.max_blocks,
            "blocks_used": self.blocks_used,
            "stopped": self.stopped,
            "reason": self.reason,
            "looks": thaw(self.looks),
        }
        if self.late_trials is not None:
            out["late_trials"] = self.late_trials
        return {**out, **thaw(self.extra)}
