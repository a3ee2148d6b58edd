"""What every stage of a session runs with, and the steps a prep and a trial share.

:class:`StageContext` holds the session's cache, memory cgroup, host isolation, containment
and budget deadlines, and publishes a stage's start and progress through the hooks (each given
the run as it stands, ``BenchRun.record()``). The functions are the parts of running a stage
that building a prep (:mod:`.preps`) and measuring a trial (:mod:`.execute`) both need: its
environment, its GPUs and their cost, its memory ceiling, and how it failed.
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.config.models import Stage
from pytest_benchmark_agent.engine.cache import PrepCache
from pytest_benchmark_agent.engine.invocation import DEFAULT_PROGRESS_S, StageInvocation
from pytest_benchmark_agent.engine.isolation import Containment, HostIsolation
from pytest_benchmark_agent.engine.revisions import CHECKOUT_ENV
from pytest_benchmark_agent.engine.stages import StageRun
from pytest_benchmark_agent.errors import StageFailed
from pytest_benchmark_agent.guards.cgroup import CgroupMemory
from pytest_benchmark_agent.guards.gpu import (
    cost_usd,
    cuda_oom_in,
    gpu_hours,
    pin_devices,
)
from pytest_benchmark_agent.records.run import BenchRun
from pytest_benchmark_agent.util.placeholders import render


@dataclass
class StageContext:
    """What every stage of a session runs with: the cache, the memory cgroup, the host lock,
    the containment of its processes."""

    cache: PrepCache
    cgroup: CgroupMemory | None
    isolation: HostIsolation
    hook: Any  # the pytest hook relay: stage start and progress are published through it
    progress_every_s: float = DEFAULT_PROGRESS_S
    #: Shows a stage's output as it comes (pytest's ``-s``): called with the trial id (or
    #: ``prep <stage>``), the stream's name and a chunk (b"" at the stream's end).
    echo: Callable[[str, str, bytes], None] | None = None
    #: Signatures this process has already verified or built (skipped when helping others).
    settled: set[str] = field(default_factory=set)
    #: The environment every stage starts from: this process's, as the session began (copying
    #: ``os.environ`` decodes every variable, a cost per stage worth avoiding).
    base_env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    containment: Containment = field(default_factory=Containment)
    #: Per run id, when ``budget.wall_clock_s`` runs out (``time.monotonic``): a trial still
    #: running then is stopped there.
    deadlines: dict[str, float] = field(default_factory=dict)
    #: What a write refused for want of space (path and error), once one did: the session
    #: stops, since every later stage and record would fail the same way.
    disk_full: str | None = None
    #: Warm-up rounds of a measure stage that sets no ``warmup:`` (``--bench-warmup``).
    warmup: int = 0
    #: (run id, stage, treatment, seed) already warmed up in this process.
    warmed: set[tuple[str, str, str, int | None]] = field(default_factory=set)

    def write_failed(self, what: str, exc: OSError) -> str:
        """The reason for a failed write (``what``: its purpose) naming its path; a full disk
        or quota is remembered in :attr:`disk_full`."""
        reason = f"{what}: {exc.filename or '(path unknown)'}: {exc.strerror or exc}"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT) and self.disk_full is None:
            self.disk_full = reason
        return reason

    def announce(
        self, run: BenchRun, stage: str, trial_id: str | None
    ) -> Callable[[float, float], None]:
        """Publish a stage's start; returns the progress callback for its run."""
        self.hook.pytest_bench_stage_started(run=run.record(), stage=stage, trial_id=trial_id)

        def progress(elapsed_s: float, peak_rss_mb: float) -> None:
            self.hook.pytest_bench_stage_progress(
                run=run.record(),
                stage=stage,
                trial_id=trial_id,
                elapsed_s=elapsed_s,
                peak_rss_mb=peak_rss_mb,
            )

        return progress

    def invocation(
        self, stage: str, command: str, cwd: Path, env: Mapping[str, str], log_dir: Path
    ) -> StageInvocation:
        """``command`` as a stage of this session: in its memory cgroup and containment, its
        progress at the session's pace. A prep, a measure stage and an untimed stage all start
        from it."""
        return StageInvocation(
            stage,
            command,
            cwd=cwd,
            env=env,
            log_dir=log_dir,
            cgroup=self.cgroup,
            progress_every_s=self.progress_every_s,
            containment=self.containment,
        )


