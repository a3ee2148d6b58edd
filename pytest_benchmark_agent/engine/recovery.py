"""Runs whose session is gone: found by any later session or verb, and finalized ``interrupted``.

A run with no ``index.json`` whose every owner is gone (:func:`.records.recover.orphaned`) is
finished as its session would have finished it, through :func:`.finish.finish`: the trials of
its journal kept, the one in flight (as its last heartbeat names it) ``interrupted``, the rest
``not_run``, judged, and published through ``pytest_bench_run_finished``, so its report (with
What Went Wrong), ``index.json`` and ``results_index.md`` are written and every other plugin
sees it too. Inside a pytest session the session's own hook relay publishes it (its plugins
registered); outside one, :func:`.finish.standalone_hooks`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.engine.worktrees import sweep
from pytest_benchmark_agent.records.recover import orphaned
from pytest_benchmark_agent.util.fsutil import acquire_lock, release_lock, utc_now

_LOCK = ".recover.lock"


def recover_orphans(home: Path, *, by: str, hook: Any = None) -> list[str]:
    """Finalize every run in ``home`` whose owners are gone (``by``: who found it, for the
    record; ``hook``: the session's hook relay, None outside a session); returns their ids.
    One that cannot be finalized is skipped with a warning. Then the worktrees of sessions
    that are gone are removed (:func:`.worktrees.sweep`)."""
    runs = home / "runs"
    try:
        names = sorted(name for name in os.listdir(runs) if not name.startswith("."))
    except OSError:
        names = []
    finalized = [name for name in names if recover_run(runs / name, by=by, hook=hook)]
    sweep(home)
    return finalized


def recover_run(run_dir: Path, *, by: str, hook: Any = None) -> bool:
    """Finalize ``run_dir`` if its owners are gone; whether it was finalized here."""
    if not orphaned(run_dir):
        return False
    lock = acquire_lock(run_dir / _LOCK, wait=False)
    if lock is None:
        return False  # another process is finalizing it
    try:
        if not orphaned(run_dir):
            return False
        finalize(run_dir, by, hook)
        return True
    except Exception as exc:  # a corrupted record or a full disk: say so, never stop the caller
        print(
            f"benchmark-agent: run {run_dir.name} was left running by a session that is gone "
            f"and could not be finalized ({type(exc).__name__}: {exc}); its finished trials "
            f"stay in {run_dir / 'trials.jsonl'}",
            file=sys.stderr,
        )
        return False
    finally:
        release_lock(lock)
        with contextlib.suppress(OSError):
            (run_dir / _LOCK).unlink()


def finalize(run_dir: Path, by: str, hook: Any = None) -> None:
    """Finish an ownerless run as its session would have, ``interrupted``, publishing it
    through ``hook`` (None: :func:`.finish.standalone_hooks`)."""
    # The finisher, the judge and the plan load here only: every verb and session scans for
    # orphans first (``recover_orphans``), and a scan that finds none must stay cheap.
    from pytest_benchmark_agent.engine.finish import finish, standalone_hooks
    from pytest_benchmark_agent.engine.plan import build_plan
    from pytest_benchmark_agent.records.frozen import thaw
    from pytest_benchmark_agent.records.reader import load_results, load_yaml
    from pytest_benchmark_agent.records.record import record_of_files
    from pytest_benchmark_agent.records.run import BenchRun
    from pytest_benchmark_agent.report.progress import read_heartbeat

    # Typed as load_run types it, without its field check: a run an earlier version left may
    # hold what that check now refuses (a 1e308 sample), and finishing it recomputes the rest.
    previous = record_of_files(load_results(run_dir), load_yaml(run_dir / "config.yaml"), run_dir)
    config = previous.model
    if previous.source is None:
        raise ValueError(f"{run_dir / 'config.yaml'} names no benchmark file (source)")
    points = _points(previous.treatments) if config.search_space is not None else None
    run = BenchRun(
        plan=build_plan(config, Path(previous.source), points),
        home=run_dir.parent.parent,
        run_id=run_dir.name,
    )
    planned = {trial.id for trial in previous.planned}
    run.planned = [spec for spec in run.plan.trials if run.trial_id(spec) in planned]
    run.trials = [t for t in previous.trials if t.status != "not_run"]
    run.preps = thaw(previous.preps)
    run.caveats = list(previous.caveats)
    run.fingerprint = thaw(previous.fingerprint)
    run.started = previous.started or previous.ended or utc_now()
    beat = read_heartbeat(run_dir) or {}
    why = (
        f"the session that ran it (pid {beat.get('pid') or '?'}) ended without finishing it "
        "(killed or crashed)"
    )
    run.stop_reason = why
    run.caveats.append(f"finalized as interrupted by {by} at {utc_now()}: {why}")
    finish(
        run,
        why,
        hook if hook is not None else standalone_hooks(),
        interrupted=True,
        in_flight=beat.get("trial_id"),
        ended=beat.get("updated"),
    )


def _points(labels: tuple[str, ...]) -> list[dict[str, Any]]:
    """A tuning round's points, read back from its treatment labels (``a=1,b=2``)."""
    return [dict(pair.split("=", 1) for pair in str(label).split(",")) for label in labels]
