"""One stage of a benchmark's pipeline (``stages:``): a prep or a measure, its command,
inputs and outputs, where its metrics come from, and the resources one execution takes.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from pytest_benchmark_agent.config.fields import (
    FileModel,
    NonNegative,
    NonNegativeInt,
    Positive,
    WarmupCount,
)
from pytest_benchmark_agent.config.metric import BUILTIN_METRICS, COUNTERS


class MetricsFrom(FileModel):
    """Where a measure stage's metrics come from: its stdout, a file it writes, or the engine."""

    stdout: bool = False
    file: str | None = None
    fields: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> MetricsFrom:
        if self.stdout and self.file:
            raise ValueError("give either stdout: true or file: PATH, not both")
        needs_source = [f for f in self.fields if f not in BUILTIN_METRICS + COUNTERS]
        if needs_source and not (self.stdout or self.file):
            raise ValueError(
                f"fields {needs_source} need a source: add stdout: true or file: PATH "
                f"(only the built-in metrics {list(BUILTIN_METRICS)} and the counters "
                f"{list(COUNTERS)} need none)"
            )
        return self


class StageResources(FileModel):
    """A GPU stage's own ``resources:`` (the same as its flat ``gpus``/``vram_mb``), and what
    one execution of it (a trial, or a prep's build) is estimated to cost in GPU-hours."""

    gpus: NonNegativeInt | None = None
    vram_mb: Positive | None = None
    est_gpu_hours: NonNegative | None = None


class Stage(FileModel):
    """One step of the pipeline: a prep (cached by signature) or a measure (always re-run)."""

    name: str
    kind: Literal["prep", "measure"]
    cmd: str | None = None
    needs: list[str] = Field(default_factory=list)
    produces: list[str] = Field(default_factory=list)
    inputs: list[str] = Field(default_factory=list)
    wdir: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    metrics_from: MetricsFrom | None = None
    mem_mb: Positive | None = None
    gpus: NonNegativeInt | None = None
    vram_mb: Positive | None = None
    #: GPU-hours one execution is estimated to cost (preflight and the tuner's budget check).
    est_gpu_hours: NonNegative | None = None
    timeout_s: Positive | None = None
    #: Untimed rounds of a measure stage per configuration before its first trial (a cold
    #: first run, caches and imports, is never measured); ``--bench-warmup`` where unset.
    warmup: WarmupCount | None = None
    #: Run before every trial of a measure stage (and every warm-up round), outside its
    #: metrics: hyperfine's ``--prepare`` (reset a table, drop a cache).
    setup: str | None = None
    #: Lifted into ``gpus``, ``vram_mb`` and ``est_gpu_hours`` as read (declared for the schema).
    resources: StageResources | None = Field(default=None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _lift_resources(cls, data: Any) -> Any:
        """``resources: {gpus, vram_mb, est_gpu_hours}`` stands for the flat fields."""
        if not isinstance(data, dict) or not isinstance(data.get("resources"), dict):
            return data
        data = dict(data)
        for key, value in data["resources"].items():
            if key in data and data[key] != value:
                raise ValueError(
                    f"{key} is given twice, as {data[key]!r} and as resources.{key}: "
                    f"{value!r}; keep one"
                )
            if key in StageResources.model_fields:
                data[key] = value
        return data

    #: Counted by a backend while the stage runs (engine/counters.py), each one a metric.
    counters: list[Literal[COUNTERS]] = Field(default_factory=list)  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _counted(self) -> Stage:
        if self.counters and self.kind != "measure":
            raise ValueError("counters: are counted on a measure stage only")
        for name in ("warmup", "setup"):
            if getattr(self, name) is not None and self.kind != "measure":
                raise ValueError(f"{name}: belongs to a measure stage only (this is a prep)")
        read = self.metrics_from.fields if self.metrics_from else []
        uncounted = [name for name in read if name in COUNTERS and name not in self.counters]
        if uncounted:
            raise ValueError(f"fields {uncounted} are counters: add counters: {uncounted}")
        return self

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        bad = [name for name in env if not name or "=" in name]
        if bad:
            raise ValueError(
                f"environment variable names must be non-empty and hold no '=' (got {bad})"
            )
        return env
