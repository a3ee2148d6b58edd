"""Detached runs: a pytest session that outlives the shell, terminal or agent that started it.

``start`` launches ``python -m pytest_benchmark_agent.engine.detach RUN_DIR -- PYTEST_COMMAND``,
which forks once more: the grandchild calls ``setsid`` (its own session and process group, no
controlling terminal, so neither a hang-up nor the death of the starting shell reaches it),
writes ``session.pid`` and becomes the *supervisor*; the launcher returns as soon as that file
exists. The supervisor runs the pytest session as its child with all output in
``session.log``, forwards SIGTERM/SIGINT to it (the engine then stops the running stage and
records the rest as ``not_run``), and when pytest exits leaves a marker: ``.complete`` (exit
code 0), or ``.failed`` with the reason (a failed trial, a gate error, an interruption, or
pytest killed by a signal, with the tail of the log; a killed session's run is then finalized
``interrupted`` at once, :mod:`.engine.recovery`). The samples already taken stay in
``trials.jsonl`` whatever happens.

``run_status`` is what ``benchmark-agent status`` prints: a marker when there is one; else
whether the supervisor or the pytest process named by the heartbeat is still alive (a pid is
only believed for a process created before its pid was written down, so a reused pid never
passes for the run); else the record's final state; else the run *died*.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from pytest_benchmark_agent.engine import recovery
from pytest_benchmark_agent.records.record import RunRecord, load_run
from pytest_benchmark_agent.report.progress import duration, read_heartbeat
from pytest_benchmark_agent.util.fsutil import atomic_write

PID_FILE = "session.pid"
LOG_FILE = "session.log"
COMPLETE = ".complete"
FAILED = ".failed"
FINAL_STATES = ("complete", "halted", "interrupted", "failed")
_LOG_TAIL_LINES = 15
_EXIT_MEANING = {
    1: "a trial failed, a guard fired or a regression gate tripped",
    2: "a configuration or fairness error, or an interruption",
    3: "an internal error",
    4: "a usage error",
    5: "no trials were collected",
}


def start(run_dir: Path, command: list[str], cwd: Path) -> int:
    """Start ``command`` detached with ``run_dir`` as its folder; returns the supervisor's pid."""
    run_dir.mkdir(parents=True, exist_ok=True)
    log_path = run_dir / LOG_FILE
    with log_path.open("ab") as log:
        launcher = subprocess.run(
            [sys.executable, "-m", __name__, str(run_dir), "--", *command],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
    pid = read_pid(run_dir)
    if launcher.returncode != 0 or pid is None:
        raise SystemExit(
            f"benchmark-agent: the detached session did not start (launcher exit "
            f"code {launcher.returncode}); see {log_path}"
        )
    return pid


def read_pid(run_dir: Path) -> int | None:
    try:
        return int((run_dir / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def _main(argv: list[str]) -> int:
    """The launcher's child: fork the supervisor off and return once its pid file exists."""
    run_dir, command = Path(argv[0]), argv[2:]
    ready_read, ready_write = os.pipe()
    if os.fork():
        os.close(ready_write)
        return 0 if os.read(ready_read, 1) == b"1" else 1
    os.close(ready_read)
    os.setsid()
    atomic_write(run_dir / PID_FILE, f"{os.getpid()}\n")
    os.write(ready_write, b"1")
    os.close(ready_write)
    try:
        supervise(run_dir, command)
    except BaseException as exc:  # the supervisor itself broke: say so where status looks
        traceback.print_exc()
        atomic_write(run_dir / FAILED, f"the detached supervisor crashed: {exc!r}\n")
    finally:
        os._exit(0)  # never return into the launcher's code path: this process is the supervisor


def supervise(run_dir: Path, command: list[str]) -> None:
    """Run the pytest session to its end and leave ``.complete`` or ``.failed``."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    children: list[subprocess.Popen[bytes]] = []
    pending: list[int] = []

    def forward(signum: int, frame: Any) -> None:
        if children:
            children[0].send_signal(signum)
        else:
            pending.append(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    try:
        # Its own session: a signal to the supervisor's group reaches pytest once, forwarded.
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    except OSError as exc:
        atomic_write(run_dir / FAILED, f"the pytest session could not be started: {exc}\n")
        return
    children.append(proc)
    for signum in pending:
        proc.send_signal(signum)
    conclude(run_dir, proc.wait())


def conclude(run_dir: Path, returncode: int) -> None:
    """Write the marker for a session that exited with ``returncode``."""
    record = _record(run_dir)
    trials = record.trials if record is not None else ()
    recorded = sum(1 for t in trials if t.status != "not_run")
    state = record.state if record is not None else None
    if returncode == 0:
        atomic_write(
            run_dir / COMPLETE,
            f"{state or 'complete'}: {recorded} trial(s) recorded, pytest exit code 0\n",
        )
        return
    if returncode < 0:
        finalized = recovery.recover_run(run_dir, by="the detached supervisor")
        reason = (
            f"pytest was killed by {signal.Signals(-returncode).name} before the run ended; "
            f"{recorded} trial(s) recorded, kept in trials.jsonl"
            + ("; the run was finalized as interrupted" if finalized else "")
        )
    elif state == "interrupted":
        reason = (
            f"the run was interrupted (SIGTERM or Ctrl-C); {recorded} trial(s) recorded, "
            "the rest not_run"
        )
    elif record is None:
        reason = (
            f"pytest exited with code {returncode} before the run started "
            f"({_EXIT_MEANING.get(returncode, 'see the log')})"
        )
    else:
        bad = [t for t in trials if t.status not in ("passed", "not_run")]
        listed = "; ".join(f"{t.id} {t.status}: {_first_line(t.reason)}" for t in bad[:3]) + (
            "; ..." if len(bad) > 3 else ""
        )
        reason = (
            f"{len(bad)} of {recorded} trial(s) did not pass: {listed}"
            if bad
            else f"pytest exited with code {returncode} "
            f"({_EXIT_MEANING.get(returncode, 'see the log')}) after the run ended {state}"
        )
    atomic_write(run_dir / FAILED, f"{reason}\n\nsession.log (last lines):\n{_log_tail(run_dir)}\n")


def _record(run_dir: Path) -> RunRecord | None:
    """The run's record, None before its session wrote one."""
    return load_run(run_dir) if (run_dir / "results.yaml").is_file() else None


def _first_line(text: Any) -> str:
    return str(text or "").strip().splitlines()[0] if str(text or "").strip() else "no reason"


def _log_tail(run_dir: Path) -> str:
    try:
        lines = (run_dir / LOG_FILE).read_text(errors="replace").rstrip().splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-_LOG_TAIL_LINES:]) or "(empty)"


# -- reading a run's state ------------------------------------------------------------------------


def process_alive(pid: int | None, born_by: float | None) -> bool:
    """Whether ``pid`` is a live process created no later than ``born_by`` (a UNIX time).

    A zombie is dead; a process created after ``born_by`` holds a reused pid, not ours.
    """
    if not pid or born_by is None:
        return False
    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE and process.create_time() <= born_by + 1.0
    except psutil.Error:
        return False


@dataclass(frozen=True)
class RunStatus:
    """One line about a run; ``word`` is its first word after the run id (see ``line``)."""

    run_id: str
    word: str  # starting | running | complete | halted | interrupted | failed | died
    detail: str

    @property
    def line(self) -> str:
        return f"{self.run_id}: {self.word}{self.detail}"

    @property
    def ok(self) -> bool:
        return self.word not in ("interrupted", "failed", "died")


def run_status(run_dir: Path) -> RunStatus:
    """Where a run stands, from its markers, processes, heartbeat and record."""
    beat = read_heartbeat(run_dir)
    record = _record(run_dir)
    trials = record.trials if record is not None else ()
    recorded = sum(1 for t in trials if t.status != "not_run")
    state = record.state if record is not None else None
    pid = read_pid(run_dir)
    supervisor_alive = process_alive(pid, _mtime(run_dir / PID_FILE))
    pytest_alive = bool(beat) and process_alive(beat.get("pid"), beat.get("started_unix"))
    failed = run_dir / FAILED
    if failed.is_file():
        reason = _first_line(failed.read_text(errors="replace"))
        return RunStatus(run_dir.name, "failed", f": {reason}; log {run_dir / LOG_FILE}")
    finished = (run_dir / COMPLETE).is_file() or (state in FINAL_STATES and not supervisor_alive)
    if finished:
        counts = record.counts if record is not None else {}
        tag = record.tag if record is not None else None
        tally = "".join(f", {k} {v}" for k, v in sorted(counts.items()))
        return RunStatus(
            run_dir.name,
            state or "complete",
            f" ({recorded} trials recorded){tally}, tag {tag}, report {run_dir / 'report.md'}",
        )
    if supervisor_alive or pytest_alive:
        if not beat:
            return RunStatus(
                run_dir.name, "starting", f" (pid {pid}): collecting; log {run_dir / LOG_FILE}"
            )
        return RunStatus(run_dir.name, "running", _progress(beat))
    where = (
        (
            f"; last heartbeat {duration(time.time() - beat['updated_unix'])} ago, "
            f"{beat['trials_total']} trials planned"
            f"{', stage ' + beat['stage'] if beat.get('stage') else ''}"
        )
        if beat
        else ""
    )
    pids = ", ".join(str(p) for p in (pid, (beat or {}).get("pid")) if p)
    return RunStatus(
        run_dir.name,
        "died",
        f": its process is gone (pid {pids or '?'}) and it left no {COMPLETE} or "
        f"{FAILED} marker{where}; {recorded} trial(s) recorded are kept",
    )


def _progress(beat: dict[str, Any]) -> str:
    """A live run's progress, with its clocks carried forward from the last heartbeat."""
    since = max(time.time() - beat["updated_unix"], 0.0)
    stage = (
        f"stage {beat['stage']} for {duration((beat.get('stage_elapsed_s') or 0) + since)}"
        if beat.get("stage")
        else "between stages"
    )
    eta = beat.get("eta_s")
    peak = f"{beat['peak_rss_mb']:.1f} MB" if beat.get("peak_rss_mb") is not None else "?"
    hosts = beat.get("hosts") or {}
    per_host = "".join(f"; {host} {done}" for host, done in sorted(hosts.items()))
    return (
        f" ({beat['trials_done']} of {beat['trials_total']} trials done{per_host}), {stage}, "
        f"elapsed {duration(beat['elapsed_s'] + since)}, "
        f"eta {duration(None if eta is None else max(eta - since, 0))}, "
        f"peak {peak}, heartbeat {duration(since)} ago"
    )


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
