"""Executing the plan: building or reusing preps, and running one trial's measure stage.

``obtain_prep`` is what a prep's session-scoped fixture does; ``run_trial`` is what a trial
item does. Both turn every way a stage can go wrong into a recorded outcome with a readable
reason. ``run_trial`` returns a passed trial's record and carries any other out on an exception
(:class:`TrialNotPassed`, or a KeyboardInterrupt holding the trial it cut short); the item
(:mod:`.collect`) hands each one to the session (``BenchSession.finish_trial``), which
publishes it through the ``pytest_bench_trial_finished`` hook at once, so its samples are on
disk before the next trial starts.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_benchmark_agent.config.models import BUILTIN_METRICS, Stage, exact_metrics
from pytest_benchmark_agent.config.placeholders import names_in, render
from pytest_benchmark_agent.engine import untimed
from pytest_benchmark_agent.engine.cache import PrepCache
from pytest_benchmark_agent.engine.isolation import Containment, HostIsolation, host_id
from pytest_benchmark_agent.engine.metrics import (
    Value,
    effective_mismatches,
    parse_code_from,
    parse_effective,
    parse_metrics,
    read_metrics_file,
)
from pytest_benchmark_agent.engine.plan import PrepNode, TrialSpec, closure_nodes, describe_binding
from pytest_benchmark_agent.engine.revisions import CHECKOUT_ENV, foreign_code
from pytest_benchmark_agent.engine.stages import DEFAULT_PROGRESS_S, StageRun, run_stage
from pytest_benchmark_agent.errors import MetricError, StageFailed
from pytest_benchmark_agent.guards.cgroup import CgroupMemory
from pytest_benchmark_agent.guards.gpu import (
    GpuUnavailable,
    cost_usd,
    cuda_oom_in,
    gpu_hours,
    pin_devices,
)
from pytest_benchmark_agent.records import redact
from pytest_benchmark_agent.records.fsutil import release_lock, utc_now
from pytest_benchmark_agent.records.run import BenchRun


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
    artifacts, effective = _merged(upstream)
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
            _reuse_or_build(run, ctx, other, *_merged(upstream))
            return True
        finally:
            release_lock(lock)
    return False


def _merged(sources: list[Any]) -> tuple[dict[str, Path], dict[str, str]]:
    """The artifacts and effective params of several prep outcomes or cache entries, merged."""
    artifacts = {name: path for source in sources for name, path in source.artifacts.items()}
    effective = {name: value for source in sources for name, value in source.effective.items()}
    return artifacts, effective


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
    own = cache.artifact_paths(node)
    checkout = node.checkout or node.cwd
    values = {
        "checkout": checkout,  # a param of that name wins
        **node.params_used,
        "seed": node.seed,
        "out": scratch,
        **artifacts,
        **own,
    }
    command = render(node.stage.cmd or "", values)
    log_dir = run.dir / "preps" / f"{node.stage.name}-{node.signature[:12]}"
    t0 = time.perf_counter()
    try:
        devices, env, vram_mb = _pin_gpus(
            run, node.stage, _stage_env(ctx, node.stage.env, values, checkout)
        )
        with ctx.isolation.stage("prep"):
            progress = ctx.announce(run, node.stage.name, None)
            result = run_stage(
                node.stage.name,
                command,
                cwd=node.cwd,
                env=env,
                log_dir=log_dir,
                timeout_s=node.stage.timeout_s,
                cgroup=ctx.cgroup,
                mem_ceiling_mb=_ceiling(run, node.stage),
                progress=progress,
                progress_every_s=ctx.progress_every_s,
                echo=ctx.echo and functools.partial(ctx.echo, f"prep {node.stage.name}"),
                gpus=devices,
                vram_ceiling_mb=vram_mb,
                containment=ctx.containment,
            )
        event.update(_gpu_spend(run, result))
        _check_exit(result, ctx)
        _check_room(node.stage.name, folder, ctx)
        stage_effective = parse_effective(result.stdout_lines(), scratch)
        entry = cache.publish(
            node,
            run_id=run.run_id,
            command=command,
            duration_s=time.perf_counter() - t0,
            effective=stage_effective,
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


#: The reason of a trial that ``budget.wall_clock_s`` stopped while it ran.
BUDGET_STOP = "stopped at the deadline of budget.wall_clock_s"


def run_trial(
    run: BenchRun, ctx: StageContext, spec: TrialSpec, preps: list[PrepOutcome]
) -> dict[str, Any]:
    """Run the measure stage of one trial and return its record (not yet published).

    Raises :class:`TrialNotPassed` (its ``record`` built, its ``cause`` the StageFailed) when
    the trial did not pass, so pytest shows it as a failure with the stage's reason, and a
    KeyboardInterrupt carrying the record (:func:`interrupted_record`) when it was cut short.
    """
    record = run.blank_trial(spec, "passed")
    record["host"] = host_id()
    failed = next((p for p in preps if p.error), None)
    if failed:
        detail = failed.error or ""
        if failed.shown_in is None:
            failed.shown_in = record["id"]
        else:  # its output once, not once per trial
            first = detail.splitlines()[0] if detail else ""
            detail = f"{first} (its output is shown once, under {failed.shown_in})"
        raise _not_passed(
            record, StageFailed(failed.node.stage.name, "(a prep) failed", detail=detail)
        )
    folder = run.trial_dir(spec)
    scratch = folder / "out"
    uses_out = _uses_out(
        spec.stage.cmd or "", spec.stage.metrics_from and spec.stage.metrics_from.file
    )
    artifacts, upstream_effective = _merged(preps)
    checkout = spec.checkout or spec.cwd
    values = {
        "checkout": checkout,  # a param of that name wins
        **spec.params,
        "seed": spec.seed,
        "out": scratch,
        **artifacts,
    }
    command = render(spec.stage.cmd or "", values)
    record.update(command=command, logs=str(folder))
    try:
        devices, env, vram_mb = _pin_gpus(
            run, spec.stage, _stage_env(ctx, spec.stage.env, values, checkout)
        )
    except GpuUnavailable as exc:
        raise _not_passed(
            record, StageFailed(spec.stage.name, "could not get its GPUs", detail=str(exc))
        ) from None
    timeout_s, by_budget = _trial_timeout(ctx, run, spec.stage)
    try:
        if uses_out:
            scratch.mkdir(parents=True, exist_ok=True)  # else nothing is made unless output comes
        with ctx.isolation.stage("measure"):
            untimed.warm_up(run, ctx, spec, record["id"], command, values, env, folder, timeout_s)
            setup = untimed.run_setup(ctx, spec, values, env, folder / "setup", timeout_s)
            if setup is not None:
                record["setup"] = setup
            progress = ctx.announce(run, spec.stage.name, record["id"])
            result = run_stage(
                spec.stage.name,
                command,
                cwd=spec.cwd,
                env=env,
                log_dir=folder,
                timeout_s=timeout_s,
                cgroup=ctx.cgroup,
                mem_ceiling_mb=_ceiling(run, spec.stage),
                progress=progress,
                progress_every_s=ctx.progress_every_s,
                echo=ctx.echo and functools.partial(ctx.echo, record["id"]),
                gpus=devices,
                vram_ceiling_mb=vram_mb,
                containment=ctx.containment,
                counters=spec.stage.counters,
                block=spec.replicate,
                hash_seed_base=run.hash_seed_base,
            )
    except KeyboardInterrupt:
        record.update(
            status="interrupted",
            reason="the session was interrupted during this trial",
            ended=utc_now(),
        )
        raise _Interrupted(record) from None
    except StageFailed as exc:  # its setup: failed
        raise _not_passed(record, exc) from None
    except OSError as exc:  # its folder, logs or heartbeat could not be written
        reason = ctx.write_failed("the trial could not write its records", exc)
        raise _not_passed(
            record, StageFailed(spec.stage.name, "could not run", detail=reason)
        ) from None
    record.update(result.as_record())
    record.update(_gpu_spend(run, result))
    record["metrics"] = {name: record[name] for name in BUILTIN_METRICS}
    for name in result.distorted:  # measured under a counting backend: no verdict uses it
        del record["metrics"][name]
    if by_budget and result.timed_out:
        record.update(status="interrupted", reason=f"{BUDGET_STOP} (the trial was cut short)")
        raise TrialNotPassed(record, pytest.skip.Exception(record["reason"]))
    try:
        _check_exit(result, ctx)
        record["metrics"].update(result.counts_or_error())
        record["metrics"].update(
            _read_metrics(spec, result, values, exact_metrics(run.plan.config.metrics), run.home)
        )
    except (StageFailed, MetricError) as exc:
        cause = (
            exc
            if isinstance(exc, StageFailed)
            else StageFailed(spec.stage.name, "reported bad metrics", detail=str(exc))
        )
        raise _not_passed(record, cause) from None
    effective = {
        **upstream_effective,
        **parse_effective(result.stdout_lines(), scratch if uses_out else None),
    }
    if effective:
        record["effective"] = effective
    _check_code_from(run, ctx, spec, record, result.stdout_lines())
    mismatches = effective_mismatches(spec.params, effective)
    if mismatches:
        raise _not_passed(
            record,
            StageFailed(
                spec.stage.name,
                "is not comparable",
                status="not_comparable",
                detail="effective params differ from declared: " + "; ".join(mismatches),
            ),
        )
    return record


def _check_code_from(
    run: BenchRun, ctx: StageContext, spec: TrialSpec, record: dict[str, Any], stdout: Any
) -> None:
    """Record where the stage said it imported the code under test from (``BENCH_CODE_FROM``);
    under ``--bench-against`` a trial that imported the other revision's code is not
    comparable: it did not measure its own revision."""
    paths = parse_code_from(stdout)
    if not paths:
        return
    record["code_from"] = paths
    revisions = run.plan.revisions
    foreign = revisions and foreign_code(paths, spec.checkout, revisions, ctx.cache.root)
    if foreign:
        raise _not_passed(
            record,
            StageFailed(
                spec.stage.name,
                "is not comparable",
                status="not_comparable",
                detail=f"it ran in {spec.checkout} but imported the code under test from "
                f"{foreign[0]}, the other revision's checkout: install the code per revision "
                "(README 'Comparing two revisions')",
            ),
        )


class TrialNotPassed(Exception):
    """Carries a finished trial's record out of the item so it is published, then shown (a
    failure, or a skip for a trial the wall-clock budget cut short)."""

    def __init__(self, record: dict[str, Any], cause: BaseException):
        self.record = record
        self.cause = cause
        super().__init__(str(cause))


class _Interrupted(KeyboardInterrupt):
    """A KeyboardInterrupt that still carries the record of the trial it cut short."""

    def __init__(self, record: dict[str, Any]):
        super().__init__()
        self.record = record


def interrupted_record(exc: BaseException) -> dict[str, Any] | None:
    return exc.record if isinstance(exc, _Interrupted) else None


def _not_passed(record: dict[str, Any], exc: StageFailed) -> TrialNotPassed:
    record.update(status=exc.status, reason=redact.stage_text(str(exc)))
    return TrialNotPassed(record, exc)


@functools.lru_cache(maxsize=256)
def _uses_out(cmd: str, metrics_file: str | None) -> bool:
    """Whether a measure stage refers to ``{out}`` (its scratch folder is made only then)."""
    return "out" in names_in(cmd) or "out" in names_in(metrics_file or "")


def _ceiling(run: BenchRun, stage: Stage) -> float | None:
    """A stage's memory ceiling: its own ``mem_mb``, else the benchmark's ``resources.mem_mb``."""
    return stage.mem_mb or run.plan.config.resources.mem_mb


def _pin_gpus(
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


def _gpu_spend(run: BenchRun, result: StageRun) -> dict[str, Any]:
    """GPU-hours (wall time x pinned GPUs) and their cost, for stages that had GPUs."""
    if not result.gpus:
        return {}
    hours = gpu_hours(result.wall_s, len(result.gpus))
    return {
        "gpu_hours": hours,
        "cost_usd": cost_usd(hours, run.plan.config.resources.price_per_gpu_hour),
    }


def _trial_timeout(ctx: StageContext, run: BenchRun, stage: Stage) -> tuple[float | None, bool]:
    """A measure stage's timeout: its own, or the time left of ``budget.wall_clock_s`` where
    that ends first; and whether it is the budget's."""
    deadline = ctx.deadlines.get(run.run_id)
    if deadline is None:
        return stage.timeout_s, False
    left = max(deadline - time.monotonic(), 1e-3)
    if stage.timeout_s is not None and stage.timeout_s <= left:
        return stage.timeout_s, False
    return left, True


