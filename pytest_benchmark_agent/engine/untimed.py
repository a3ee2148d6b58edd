"""What a trial runs outside its timing: its ``setup:`` command and its configuration's warm-up.

A measure stage's ``setup:`` (hyperfine's ``--prepare``: reset a table, drop a cache) runs
before every trial and every warm-up round as its own stage, so none of its time or memory is in
the trial's metrics; its failure fails the trial, naming the setup. ``warmup: N`` (or
``--bench-warmup N``) runs the measured command N times, untimed, before a configuration's first
trial in this process: the first run of a session (cold caches, first imports, a page cache not
yet filled) is never a sample. Each round is published as a ``warmup`` record (FORMAT.md), kept
apart from the trials, so no verdict, summary or count reads it.

Both keep to ``budget.wall_clock_s``: each round and setup is given the time the budget has left
(a :data:`Limit` asked afresh each time), a round cut short by it is the last, none starts once
it is spent, and a setup it stops interrupts the trial (:class:`BudgetSpent`), as a measured
stage it stops does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_benchmark_agent.engine.invocation import StageInvocation
from pytest_benchmark_agent.engine.plan import TrialSpec
from pytest_benchmark_agent.engine.stages import StageRun, run_stage
from pytest_benchmark_agent.engine.trial import TrialBuilder
from pytest_benchmark_agent.errors import StageFailed
from pytest_benchmark_agent.records.frozen import freeze
from pytest_benchmark_agent.util.fsutil import utc_now
from pytest_benchmark_agent.util.placeholders import render

if TYPE_CHECKING:
    from pytest_benchmark_agent.engine.context import StageContext
    from pytest_benchmark_agent.records.run import BenchRun

#: The reason of a trial (or a warm-up round) that ``budget.wall_clock_s`` stopped.
BUDGET_STOP = "stopped at the deadline of budget.wall_clock_s"
#: The shortest timeout a stage is given (a timeout of 0 is none): at it the budget is spent.
SPENT_S = 1e-3
#: A stage's timeout now, and whether it is the time ``budget.wall_clock_s`` has left.
Limit = Callable[[], tuple[float | None, bool]]


class BudgetSpent(Exception):
    """``budget.wall_clock_s`` ran out before or during a trial's setup: the trial is
    interrupted by the budget (its message says when), not failed."""


def spent(limit: Limit) -> bool:
    """Whether the budget behind ``limit`` has no time left to start a stage."""
    timeout_s, by_budget = limit()
    return by_budget and timeout_s is not None and timeout_s <= SPENT_S


def _untimed(
    ctx: StageContext, call: StageInvocation, stage: str, command: str, log_dir: Path
) -> StageInvocation:
    """``command`` run as the stage ``stage`` of the trial whose measure stage is ``call``: in
    its folder and environment (GPUs pinned), its output under ``log_dir``, but with none of
    its guards' ceilings, counting, echo or progress: what a setup and a warm-up round have in
    common (neither is a trial)."""
    return ctx.invocation(stage, command, call.cwd, call.env, log_dir)


def before_measure(
    run: BenchRun,
    ctx: StageContext,
    spec: TrialSpec,
    trial: TrialBuilder,
    values: Mapping[str, Any],
    call: StageInvocation,
    limit: Limit,
) -> tuple[float | None, bool]:
    """A trial's untimed part before its measure stage ``call``: its configuration's warm-up
    rounds, then its setup (recorded on ``trial``); returns the measure stage's
    timeout and whether it is the budget's. Raises :class:`BudgetSpent` when the budget leaves
    no time for the measure stage."""
    warm_up(run, ctx, spec, trial.id, call, values, limit)
    trial.setup = run_setup(ctx, spec, values, call, limit)
    if spent(limit):
        raise BudgetSpent("before its measure stage")
    return limit()


def run_setup(
    ctx: StageContext,
    spec: TrialSpec,
    values: Mapping[str, Any],
    call: StageInvocation,
    limit: Limit,
) -> dict[str, Any] | None:
    """Run the stage's ``setup:`` (every substituted value quoted) before ``call`` (a measure
    stage or a warm-up round), its output under ``setup`` of ``call``'s folder, and return its
    record (command, exit code, wall and CPU time); None without one. A setup that fails raises
    :class:`StageFailed` naming it, with its stderr; one the budget leaves no time for, or
    stops, :class:`BudgetSpent`."""
    template = spec.stage.setup
    if template is None:
        return None
    if spent(limit):
        raise BudgetSpent("before its setup: command")
    command = render(template, values)
    timeout_s, by_budget = limit()
    setup = _untimed(ctx, call, f"{spec.stage.name} setup", command, call.log_dir / "setup")
    result = run_stage(replace(setup, timeout_s=timeout_s))
    if by_budget and result.timed_out:
        raise BudgetSpent("during its setup: command")
    record = _timing(result)
    what = _failure(result)
    if what:
        raise StageFailed(
            spec.stage.name,
            f"could not run: its setup: command {what}",
            detail=f"setup: {command}\nstderr (last lines):\n{result.stderr_tail()}",
        )
    return record


def warm_up(
    run: BenchRun,
    ctx: StageContext,
    spec: TrialSpec,
    trial_id: str,
    call: StageInvocation,
    values: Mapping[str, Any],
    limit: Limit,
) -> None:
    """Run the configuration's untimed rounds of the measure stage ``call`` once per process,
    before its first trial.

    A round that fails is recorded as failed and the trial still runs: its own record says
    whether the command works; the warm-up only keeps the first sample from being cold. The
    rounds end where ``budget.wall_clock_s`` does: a round it cuts short is the last.
    """
    rounds = spec.stage.warmup if spec.stage.warmup is not None else ctx.warmup
    key = (run.run_id, spec.stage.name, spec.treatment_label, spec.seed)
    if rounds <= 0 or key in ctx.warmed:
        return
    ctx.warmed.add(key)
    folder = call.log_dir
    for number in range(rounds):
        if spent(limit):
            return
        round_dir = folder.parent / f"{folder.name}-warmup{number}"
        record: dict[str, Any] = {
            "kind": "warmup",
            "id": f"{trial_id}-warmup{number}",
            "treatment": spec.treatment_label,
            "stage": spec.stage.name,
            "seed": spec.seed,
            "round": number,
            "command": call.command,
        }
        round_call = _untimed(ctx, call, spec.stage.name, call.command, round_dir)
        going_on = _round(ctx, spec, values, round_call, limit, record)
        _publish(run, ctx, record)
        if not going_on:
            return


def _round(
    ctx: StageContext,
    spec: TrialSpec,
    values: Mapping[str, Any],
    call: StageInvocation,
    limit: Limit,
    record: dict[str, Any],
) -> bool:
    """One warm-up round ``call`` (its setup, then the command), its outcome put on ``record``;
    False when ``budget.wall_clock_s`` stopped it, so no further round starts."""
    try:
        setup = run_setup(ctx, spec, values, call, limit)
        if setup is not None:
            record["setup"] = setup
        timeout_s, by_budget = limit()
        result = run_stage(replace(call, timeout_s=timeout_s))
    except StageFailed as exc:
        record.update(status="failed", reason=str(exc), ended=utc_now())
        return True
    except BudgetSpent as exc:
        record.update(status="failed", reason=f"{BUDGET_STOP} {exc}", ended=utc_now())
        return False
    record.update(_timing(result))
    if by_budget and result.timed_out:
        record.update(status="failed", reason=f"{BUDGET_STOP} (the round was cut short)")
        return False
    why = _failure(result)
    record["status"] = "failed" if why else "passed"
    if why:
        record["reason"] = f"the warm-up round {why}"
    return True


def _failure(result: StageRun) -> str | None:
    """How an untimed stage failed (``timed out``, ``exited with code 3``, its output not
    kept on a full disk), or None."""
    errors = result.output_errors()
    if errors:
        return f"could not keep its output: {errors[0].filename}: {errors[0].strerror}"
    if result.timed_out:
        return "timed out"
    if result.guard_events:
        return f"was stopped by the {result.guard_events[0]['kind']} guard"
    if result.exit_code != 0:
        return f"exited with code {result.exit_code}"
    return None


def _timing(result: StageRun) -> dict[str, Any]:
    """What an untimed stage's record keeps: enough to see it ran, and how long it took."""
    return {
        "command": result.command,
        "exit_code": result.exit_code,
        "wall_s": round(result.wall_s, 6),
        "cpu_s": round(result.cpu_s, 6),
        "started": result.started,
        "ended": result.ended,
    }


def _publish(run: BenchRun, ctx: StageContext, record: dict[str, Any]) -> None:
    run.warmups.append(record)
    ctx.hook.pytest_bench_warmup_finished(warmup=freeze(record), run=run.record())
