"""Running one stage command: its own process group, captured output, resource usage.

Each stage runs as ``sh -c CMD`` leading a new session (so its process group holds its whole
tree and can be stopped at once: on a timeout, a guard breach, Ctrl-C or SIGTERM of pytest).
stdout and stderr go to files in the run folder. ``os.wait4`` gives the CPU time (user+sys of
the stage and every descendant it reaped). Peak RSS comes from the memory guard's samples of the
whole tree: ``ru_maxrss`` cannot be used, because the kernel folds the forking parent's RSS
(pytest's own, inherited until exec) into the child's maximum.

The shell raises its own ``oom_score_adj`` to 1000 before running the command, so every process
of the stage inherits it and the kernel, if it ever acts before the guard, picks the stage and
never a neighbour. Doing it in the shell rather than in a ``preexec_fn`` keeps CPython's fast
vfork path for spawning (see benchmarks/overhead.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cgroup import CgroupMemory
from .fsutil import utc_now
from .guard import MemoryGuard
from .nvml import VramGuard, process_tree

#: Run before every stage command: the stage, not a co-tenant, is the OOM-killer's first choice.
_OOM_FIRST = "echo 1000 > /proc/self/oom_score_adj 2>/dev/null; "
#: Seconds a stopped stage gets between SIGTERM and SIGKILL.
STOP_GRACE_S = 2.0
STDERR_TAIL_LINES = 20
#: A stage running longer than this says so (stage, elapsed, peak memory) at this interval.
DEFAULT_PROGRESS_S = 60.0


@dataclass
class StageRun:
    """What running a stage left behind."""

    stage: str
    command: str
    cwd: str
    exit_code: int | None
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    started: str
    ended: str
    stdout_path: Path
    stderr_path: Path
    timed_out: bool = False
    guard_events: list[dict[str, Any]] = field(default_factory=list)
    guard_samples: int = 0
    gpus: list[int] = field(default_factory=list)
    peak_vram_mb: float | None = None

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        text = self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""
        tail = text.rstrip().splitlines()[-lines:]
        return "\n".join(tail) if tail else "(stderr was empty)"

    def as_record(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "wall_s": round(self.wall_s, 6),
                "cpu_s": round(self.cpu_s, 6), "peak_rss_mb": round(self.peak_rss_mb, 3),
                "started": self.started, "ended": self.ended,
                "stdout": str(self.stdout_path), "stderr": str(self.stderr_path),
                **({"guard_events": self.guard_events} if self.guard_events else {}),
                **({"gpus": self.gpus, "peak_vram_mb": self.peak_vram_mb} if self.gpus else {})}


def run_stage(stage: str, command: str, *, cwd: Path, env: Mapping[str, str], log_dir: Path,
              timeout_s: float | None = None, mem_ceiling_mb: float | None = None,
              cgroup: CgroupMemory | None = None,
              progress: Callable[[float, float], None] | None = None,
              progress_every_s: float = DEFAULT_PROGRESS_S, gpus: Sequence[int] = (),
              vram_ceiling_mb: float = 0) -> StageRun:
    """Run ``command`` to completion (or its timeout, or a guard kill) and report how it went.

    The memory guard watches the stage's tree against ``mem_ceiling_mb`` and the enclosing
    ``cgroup`` against its limit; on ``gpus`` (NVML indices, already pinned in ``env``), the
    VRAM guard watches the tree's VRAM against ``vram_ceiling_mb`` (0: record only).
    ``progress(elapsed_s, peak_rss_mb)`` is called every
    ``progress_every_s`` while the stage runs. Any exception while waiting (KeyboardInterrupt
    included) stops the whole process group before it propagates, so no stage outlives its
    session.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = log_dir / "stdout.txt", log_dir / "stderr.txt"
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        started, t0 = utc_now(), time.perf_counter()
        proc = subprocess.Popen(["/bin/sh", "-c", _OOM_FIRST + command], cwd=cwd,
                                env=dict(env), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    guard = MemoryGuard(proc.pid, mem_ceiling_mb, stage, cgroup).start()
    vram = VramGuard(process_tree(proc.pid), gpus, vram_ceiling_mb, stage,
                     on_breach=lambda: _kill_leftovers(proc.pid)).start() if gpus else None
    timer = _Deadline(proc.pid, timeout_s)
    ticker = _Ticker(progress, progress_every_s, lambda: guard.peak_rss_mb, t0)
    try:
        _, status, usage = _wait4(proc.pid)
    except BaseException:
        stop_group(proc.pid)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(proc.pid, 0)
        raise
    finally:
        timer.cancel()
        ticker.cancel()
        report = guard.stop()
        vram_report = vram.stop() if vram else None
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    _kill_leftovers(proc.pid)
    events = [report.event.as_record()] if report.event else []
    if vram_report and vram_report.event:
        events.append(vram_report.event)
    return StageRun(stage=stage, command=command, cwd=str(cwd), exit_code=proc.returncode,
                    wall_s=wall, cpu_s=usage.ru_utime + usage.ru_stime,
                    peak_rss_mb=report.peak_rss_mb, started=started, ended=utc_now(),
                    stdout_path=stdout_path, stderr_path=stderr_path, timed_out=timer.fired,
                    guard_events=events, guard_samples=report.n_samples, gpus=list(gpus),
                    peak_vram_mb=vram_report.peak_vram_mb if vram_report else None)


def _wait4(pid: int) -> tuple[int, int, Any]:
    while True:
        try:
            return os.wait4(pid, 0)
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for old kernels
            continue


def stop_group(pgid: int) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after a grace period."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(pgid, os.WNOHANG)
        except ChildProcessError:
            pid = pgid
        if pid == pgid:
            break
        time.sleep(0.02)
    _kill_leftovers(pgid)


def _kill_leftovers(pgid: int) -> None:
    """A stage's background children die with it: nothing of a stage outlives its trial."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class _Ticker:
    """Calls ``progress(elapsed_s, peak_rss_mb)`` every ``every_s`` while a stage runs, so a
    long stage never goes silent."""

    def __init__(self, progress: Callable[[float, float], None] | None, every_s: float,
                 peak: Callable[[], float], t0: float):
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if progress is not None:
            def tick() -> None:
                while not self._stop.wait(every_s):
                    progress(time.perf_counter() - t0, peak())

            self._thread = threading.Thread(target=tick, name="stage-progress", daemon=True)
            self._thread.start()

    def cancel(self) -> None:
        self._stop.set()


class _Deadline:
    """Stops a stage's process group when its ``timeout_s`` has passed."""

    def __init__(self, pgid: int, timeout_s: float | None):
        self.fired = False
        self._timer: threading.Timer | None = None
        if timeout_s:
            self._timer = threading.Timer(timeout_s, self._fire, args=(pgid,))
            self._timer.daemon = True
            self._timer.start()

    def _fire(self, pgid: int) -> None:
        self.fired = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)

    def cancel(self) -> None:
        if self._timer:
            self._timer.cancel()
