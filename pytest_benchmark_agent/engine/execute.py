"""Executing the plan: running one trial's measure stage (preps are :mod:`.preps`).

``run_trial`` is what a trial item does: it turns every way a stage can go wrong into a
recorded outcome with a readable reason. It returns a passed trial's record and carries any
other out on an exception (:class:`TrialNotPassed`, or a KeyboardInterrupt holding the trial
it cut short); the item (:mod:`.collect`) hands each one to the session
(``BenchSession.finish_trial``), which publishes it through the ``pytest_bench_trial_finished``
hook at once, so its samples are on disk before the next trial starts.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_benchmark_agent.config.metric import BUILTIN_METRICS, exact_metrics
from pytest_benchmark_agent.config.stage import Stage
from pytest_benchmark_agent.engine import untimed
from pytest_benchmark_agent.engine.context import (
    StageContext,
    check_exit,
    gpu_spend,
    guarded,
    merged,
    stage_env,
)
from pytest_benchmark_agent.engine.invocation import StageInvocation
from pytest_benchmark_agent.engine.isolation import host_id
from pytest_benchmark_agent.engine.metrics import (
    Value,
    effective_mismatches,
    parse_code_from,
    parse_effective,
    parse_metrics,
    read_metrics_file,
)
from pytest_benchmark_agent.engine.plan import TrialSpec
from pytest_benchmark_agent.engine.preps import PrepOutcome
from pytest_benchmark_agent.engine.revisions import foreign_code
from pytest_benchmark_agent.engine.stages import StageRun, run_stage
from pytest_benchmark_agent.engine.trial import TrialBuilder
from pytest_benchmark_agent.errors import MetricError, StageFailed
from pytest_benchmark_agent.guards.gpu import (
    GpuUnavailable,
)
from pytest_benchmark_agent.records.run import BenchRun
from pytest_benchmark_agent.records.schema import TrialRecord
from pytest_benchmark_agent.util import redact
from pytest_benchmark_agent.util.fsutil import utc_now
from pytest_benchmark_agent.util.placeholders import names_in, render

#: A stage's progress callback: ``(elapsed_s, peak_rss_mb)``.
Progress = Callable[[float, float], None]
#: The reason of a trial that Ctrl-C (or SIGTERM) cut short.
INTERRUPTED = "the session was interrupted during this trial"


def run_trial(
    run: BenchRun,
    ctx: StageContext,
    spec: TrialSpec,
    preps: list[PrepOutcome],
    progress: Progress | None = None,
) -> TrialRecord:
    """Run the measure stage of one trial and return its record (not yet published).

    ``progress`` marks a trial of a counted batch (:mod:`.counted`): the batch holds the host
    lock and publishes the stage's start and progress, so the trial only reports to it.

    Raises :class:`TrialNotPassed` (its ``record`` built, its ``cause`` the StageFailed) when
    the trial did not pass, so pytest shows it as a failure with the stage's reason, and a
    KeyboardInterrupt carrying the record (:func:`interrupted_record`) when it was cut short.
    """
    trial = TrialBuilder(run.blank_trial(spec, "passed"), host=host_id())
    _check_preps(trial, preps)
    folder = run.trial_dir(spec)
    scratch = folder / "out"
    uses_out = _uses_out(
        spec.stage.cmd or "", spec.stage.metrics_from and spec.stage.metrics_from.file
    )
    artifacts, upstream_effective = merged(preps)
    checkout = spec.checkout or spec.cwd
    values = {
        "checkout": checkout,  # a param of that name wins
        **spec.params,
        "seed": spec.seed,
        "out": scratch,
        **artifacts,
    }
    trial.command, trial.logs = render(spec.stage.cmd or "", values), str(folder)
    if uses_out:  # else nothing is made unless output comes
        _trial_write(ctx, spec, trial, lambda: scratch.mkdir(parents=True, exist_ok=True))
    env = stage_env(ctx, spec.stage.env, values, checkout)
    call = ctx.invocation(spec.stage.name, trial.command, spec.cwd, env, folder)
    result, by_budget = _measure(run, ctx, spec, trial, values, call, progress)
    _take_metrics(run, ctx, spec, trial, result, values, by_budget)
    trial.effective = {
        **upstream_effective,
        **parse_effective(result.stdout_lines(), scratch if uses_out else None),
    }
    _check_code_from(run, ctx, spec, trial, result.stdout_lines())
    mismatches = effective_mismatches(spec.params, trial.effective)
    if mismatches:
        raise _not_passed(
            trial,
            StageFailed(
                spec.stage.name,
                "is not comparable",
                status="not_comparable",
                detail="effective params differ from declared: " + "; ".join(mismatches),
            ),
        )
    return trial.freeze()


def _check_preps(trial: TrialBuilder, preps: list[PrepOutcome]) -> None:
    """A trial whose prep failed does not run: it fails with the prep's reason (its output
    shown in full under the first such trial only)."""
    failed = next((p for p in preps if p.error), None)
    if failed is None:
        return
    detail = failed.error or ""
    if failed.shown_in is None:
        failed.shown_in = trial.id
    else:  # its output once, not once per trial
        first = detail.splitlines()[0] if detail else ""
        detail = f"{first} (its output is shown once, under {failed.shown_in})"
    raise _not_passed(trial, StageFailed(failed.node.stage.name, "(a prep) failed", detail=detail))


def _trial_write(
    ctx: StageContext, spec: TrialSpec, trial: TrialBuilder, write: Callable[[], Any]
) -> Any:
    """``write()``; an OSError fails the trial, naming what could not be written."""
    try:
        return write()
    except OSError as exc:  # its folder, logs or heartbeat could not be written
        reason = ctx.write_failed("the trial could not write its records", exc)
        raise _not_passed(
            trial, StageFailed(spec.stage.name, "could not run", detail=reason)
        ) from None


def _measure(
    run: BenchRun,
    ctx: StageContext,
    spec: TrialSpec,
    trial: TrialBuilder,
    values: dict[str, Any],
    call: StageInvocation,
    progress: Progress | None = None,
) -> tuple[StageRun, bool]:
    """The trial's warm-up rounds, setup and measure stage ``call``, alone on the host (but for
    its counted batch: ``progress``) with its GPUs pinned, and whether the measure stage's
    timeout was the budget's; a failed setup or GPU request fails the trial, a budget spent
    before the measure stage or Ctrl-C interrupts it."""
    limit = functools.partial(_trial_timeout, ctx, run, spec.stage)
    try:
        call = guarded(run, ctx, call, spec.stage, trial.id)
    except GpuUnavailable as exc:
        raise _not_passed(
            trial, StageFailed(spec.stage.name, "could not get its GPUs", detail=str(exc))
        ) from None
    call = replace(
        call,
        counters=spec.stage.counters,
        block=spec.replicate,
        hash_seed_base=run.hash_seed_base,
    )

    def measured() -> tuple[StageRun, bool]:
        batch = progress is not None  # the batch holds the host lock and publishes the start
        with contextlib.nullcontext() if batch else ctx.isolation.stage("measure"):
            timeout_s, budget = untimed.before_measure(run, ctx, spec, trial, values, call, limit)
            shown = progress or ctx.announce(run, spec.stage.name, trial.id)
            return run_stage(replace(call, timeout_s=timeout_s, progress=shown)), budget

    try:
        return _trial_write(ctx, spec, trial, measured)
    except KeyboardInterrupt:
        trial.end("interrupted", INTERRUPTED, utc_now())
        raise _Interrupted(trial.freeze()) from None
    except StageFailed as exc:  # its setup: failed
        raise _not_passed(trial, exc) from None
    except untimed.BudgetSpent as exc:
        raise _budget_stopped(trial, str(exc)) from None


def _take_metrics(
    run: BenchRun,
    ctx: StageContext,
    spec: TrialSpec,
    trial: TrialBuilder,
    result: StageRun,
    values: dict[str, Any],
    by_budget: bool,
) -> None:
    """Put the stage's outcome and metrics on the trial: the built-ins (less those a counting
    backend distorted: no verdict uses them), its counts and its reported metrics; a failed
    exit or bad metrics fail the trial, a trial the budget cut short is interrupted."""
    trial.result, trial.spend = result, gpu_spend(run, result)
    measured = result.as_record()
    trial.metrics = {
        name: measured[name] for name in BUILTIN_METRICS if name not in result.distorted
    }
    if by_budget and result.timed_out:
        raise _budget_stopped(trial, "(the trial was cut short)")
    try:
        check_exit(result, ctx)
        trial.metrics.update(result.counts_or_error())
        trial.metrics.update(
            _read_metrics(spec, result, values, exact_metrics(run.plan.config.metrics), run.home)
        )
    except (StageFailed, MetricError) as exc:
        cause = (
            exc
            if isinstance(exc, StageFailed)
            else StageFailed(spec.stage.name, "reported bad metrics", detail=str(exc))
        )
        raise _not_passed(trial, cause) from None


def _check_code_from(
    run: BenchRun, ctx: StageContext, spec: TrialSpec, trial: TrialBuilder, stdout: Any
) -> None:
    """Record where the stage said it imported the code under test from (``BENCH_CODE_FROM``);
    under ``--bench-against`` a trial that imported the other revision's code is not
    comparable: it did not measure its own revision."""
    paths = parse_code_from(stdout)
    if not paths:
        return
    trial.code_from = list(paths)
    revisions = run.plan.revisions
    foreign = revisions and foreign_code(paths, spec.checkout, revisions, ctx.cache.root)
    if foreign:
        raise _not_passed(
            trial,
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

    def __init__(self, record: TrialRecord, cause: BaseException):
        self.record = record
        self.cause = cause
        super().__init__(str(cause))


class _Interrupted(KeyboardInterrupt):
    """A KeyboardInterrupt that still carries the record of the trial it cut short."""

    def __init__(self, record: TrialRecord):
        super().__init__()
        self.record = record


def interrupted_record(exc: BaseException) -> TrialRecord | None:
    return exc.record if isinstance(exc, _Interrupted) else None


def _budget_stopped(trial: TrialBuilder, when: str) -> TrialNotPassed:
    """The trial ``budget.wall_clock_s`` stopped (``when``: before or during which part):
    interrupted by the budget, shown as a skip."""
    reason = f"{untimed.BUDGET_STOP} {when}"
    trial.end("interrupted", reason, utc_now())
    return TrialNotPassed(trial.freeze(), pytest.skip.Exception(reason))


def _not_passed(trial: TrialBuilder, exc: StageFailed) -> TrialNotPassed:
    """The trial failed (or is not comparable) for ``exc``: its record, frozen, carried out."""
    trial.end(exc.status, redact.stage_text(str(exc)))
    return TrialNotPassed(trial.freeze(), exc)


@functools.lru_cache(maxsize=256)
def _uses_out(cmd: str, metrics_file: str | None) -> bool:
    """Whether a measure stage refers to ``{out}`` (its scratch folder is made only then)."""
    return "out" in names_in(cmd) or "out" in names_in(metrics_file or "")


def _trial_timeout(ctx: StageContext, run: BenchRun, stage: Stage) -> tuple[float | None, bool]:
    """A measure stage's timeout: its own, or the time left of ``budget.wall_clock_s`` where
    that ends first; and whether it is the budget's."""
    deadline = ctx.deadlines.get(run.run_id)
    if deadline is None:
        return stage.timeout_s, False
    left = max(deadline - time.monotonic(), untimed.SPENT_S)
    if stage.timeout_s is not None and stage.timeout_s <= left:
        return stage.timeout_s, False
    return left, True


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
