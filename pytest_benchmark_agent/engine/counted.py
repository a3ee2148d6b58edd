"""The counted trials of one block, run at once (issue 44).

An instruction count does not depend on what else runs on the machine, so the trials of one
block (one replicate across every treatment: both revisions under ``--bench-against``) whose
every metric is counted run concurrently, as many at once as this process has CPUs. The
block's first such item measures them all (:meth:`CountedBatches.trial`) while it holds the
host's measure lock, so no timed trial, here or in another session, overlaps the batch; each
later item of the block publishes its own, already measured, outcome when pytest reaches it.
The records, the per-trial hooks (the stage's start, the trial's end) and the order of results
are those of one trial at a time; only the stages ran side by side, as their ``started`` and
``ended`` show.

A trial runs alone, as before, when any of its metrics is not a count (a stage without
``counters:``, one that also reports a field of its own, or a declared built-in metric the
backend leaves undistorted, as perf leaves ``peak_rss_mb``), when it has GPUs, warm-up rounds
still to run or output shown as it comes (``-s``), in an xdist worker (the controller picks
which trials of a block it gets), and under a subreaper's containment (a stage's end would stop
its neighbours' processes).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from pytest_benchmark_agent.config.metric import BUILTIN_METRICS
from pytest_benchmark_agent.engine.context import StageContext, ceiling
from pytest_benchmark_agent.engine.counters import backend
from pytest_benchmark_agent.engine.execute import Progress, TrialNotPassed, run_trial
from pytest_benchmark_agent.engine.plan import TrialSpec
from pytest_benchmark_agent.engine.preps import PrepOutcome
from pytest_benchmark_agent.records.run import BenchRun
from pytest_benchmark_agent.records.schema import TrialRecord

if TYPE_CHECKING:
    from pytest_benchmark_agent.engine.collect import BenchItem

#: A measured trial's outcome: returns its record, or raises what ``run_trial`` raised.
Outcome = Callable[[], TrialRecord]


def cpus() -> int:
    """The CPUs this process may run on (its affinity), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def counted_only(spec: TrialSpec, run: BenchRun, ctx: StageContext) -> bool:
    """Whether ``spec``'s trial may run beside others: every metric it reports is counted, and
    nothing it does needs the machine alone (see the module's docstring)."""
    stage = spec.stage
    if not stage.counters or ctx.echo is not None:
        return False
    fields = stage.metrics_from.fields if stage.metrics_from else []
    if any(f not in BUILTIN_METRICS and f not in stage.counters for f in fields):
        return False  # a field the stage reports itself may be a time
    found = backend()
    judged = [m for m in run.plan.config.metrics if m in BUILTIN_METRICS]
    if found is None or any(m not in found.distorts for m in judged):
        return False  # a built-in the backend leaves a metric (perf: peak_rss_mb) is no count
    resources = run.plan.config.resources
    if stage.gpus if stage.gpus is not None else resources.gpus:
        return False
    rounds = stage.warmup if stage.warmup is not None else ctx.warmup
    warmed = (run.run_id, stage.name, spec.treatment_label, spec.seed) in ctx.warmed
    return rounds <= 0 or warmed