def _check_exit(result: StageRun, ctx: StageContext) -> None:
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


def _read_metrics(
    spec: TrialSpec, result: StageRun, values: dict[str, Any], exact: frozenset[str], home: Path
) -> dict[str, Value]:
    """The stage's declared metrics; the ``exact`` ones (``direction: equal``) as written. A
    metrics file is read only inside the stage's folders: its working folder, or the data
    ``home`` (its ``{out}`` and artifacts)."""
    source = spec.stage.metrics_from
    if source is None:  # gate 1: a measure stage without one declares its counters
        return {}
    fields = [f for f in source.fields if f not in BUILTIN_METRICS and f not in spec.stage.counters]
    if not fields:
        return {}
    if source.file:
        path = spec.cwd / render(source.file, values, quote=False)
        return read_metrics_file(path, fields, exact, (spec.cwd, home))
    return parse_metrics(result.stdout_lines(), fields, "stdout", exact)


def _stage_env(
    ctx: StageContext, extra: dict[str, str], values: dict[str, Any], checkout: Path
) -> dict[str, str]:
    """The stage's environment: the session's, ``$BENCH_CHECKOUT``, then its own ``env:``."""
    return {
        **ctx.base_env,
        CHECKOUT_ENV: str(checkout),
        **{key: render(text, values, quote=False) for key, text in extra.items()},
    }
