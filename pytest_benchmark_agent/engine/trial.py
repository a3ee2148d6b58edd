"""A trial's record while it runs: :class:`TrialBuilder`, filled by ``execute.run_trial`` and
frozen once into the :class:`.TrialRecord` that is published.

The builder holds what the engine learns as the trial goes (its command and folder, its setup,
the measure stage's outcome, its metrics, effective params and ``BENCH_CODE_FROM``, and how it
ended); :meth:`TrialBuilder.freeze` makes the record from the plan's blank one and these, with
no mapping in between.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from pytest_benchmark_agent.engine.stages import StageRun
from pytest_benchmark_agent.records.schema import TrialRecord


@dataclass
class TrialBuilder:
    """What a running trial has recorded so far, on top of its ``blank`` record (the plan's
    fields, :meth:`.BenchRun.blank_trial`)."""

    blank: TrialRecord
    status: str = "passed"
    reason: str | None = None
    host: str | None = None
    command: str | None = None
    logs: str | None = None
    setup: dict[str, Any] | None = None
    #: The measure stage, once it ran, and its GPU-hours and cost (``context.gpu_spend``).
    result: StageRun | None = None
    spend: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    effective: dict[str, Any] = field(default_factory=dict)
    code_from: list[str] = field(default_factory=list)
    #: When a trial that did not end with its stage (interrupted, stopped) ended.
    ended: str | None = None

    @property
    def id(self) -> str:
        return self.blank.id

    def end(self, status: str, reason: str, ended: str | None = None) -> None:
        """The trial ends ``status`` for ``reason`` (at ``ended``, where its stage did not
        end it)."""
        self.status, self.reason = status, reason
        self.ended = ended or self.ended

    def freeze(self) -> TrialRecord:
        """The trial's record, as published and written."""
        measured = self.result.as_record() if self.result is not None else {}
        if self.ended is not None:
            measured["ended"] = self.ended
        return dataclasses.replace(
            self.blank,
            status=self.status,
            reason=self.reason,
            host=self.host,
            command=self.command,
            logs=self.logs,
            setup=self.setup,
            metrics=self.metrics,
            effective=self.effective,
            code_from=tuple(self.code_from),
            **measured,
            **self.spend,
        )