def guarded(
    run: BenchRun, ctx: StageContext, call: StageInvocation, stage: Stage, shown_as: str
) -> StageInvocation:
    """``call`` as a prep's or measure stage's: its GPUs pinned (:func:`pin_gpus`, which raises
    GpuUnavailable), its memory and VRAM ceilings, its output echoed as ``shown_as``."""
    devices, env, vram_mb = pin_gpus(run, stage, dict(call.env))
    return replace(
        call,
        env=env,
        gpus=devices,
        vram_ceiling_mb=vram_mb,
        mem_ceiling_mb=ceiling(run, stage),
        echo=ctx.echo and functools.partial(ctx.echo, shown_as),
    )


def ceiling(run: BenchRun, stage: Stage) -> float | None:
    """A stage's memory ceiling: its own ``mem_mb``, else the benchmark's ``resources.mem_mb``."""
    return stage.mem_mb or run.plan.config.resources.mem_mb


def pin_gpus(
    run: BenchRun, stage: Stage, env: dict[str, str]
) -> tuple[list[int], dict[str, str], float]:
    """The devices a stage gets (its ``gpus``, else ``resources.gpus``; none hides every GPU),
    its env with ``CUDA_VISIBLE_DEVICES`` pinned, and its VRAM ceiling."""
    resources = run.plan.config.resources
    count = stage.gpus if stage.gpus is not None else resources.gpus
    vram_mb = stage.vram_mb or resources.vram_mb
    field_name = f"stages ({stage.name}).gpus" if stage.gpus is not None else "resources.gpus"
    devices, pinned = pin_devices(count, env, vram_mb=vram_mb, field=field_name)
    return devices, pinned, vram_mb


def gpu_spend(run: BenchRun, result: StageRun) -> dict[str, Any]:
    """GPU-hours (wall time x pinned GPUs) and their cost, for stages that had GPUs."""
    if not result.gpus:
        return {}
    hours = gpu_hours(result.wall_s, len(result.gpus))
    return {
        "gpu_hours": hours,
        "cost_usd": cost_usd(hours, run.plan.config.resources.price_per_gpu_hour),
    }


def check_exit(result: StageRun, ctx: StageContext) -> None:
    for problem in result.output_errors():
        raise StageFailed(
            result.stage,
            "could not keep its output",
            detail=ctx.write_failed("writing the stage's output failed", problem),
        )
    for event in result.guard_events:
        raise StageFailed(
            result.stage,
            f"was stopped by the {event['kind']} guard "
            f"({event['reason']}: peak {event['peak_mb']} MB, ceiling "
            f"{event['ceiling_mb']} MB)",
            status=f"guard:{event['kind']}",
            detail=f"stderr (last lines):\n{result.stderr_tail()}",
        )
    if result.timed_out:
        raise StageFailed(
            result.stage,
            "timed out and was stopped",
            detail=f"stderr (last lines):\n{result.stderr_tail()}",
        )
    if result.exit_code != 0:
        oom = cuda_oom_in(result.stderr_tail(200))
        if oom:
            raise StageFailed(
                result.stage,
                "ran out of GPU memory (CUDA out of memory)",
                detail=f"{oom}\nexit code {result.exit_code}; stderr (last lines):"
                f"\n{result.stderr_tail()}",
            )
        raise StageFailed(
            result.stage,
            f"exited with code {result.exit_code}",
            detail=f"command: {result.command}\nstderr (last lines):\n{result.stderr_tail()}",
        )


def stage_env(
    ctx: StageContext, extra: dict[str, str], values: dict[str, Any], checkout: Path
) -> dict[str, str]:
    """The stage's environment: the session's, ``$BENCH_CHECKOUT``, then its own ``env:``."""
    return {
        **ctx.base_env,
        CHECKOUT_ENV: str(checkout),
        **{key: render(text, values, quote=False) for key, text in extra.items()},
    }


def merged(sources: list[Any]) -> tuple[dict[str, Path], dict[str, str]]:
    """The artifacts and effective params of several prep outcomes or cache entries, merged."""
    artifacts = {name: path for source in sources for name, path in source.artifacts.items()}
    effective = {name: value for source in sources for name, value in source.effective.items()}
    return artifacts, effective
