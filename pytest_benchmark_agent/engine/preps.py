"""Preps: reusing a verified cache entry, or building it under its lock.

``obtain_prep`` is what a prep's session-scoped fixture does (:mod:`.collect`). It never raises
for a stage failure: a prep that did not build is recorded (``preps:`` of ``results.yaml``) and
handed to the trials that need it, which fail naming it. Under xdist a worker that finds a prep
locked builds another one meanwhile, so preps build in parallel.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.engine.context import (
    StageContext,
    check_exit,
    gpu_spend,
    guarded,
    merged,
    stage_env,
)
from pytest_benchmark_agent.engine.metrics import (
    parse_effective,
)
from pytest_benchmark_agent.engine.plan import PrepNode, closure_nodes, describe_binding
from pytest_benchmark_agent.engine.stages import StageRun, run_stage
from pytest_benchmark_agent.errors import StageFailed
from pytest_benchmark_agent.guards.gpu import (
    GpuUnavailable,
)
from pytest_benchmark_agent.records.run import BenchRun
from pytest_benchmark_agent.util import redact
from pytest_benchmark_agent.util.fsutil import release_lock
from pytest_benchmark_agent.util.placeholders import render


@dataclass
class PrepOutcome:
    """What a prep fixture hands to the trials that need it (success or the reason it failed)."""

    node: PrepNode
    artifacts: dict[str, Path] = field(default_factory=dict)  # own and every upstream artifact
    effective: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    #: The first trial whose failure shows ``error`` in full; later dependents name it.
    shown_in: str | None = None


def obtain_prep(
    run: BenchRun, ctx: StageContext, node: PrepNode, upstream: list[PrepOutcome]
) -> PrepOutcome:
    """Reuse a verified cache entry for ``node`` or build it; never raises for a stage failure."""
    failed = next((dep for dep in upstream if dep.error), None)
    if failed:
        return PrepOutcome(
            node, error=f"needs '{failed.node.stage.name}', which failed: {failed.error}"
        )
    artifacts, effective = merged(upstream)
    lock = ctx.cache.lock(node.signature, wait=False)
    while lock is None:  # another worker is building it: build something else meanwhile
        if not _build_another(run, ctx, node):
            lock = ctx.cache.lock(node.signature)
    try:
        return _reuse_or_build(run, ctx, node, artifacts, effective)
    finally:
        release_lock(lock)


def _build_another(run: BenchRun, ctx: StageContext, waiting_for: PrepNode) -> bool:
    """Build one prep of the plan that nobody holds and whose needs are cached; False if none.

    Under xdist this is what makes preps parallel: workers start their blocks with the same
    prep, and the ones that find it locked build the next ones instead of waiting idle.
    """
    for other in run.plan.preps.values():  # dependencies come before their dependents
        if other is waiting_for or other.signature in ctx.settled:
            continue
        upstream = [ctx.cache.verify(dep)[0] for dep in closure_nodes(other.needs)]
        if any(entry is None for entry in upstream):
            continue
        lock = ctx.cache.lock(other.signature, wait=False)
        if lock is None:
            continue
        try:
            if ctx.cache.verify(other)[0] is not None:
                ctx.settled.add(other.signature)
                continue
            _reuse_or_build(run, ctx, other, *merged(upstream))
            return True
        finally:
            release_lock(lock)
    return False


def _reuse_or_build(
    run: BenchRun,
    ctx: StageContext,
    node: PrepNode,
    artifacts: dict[str, Path],
    effective: dict[str, str],
) -> PrepOutcome:
    """Under the node's lock: reuse its verified entry, or (re)build and publish it."""
    event: dict[str, Any] = {
        "stage": node.stage.name,
        "signature": node.signature,
        "binding": describe_binding(node),
    }
    cache = ctx.cache
    ctx.settled.add(node.signature)
    entry, why = cache.verify(node)
    if entry is not None:
        event.update(action="reused", folder=str(entry.folder))
        run.preps.append(event)
        return PrepOutcome(node, {**artifacts, **entry.artifacts}, {**effective, **entry.effective})
    event["rebuild_reason"] = why
    if why not in ("no cache entry",):
        run.caveats.append(
            f"cache entry of prep '{node.stage.name}' ({node.signature[:12]}) was rebuilt: {why}"
        )
    try:
        folder, scratch = cache.prepare(node)
    except OSError as exc:
        reason = ctx.write_failed("could not make its cache entry", exc)
        return _prep_failed(run, event, node, reason)
    return _build(run, ctx, node, event, (folder, scratch), artifacts, effective)


