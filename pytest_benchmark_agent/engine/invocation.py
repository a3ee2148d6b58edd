"""One stage invocation's settings, as one frozen value (:class:`StageInvocation`).

A stage runs with its command, folder, environment and log folder, its guards' ceilings, the
session's cgroup and containment, its progress and echo callbacks, and its counting. Held in
one value, :func:`.stages.run_stage` and its helpers take it whole, and a prep, a trial's
measure stage and its untimed stages each derive theirs from the one the session's context
gives (:func:`.context.invocation`), rather than each repeating a long list of arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_benchmark_agent.engine.isolation import Containment
from pytest_benchmark_agent.guards.cgroup import CgroupMemory

#: How often a running stage's progress callback is called (the live line, the heartbeat).
DEFAULT_PROGRESS_S = 1.0


@dataclass(frozen=True)
class StageInvocation:
    """How one stage is to run (:func:`.stages.run_stage` says what each setting does)."""

    stage: str
    command: str
    cwd: Path
    env: Mapping[str, str]
    log_dir: Path
    timeout_s: float | None = None
    mem_ceiling_mb: float | None = None
    cgroup: CgroupMemory | None = None
    progress: Callable[[float, float], None] | None = None
    progress_every_s: float = DEFAULT_PROGRESS_S
    echo: Callable[[str, bytes], None] | None = None
    gpus: Sequence[int] = ()
    vram_ceiling_mb: float = 0
    containment: Containment | None = None
    counters: Sequence[str] = ()
    block: int = 0
    hash_seed_base: int = 0
