"""Finishing a run, one way: for a session's runs and for the runs recovery finds ownerless.

:func:`finish` records what did not run, decides the state, summarizes, asks the plugins for
caveats, judges, and publishes the run through ``pytest_bench_run_finished``: the engine's own
records and reports are written by hook implementations (``RecordWriter``, ``ReportWriter``),
so any other plugin sees every finished run, a recovered one included. Outside a pytest session
(a verb, the detached supervisor) :func:`standalone_hooks` gives a plugin manager holding the
hook specifications and the engine's two writers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_benchmark_agent.engine.untimed import BUDGET_STOP
from pytest_benchmark_agent.judge import gate2 as judge
from pytest_benchmark_agent.judge.sequential import sequential_outcome
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.records.run import BenchRun
from pytest_benchmark_agent.report.wrong import what_went_wrong
from pytest_benchmark_agent.util.fsutil import utc_now

if TYPE_CHECKING:
    from pytest_benchmark_agent.judge.baseline import Resolution


def finish(
    run: BenchRun,
    why: str | None,
    hook: Any,
    *,
    interrupted: bool = False,
    in_flight: str | None = None,
    ended: str | None = None,
    baseline: Resolution | None = None,
) -> RunRecord:
    """End ``run`` and publish it through ``hook`` (a pytest or pluggy hook relay).

    Each planned trial without a record is recorded ``not_run`` for ``why`` (default: the run's
    stop reason or sequential decision), the one named ``in_flight`` ``interrupted``. The state is
    ``interrupted`` when ``interrupted`` or a trial was cut short (not by a budget), ``halted``
    when a budget stopped it, else ``complete``. Returns the record the hooks saw.
    """
    sequential = sequential_outcome(run.record())
    run.decided = run.decided or (sequential.decided if sequential else None)
    why = why or run.stop_reason or run.decided or "the session ended before it ran"
    done = {t.id for t in run.trials}
    for spec in run.planned:
        trial_id = run.trial_id(spec)
        if trial_id in done:
            continue
        if trial_id == in_flight:
            run.trials.append(run.blank_trial(spec, "interrupted", f"{why} during this trial"))
        else:
            run.trials.append(run.blank_trial(spec, "not_run", why))
    cut_short = interrupted or any(
        t.status == "interrupted" and not str(t.reason or "").startswith(BUDGET_STOP)
        for t in run.trials
    )
    run.state = "interrupted" if cut_short else "halted" if run.stop_reason else "complete"
    run.ended = ended or utc_now()
    run.summarize()
    take_caveats(run, hook)
    run.judged(judge.judge_run(run.record(), sequential, baseline))
    run.what_went_wrong = what_went_wrong(run.record())
    record = run.record()
    hook.pytest_bench_run_finished(run=record)
    return record


def take_caveats(run: BenchRun, hook: Any) -> None:
    """Add what plugins return from ``pytest_bench_run_caveats``: the one way a hook adds
    to a run (its record is frozen), judged like the engine's own caveats."""
    for caveats in hook.pytest_bench_run_caveats(run=run.record()):
        run.caveats += [c for c in caveats or () if c not in run.caveats]


def standalone_hooks() -> Any:
    """The hook relay of a plugin manager outside pytest: the hook specifications, and the
    engine's record and report writers registered, as a session registers them."""
    import pluggy

    from pytest_benchmark_agent import hookspecs
    from pytest_benchmark_agent.records.writer import RecordWriter
    from pytest_benchmark_agent.report.markdown import ReportWriter

    manager = pluggy.PluginManager("pytest")
    manager.add_hookspecs(hookspecs)
    manager.register(RecordWriter(), "benchmark_agent_records")
    manager.register(ReportWriter(), "benchmark_agent_reports")
    return manager.hook
