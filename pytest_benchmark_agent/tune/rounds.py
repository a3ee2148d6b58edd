"""Rounds: how the tuner runs one round of points, as ``pytest --bench`` sessions.

A round's points are the treatments of the synthetic variable ``point``, the incumbent first,
so every candidate is measured in the same interleaved blocks as the incumbent, with the same
caching, guards and records as any run. The tuner asks a :class:`RoundRunner` for each
session: :class:`SubprocessRounds` in a real tune, a simulation in the tests and benchmarks. A
round that needs more blocks than the file's replicates runs several sessions, pooled by
:func:`merged`.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pytest_benchmark_agent.engine.child import bench_command
from pytest_benchmark_agent.errors import BenchError
from pytest_benchmark_agent.records.record import RunRecord, load_run
from pytest_benchmark_agent.records.schema import PrepEvent, TrialRecord
from pytest_benchmark_agent.tune.space import Point
from pytest_benchmark_agent.util.fsutil import atomic_write

#: Seconds a round session gets to record its trials after SIGTERM before it is killed.
STOP_GRACE_S = 30.0


@dataclass(frozen=True)
class RoundRequest:
    """One round to run: its index, run id and points (the incumbent first)."""

    index: int
    run_id: str
    points: list[Point]
    timeout_s: float | None = None


@dataclass
class RoundOutcome:
    """What a round left: its run id and record (the :class:`.RunRecord` that
    :func:`.record.load_run` reads, every field checked; :func:`unrecorded` when the tune's
    wall-clock budget ran out before the session recorded anything), how long it took, and
    whether that budget cut it short."""

    run_id: str
    record: RunRecord
    wall_s: float
    timed_out: bool = False


class RoundRunner(Protocol):
    def __call__(self, request: RoundRequest) -> RoundOutcome: ...


class RoundError(BenchError):
    """A round session could not run the file at all (a collection or usage error)."""


class SubprocessRounds:
    """Runs each round as its own ``python -m pytest --bench`` session and reads its record."""

    def __init__(self, path: Path, home: Path, log_dir: Path, extra_args: Sequence[str] = ()):
        self.path = path.resolve()
        self.home = home
        self.log_dir = log_dir
        self.extra_args = list(extra_args)

    def command(self, run_id: str, round_file: Path) -> list[str]:
        options = ["--bench-round", str(round_file), "-p", "no:cacheprovider", "-p", "no:randomly"]
        options += ["-q", *self.extra_args]
        return bench_command([self.path], self.home, run_id=run_id, options=options)

    def _fresh(self, run_id: str) -> str:
        """``run_id``, or ``run_id-2``... when an earlier attempt of the round left its folder."""
        candidate, attempt = run_id, 1
        while (self.home / "runs" / candidate).exists():
            attempt += 1
            candidate = f"{run_id}-{attempt}"
        return candidate

    def __call__(self, request: RoundRequest) -> RoundOutcome:
        run_id = self._fresh(request.run_id)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        round_file = self.log_dir / f"{run_id}.json"
        atomic_write(round_file, json.dumps({"points": request.points}, indent=1))
        log_path = self.log_dir / f"{run_id}.log"
        t0 = time.monotonic()
        timed_out = False
        with log_path.open("w") as log:
            proc = subprocess.Popen(
                self.command(run_id, round_file),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            try:
                proc.wait(timeout=request.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _stop(proc)
            except BaseException:
                _stop(proc)
                raise
        wall_s = time.monotonic() - t0
        run_dir = self.home / "runs" / run_id
        recorded = (run_dir / "results.yaml").is_file()
        if timed_out and not recorded:
            return RoundOutcome(run_id, unrecorded(run_id), wall_s, timed_out)
        if not recorded:
            tail = "\n".join(log_path.read_text(errors="replace").rstrip().splitlines()[-25:])
            raise RoundError(
                f"round {request.index} ({run_id}) did not run: pytest exited "
                f"{proc.returncode} without a run record. Its output "
                f"({log_path}) ends:\n{tail}"
            )
        return RoundOutcome(run_id, load_run(run_dir), wall_s, timed_out)


def unrecorded(run_id: str) -> RunRecord:
    """The record of a round session stopped before it recorded anything (the budget ended
    before it began): no trials, no preps and no state, so the round reads as unfinished."""
    return RunRecord(run_id=run_id, name="", state="")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the session records what it ran), then SIGKILL after the grace period."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def merged(outcomes: Sequence[RoundOutcome], per_session: int) -> RoundOutcome:
    """One round's outcome from its sessions, in order: session k's blocks are numbered after
    the earlier sessions' (``per_session`` each), so the pooled blocks pair as one comparison,
    and every trial keeps the run id of its own session (``run_id`` among its other fields). The
    round is complete only when every session is; its record is the first session's with the
    pooled trials and preps."""
    trials: list[TrialRecord] = []
    preps: list[PrepEvent] = []
    state, stop_reason = "complete", None
    for k, outcome in enumerate(outcomes):
        record = outcome.record
        for trial in record.trials:
            trials.append(
                dataclasses.replace(
                    trial,
                    replicate=trial.replicate + k * per_session,
                    extra={**trial.extra, "run_id": outcome.run_id},
                )
            )
        preps += record.preps
        if state == "complete" and record.state != "complete":
            state, stop_reason = record.state, record.stop_reason
    first = outcomes[0]
    return RoundOutcome(
        first.run_id,
        first.record.replace(
            trials=trials,
            preps=preps,
            state=state,
            stop_reason=stop_reason if state != "complete" else first.record.stop_reason,
        ),
        sum(o.wall_s for o in outcomes),
        any(o.timed_out for o in outcomes),
    )
