"""What a whole benchmark may use (``resources:``) and when its session stops (``budget:``)."""

from __future__ import annotations

from pytest_benchmark_agent.config.fields import (
    Count,
    FileModel,
    NonNegative,
    NonNegativeInt,
    Positive,
)


class Resources(FileModel):
    """What the whole benchmark may use; preflight and the guards hold the stages to it."""

    mem_mb: Positive | None = None
    disk_mb: Positive | None = None
    gpus: NonNegativeInt = 0
    vram_mb: NonNegative = 0
    est_gpu_hours: NonNegative = 0
    price_per_gpu_hour: NonNegative = 0


class Budget(FileModel):
    """Session limits: the session stops cleanly when one is spent."""

    trials: Count | None = None
    wall_clock_s: Positive | None = None
    gpu_hours: NonNegative | None = None
    cost_usd: NonNegative | None = None