def _build(
    run: BenchRun,
    ctx: StageContext,
    node: PrepNode,
    event: dict[str, Any],
    entry_folders: tuple[Path, Path],
    artifacts: dict[str, Path],
    effective: dict[str, str],
) -> PrepOutcome:
    """Run the prep's stage into its new cache entry (``entry_folders``: the entry and its
    scratch folder) and publish it; a failure is recorded and the entry removed."""
    folder, scratch = entry_folders
    checkout = node.checkout or node.cwd
    values = {
        "checkout": checkout,  # a param of that name wins
        **node.params_used,
        "seed": node.seed,
        "out": scratch,
        **artifacts,
        **ctx.cache.artifact_paths(node),
    }
    command = render(node.stage.cmd or "", values)
    t0 = time.perf_counter()
    try:
        result = _run_prep(
            run, ctx, node, command, stage_env(ctx, node.stage.env, values, checkout)
        )
        event.update(gpu_spend(run, result))
        check_exit(result, ctx)
        _check_room(node.stage.name, folder, ctx)
        entry = ctx.cache.publish(
            node,
            run_id=run.run_id,
            command=command,
            duration_s=time.perf_counter() - t0,
            effective=parse_effective(result.stdout_lines(), scratch),
        )
    except (StageFailed, GpuUnavailable) as exc:
        if ctx.disk_full:  # what it wrote cannot be trusted, and takes the room records need
            shutil.rmtree(folder, ignore_errors=True)
        return _prep_failed(run, event, node, str(exc))
    except FileNotFoundError as exc:
        reason = (
            f"stage '{node.stage.name}' exited 0 but did not create its artifact(s) "
            f"{exc}; a prep must create every path it produces."
        )
        return _prep_failed(run, event, node, reason)
    except OSError as exc:  # the cache entry or the stage's logs could not be written
        reason = ctx.write_failed(f"prep '{node.stage.name}' could not write its results", exc)
        shutil.rmtree(folder, ignore_errors=True)
        return _prep_failed(run, event, node, reason)
    event.update(action="built", folder=str(folder), **result.as_record())
    run.preps.append(event)
    return PrepOutcome(node, {**artifacts, **entry.artifacts}, {**effective, **entry.effective})


def _run_prep(
    run: BenchRun, ctx: StageContext, node: PrepNode, command: str, env: dict[str, str]
) -> StageRun:
    """The prep's stage, alone on the host as the isolation policy says, its GPUs pinned."""
    name = node.stage.name
    log_dir = run.dir / "preps" / f"{name}-{node.signature[:12]}"
    call = guarded(
        run, ctx, ctx.invocation(name, command, node.cwd, env, log_dir), node.stage, f"prep {name}"
    )
    with ctx.isolation.stage("prep"):
        return run_stage(
            replace(call, timeout_s=node.stage.timeout_s, progress=ctx.announce(run, name, None))
        )


def _prep_failed(run: BenchRun, event: dict[str, Any], node: PrepNode, reason: str) -> PrepOutcome:
    """Record a prep that did not build (its cache entry unpublished, so never reused)."""
    event.update(action="failed", reason=redact.stage_text(reason))
    run.preps.append(event)
    return PrepOutcome(node, error=reason)


#: Free space below which a prep's artifacts are not trusted: a stage that ignored a failed
#: write (``cmd > file || true``) can exit 0 with an artifact cut short by a full disk.
MIN_FREE_BYTES = 1 << 16


def _check_room(stage: str, folder: Path, ctx: StageContext) -> None:
    """Refuse to publish a cache entry built while its disk filled up."""
    try:
        info = os.statvfs(folder)
    except OSError:
        return
    free = info.f_bavail * info.f_frsize
    if free < MIN_FREE_BYTES:
        reason = f"the disk of its cache entry {folder} was full when it ended ({free} bytes free)"
        ctx.disk_full = ctx.disk_full or reason
        raise StageFailed(
            stage,
            "may have written partial artifacts",
            detail=f"{reason}; the entry is removed, so it is built again once there is room.",
        )