class CountedBatches:
    """Runs each block's counted trials at once; holds their outcomes until their items run."""

    def __init__(self, ctx: StageContext, *, worker: bool):
        self._ctx = ctx
        self._enabled = not worker
        self._done: dict[str, Outcome] = {}  # item node id -> its measured outcome
        self._blocks: dict[tuple[str, int], list[BenchItem]] | None = None

    def trial(self, item: BenchItem, preps: list[PrepOutcome]) -> TrialRecord:
        """``item``'s trial record (raising as ``run_trial`` does): measured already in its
        block's batch, measured now with the rest of its block, or measured alone."""
        outcome = self._done.pop(item.nodeid, None)
        if outcome is not None:
            return self._replay(item, outcome)
        batch = self._batch(item)
        if len(batch) < 2:
            return run_trial(item.run, self._ctx, item.spec, preps)
        return self._run_batch(item, preps, batch)

    def _batch(self, item: BenchItem) -> list[BenchItem]:
        """The block's counted items from ``item`` on, within ``budget.trials``."""
        run, ctx = item.run, self._ctx
        if not (self._enabled and cpus() > 1) or run.stop_reason or run.decided:
            return [item]
        if not counted_only(item.spec, run, ctx) or not ctx.containment.allows_overlap():
            return [item]
        if self._blocks is None:
            self._blocks = _blocks(item.session.items)
        block = self._blocks.get((run.run_id, item.spec.replicate), [])
        later = block[block.index(item) :] if item in block else [item]
        batch = [m for m in later if m.nodeid not in self._done]
        batch = [m for m in batch if counted_only(m.spec, run, ctx)]
        left = run.plan.config.budget.trials
        if left is not None:
            batch = batch[: max(left - len(run.trials), 1)]
        return batch

    def _run_batch(
        self, item: BenchItem, preps: list[PrepOutcome], batch: list[BenchItem]
    ) -> TrialRecord:
        """Measure ``batch`` at once; keep the others' outcomes, return ``item``'s."""
        run, ctx = item.run, self._ctx
        jobs = [(item, preps)]
        jobs += [(m, p) for m in batch[1:] if (p := _preps_of(m, item)) is not None]
        seen: dict[str, tuple[float, float]] = {}
        cancel = threading.Event()
        own = ctx.announce(run, item.spec.stage.name, run.trial_id(item.spec))
        futures: dict[str, Future[TrialRecord]] = {}
        with (
            ctx.isolation.stage("measure"),
            ThreadPoolExecutor(
                _workers(run, item.spec, len(jobs)), thread_name_prefix="counted-trial"
            ) as pool,
        ):
            try:  # from the first submit: Ctrl-C may come while the batch is still starting
                for member, needed in jobs:
                    progress = _reporter(member.nodeid, seen, cancel)
                    futures[member.nodeid] = pool.submit(
                        run_trial, run, ctx, member.spec, needed, progress
                    )
                while wait(futures.values(), timeout=ctx.progress_every_s).not_done:
                    if not futures[item.nodeid].done() and item.nodeid in seen:
                        own(*seen[item.nodeid])
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: every stage stops at its next tick
                cancel.set()
                pool.shutdown(wait=True, cancel_futures=True)
        for member, _ in jobs[1:]:
            self._done[member.nodeid] = _outcome(futures.get(member.nodeid))
        return _outcome(futures.get(item.nodeid))()

    def _replay(self, item: BenchItem, outcome: Outcome) -> TrialRecord:
        """Publish the stage's start of a trial measured in its block's batch (as it would have
        been, had it run now), then return its record or raise what stopped it."""
        try:
            record = outcome()
        except (TrialNotPassed, KeyboardInterrupt) as exc:
            self._started(item, getattr(exc, "record", None))
            raise
        self._started(item, record)
        return record

    def _started(self, item: BenchItem, record: TrialRecord | None) -> None:
        if record is not None and record.started:  # its stage ran
            self._ctx.hook.pytest_bench_stage_started(
                run=item.run.record(), stage=item.spec.stage.name, trial_id=record.id
            )


def _blocks(items: list[Any]) -> dict[tuple[str, int], list[BenchItem]]:
    """The session's trial items by run and block, in the order they run."""
    from pytest_benchmark_agent.engine.collect import BenchItem

    blocks: dict[tuple[str, int], list[BenchItem]] = {}
    for item in items:
        if isinstance(item, BenchItem):
            blocks.setdefault((item.run.run_id, item.spec.replicate), []).append(item)
    return blocks


def _preps_of(member: BenchItem, first: BenchItem) -> list[PrepOutcome] | None:
    """``member``'s prep outcomes, built or reused now through ``first``'s fixture request
    (they are session fixtures); None where one could not be had (it then runs alone)."""
    request = first._request  # pytest's item request: no public API reaches another's fixture
    try:
        return [request.getfixturevalue(n.fixture_name) for n in member.spec.needs]
    except Exception:  # its own setup meets the same problem and reports it
        return None


def _workers(run: BenchRun, spec: TrialSpec, jobs: int) -> int:
    """Trials at once: one per CPU, and no more than the memory available holds where the
    stage declares its memory ceiling."""
    workers = min(jobs, cpus())
    mem_mb = ceiling(run, spec.stage)
    if mem_mb:
        import psutil  # only a batch with a memory ceiling asks (a session imports it lazily)

        fits = int(psutil.virtual_memory().available / (1024 * 1024) // mem_mb)
        workers = min(workers, max(fits, 1))
    return workers


def _reporter(key: str, seen: dict[str, tuple[float, float]], cancel: threading.Event) -> Progress:
    """A batch trial's progress callback: keeps its latest progress for the batch to publish,
    and stops its stage (raising KeyboardInterrupt in its thread) once the batch is cancelled."""

    def progress(elapsed_s: float, peak_rss_mb: float) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt("the session was interrupted")
        seen[key] = (elapsed_s, peak_rss_mb)

    return progress


def _outcome(future: Future[TrialRecord] | None) -> Outcome:
    """A batch trial's outcome: its future's result, or, where the session was interrupted
    before it was submitted or started, :func:`_interrupt`."""
    return _interrupt if future is None or future.cancelled() else future.result


def _interrupt() -> TrialRecord:
    """The outcome of a batch trial that never started: the session was interrupted."""
    raise KeyboardInterrupt
