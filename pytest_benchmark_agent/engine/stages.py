"""Running one stage command: its own process group, captured output, resource usage.

Each stage runs as ``sh -c CMD`` leading a new session (so its process group holds its whole
tree and can be stopped at once: on a timeout, a guard breach, Ctrl-C or SIGTERM of pytest).
``os.wait4`` gives the CPU time (user+sys of the stage and every descendant it reaped). Peak RSS
comes from the memory guard's samples of the whole tree: ``ru_maxrss`` cannot be used, because
the kernel folds the forking parent's RSS (pytest's own, inherited until exec) into the child's
maximum.

One loop in the calling thread waits for everything a stage needs: the leader's exit (a pidfd),
its stdout and stderr (pipes), and the next memory-guard sample, timeout and progress line
(the poll's timeout is the nearest of them). A thread per concern would cost a thread start and
a scheduler handoff per stage, which dominates short trials (docs/benchmark/PERFORMANCE.md).
Output is kept in memory and written to ``stdout.txt`` / ``stderr.txt`` in the stage's log
folder only when non-empty (a stage that prints nothing leaves no files); past
``SPILL_BYTES`` (:mod:`.stage_output`), or once the stage has run ``LIVE_AFTER_S``, it goes
to the file as it arrives (unbuffered, so ``tail -f`` and ``benchmark-agent status`` follow
a long stage), and is read back as a stream of lines, so a chatty stage never fills memory. An
``echo`` (pytest's ``-s``) gets every chunk as it is read, in the same loop.

The shell raises its own ``oom_score_adj`` to 1000 before running the command, so every process
of the stage inherits it and the kernel, if it ever acts before the guard, picks the stage and
never a neighbour. Doing it in the shell rather than in a ``preexec_fn`` lets the stage start
with ``os.posix_spawn`` (see :func:`_spawn` and benchmarks/overhead.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.engine.counters import Counting, counting
from pytest_benchmark_agent.engine.invocation import StageInvocation
from pytest_benchmark_agent.engine.isolation import StageScope
from pytest_benchmark_agent.engine.metrics import quoted
from pytest_benchmark_agent.engine.stage_output import StageOutput
from pytest_benchmark_agent.errors import MetricError
from pytest_benchmark_agent.guards.gpu import VramGuard, VramReport, process_tree
from pytest_benchmark_agent.guards.memory import GuardReport, MemoryGuard
from pytest_benchmark_agent.util.fsutil import utc_now

#: Run before every stage command: the stage, not a co-tenant, is the OOM-killer's first choice.
_OOM_FIRST = "echo 1000 > /proc/self/oom_score_adj 2>/dev/null; "
#: Run first by a stage's shell given a cgroup to join (``$2``): itself, before any child.
_JOIN = 'if [ -n "$2" ]; then echo $$ > "$2" || exit 125; fi; '
#: Seconds a stopped stage gets between SIGTERM and SIGKILL.
STOP_GRACE_S = 2.0
STDERR_TAIL_LINES = 20
#: A stage still running after this many seconds writes its output to its files as it comes.
LIVE_AFTER_S = 1.0
_READ_BYTES = 1 << 16


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
    #: ``cpu_s``'s two parts (hyperfine's User and System): the stage's own work, and the
    #: kernel's on its behalf (I/O, page faults, process starts).
    user_s: float
    sys_s: float
    started: str
    ended: str
    stdout_log: StageOutput = field(repr=False)
    stderr_log: StageOutput = field(repr=False)
    timed_out: bool = False
    guard_events: list[dict[str, Any]] = field(default_factory=list)
    guard_samples: int = 0
    gpus: list[int] = field(default_factory=list)
    peak_vram_mb: float | None = None
    #: What held the stage's processes (:data:`.isolation.CONTAINMENTS`).
    containment: str = "process-group"
    #: A counted stage's counts (``counters:``), the backend that counted them, the built-in
    #: metrics it distorted, its Python hash seed, and why the counts could not be read
    #: (engine/counters.py).
    counts: dict[str, int] = field(default_factory=dict)
    counted_by: str | None = None
    hash_seed: str | None = None
    distorted: tuple[str, ...] = ()
    count_error: str | None = None

    def counts_or_error(self) -> dict[str, int]:
        """The stage's counts; MetricError when a counted stage's counts could not be read."""
        if self.count_error:
            raise MetricError(self.count_error)
        return self.counts

    def stdout(self) -> str:
        return self.stdout_log.text()

    def stdout_lines(self) -> Iterable[str]:
        return self.stdout_log.lines()

    def output_errors(self) -> list[OSError]:
        """Writes of the stage's output that failed (a full disk): its output is incomplete."""
        return [log.error for log in (self.stdout_log, self.stderr_log) if log.error is not None]

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        """The last ``lines`` of stderr, which a failure reason quotes in every record, export
        and terminal: redacted as the stream was read (:class:`.stage_output.StreamRedactor`),
        a few KB at most (:func:`.metrics.quoted`: a long line is cut, saying how long)."""
        tail, first_cut = self.stderr_log.last_lines(lines)
        return quoted(tail, first_cut) if tail else "(stderr was empty)"

    def as_record(self) -> dict[str, Any]:
        """The run for a trial or prep record; ``stdout``/``stderr`` name only files written."""
        logs = {
            key: str(log.path)
            for key, log in (("stdout", self.stdout_log), ("stderr", self.stderr_log))
            if log.written
        }
        return {
            "exit_code": self.exit_code,
            "wall_s": round(self.wall_s, 6),
            "cpu_s": round(self.cpu_s, 6),
            "user_s": round(self.user_s, 6),
            "sys_s": round(self.sys_s, 6),
            "peak_rss_mb": round(self.peak_rss_mb, 3),
            "started": self.started,
            "ended": self.ended,
            "containment": self.containment,
            **logs,
            **({"guard_events": self.guard_events} if self.guard_events else {}),
            **({"gpus": self.gpus, "peak_vram_mb": self.peak_vram_mb} if self.gpus else {}),
            **(
                {
                    "counted_by": self.counted_by,
                    "distorted": list(self.distorted),
                    "hash_seed": self.hash_seed,
                }
                if self.counted_by
                else {}
            ),
        }


def run_stage(call: StageInvocation) -> StageRun:
    """Run ``call``'s command to completion (or its timeout, or a guard kill) and report
    how it went.

    The memory guard watches the stage's tree against ``mem_ceiling_mb`` and the enclosing
    ``cgroup`` (the one this process runs in, so the stage starts there too) against its limit;
    on ``gpus`` (NVML indices, already pinned in ``env``), the VRAM guard watches the tree's
    VRAM against ``vram_ceiling_mb`` (0: record only). ``progress(elapsed_s, peak_rss_mb)`` is
    called every ``progress_every_s`` while the stage runs; ``echo(stream, chunk)`` sees its
    output as it is read. Any exception while waiting
    (KeyboardInterrupt included) stops the whole process group before it propagates, and
    ``containment`` (the session's) kills every other process the stage started when it ends,
    so no stage outlives its trial. ``counters`` are counted by the backend the command then
    runs under (:mod:`.counters`), read once the stage exited cleanly; Python's hash seed is
    then the ``block``'s in the run's ``hash_seed_base`` unless ``env`` sets it.
    """
    count = counting(call.counters, call.log_dir)
    env = count.environment(call.env, call.block, call.hash_seed_base) if count else call.env
    scope = (
        call.containment.stage()
        if call.containment is not None
        else StageScope("process-group", "")
    )
    launched = _launch(call, env, count, scope)
    guard = MemoryGuard(launched.pid, call.mem_ceiling_mb, call.stage, scope.cgroup or call.cgroup)
    ended = _watch(launched, guard, call)
    return _stage_run(call, launched, ended)


@dataclass(frozen=True)
class _Launched:
    """A started stage: its leader, its output pipes, the containment and counting it runs
    under, the environment it was given, and when it started."""

    pid: int
    pipes: dict[int, StageOutput]
    out: StageOutput
    err: StageOutput
    scope: StageScope
    count: Counting | None
    env: Mapping[str, str]
    started: str
    t0: float


@dataclass(frozen=True)
class _Ended:
    """How a watched stage ended: timed out or not, its wall time, wait status and resource
    usage, and what its memory and VRAM guards saw."""

    timed_out: bool
    wall_s: float
    status: int
    usage: Any
    memory: GuardReport
    vram: VramReport | None


def _launch(
    call: StageInvocation, env: Mapping[str, str], count: Counting | None, scope: StageScope
) -> _Launched:
    """Start the stage's shell with ``env`` under its counting backend and inside ``scope``
    (ended again when the start fails), its output captured under its log folder."""
    out = StageOutput(call.log_dir / "stdout.txt", echo=call.echo)
    err = StageOutput(call.log_dir / "stderr.txt", echo=call.echo)
    command = call.command
    if scope.env:
        env = {**env, **scope.env}
    started, t0 = utc_now(), time.perf_counter()
    try:
        pid, stdout_fd, stderr_fd = _spawn(
            count.command(command) if count else command, call.cwd, env, scope.join
        )
    except BaseException:
        scope.end()
        raise
    pipes = {stdout_fd: out, stderr_fd: err}
    return _Launched(pid, pipes, out, err, scope, count, env, started, t0)


def _watch(launched: _Launched, guard: MemoryGuard, call: StageInvocation) -> _Ended:
    """Wait for the stage under its memory guard (and VRAM guard on its GPUs), its timeout and
    progress; whatever happens, nothing it started outlives it and its output is drained."""
    pid = launched.pid
    vram = None
    try:
        guard.begin()
        vram = (
            VramGuard(
                process_tree(pid),
                call.gpus,
                call.vram_ceiling_mb,
                call.stage,
                on_breach=lambda: _kill_leftovers(pid),
            ).start()
            if call.gpus
            else None
        )
        waiter = _Waiter(pid, launched.pipes)
        timed_out = waiter.wait(
            guard, launched.t0, call.timeout_s, call.progress, call.progress_every_s
        )
        wall = time.perf_counter() - launched.t0
        _, status, usage = _wait4(pid)
    except BaseException:
        stop_group(pid)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        raise
    finally:
        _kill_leftovers(pid)
        launched.scope.end()
        _drain_and_close(launched.pipes)
        report = guard.finish()
        vram_report = vram.stop() if vram else None
    return _Ended(timed_out, wall, status, usage, report, vram_report)


def _stage_run(call: StageInvocation, launched: _Launched, ended: _Ended) -> StageRun:
    """The record of a finished stage: its times, usage, guard events and counts."""
    report, vram_report, count = ended.memory, ended.vram, launched.count
    events = [report.event.as_record()] if report.event else []
    if vram_report and vram_report.event:
        events.append(vram_report.event)
    counts, count_error = _counted(count, ended.status, ended.timed_out or bool(events))
    return StageRun(
        stage=call.stage,
        command=call.command,
        cwd=str(call.cwd),
        exit_code=os.waitstatus_to_exitcode(ended.status),
        wall_s=ended.wall_s,
        cpu_s=ended.usage.ru_utime + ended.usage.ru_stime,
        user_s=ended.usage.ru_utime,
        sys_s=ended.usage.ru_stime,
        peak_rss_mb=report.peak_rss_mb,
        started=launched.started,
        ended=utc_now(),
        stdout_log=launched.out,
        stderr_log=launched.err,
        timed_out=ended.timed_out,
        guard_events=events,
        guard_samples=report.n_samples,
        gpus=list(call.gpus),
        peak_vram_mb=vram_report.peak_vram_mb if vram_report else None,
        containment=launched.scope.kind,
        counts=counts,
        counted_by=count.backend.label if count else None,
        hash_seed=launched.env.get("PYTHONHASHSEED") if count else None,
        distorted=count.backend.distorts if count else (),
        count_error=count_error,
    )


def _counted(
    count: Counting | None, status: int, stopped: bool
) -> tuple[dict[str, int], str | None]:
    """The counts of a stage that exited cleanly, or why they could not be read; a stage that
    failed or was stopped leaves none (its trial fails on that, not on its counts)."""
    if count is None:
        return {}, None
    if stopped or os.waitstatus_to_exitcode(status) != 0:
        count.discard()
        return {}, None
    try:
        return count.read(), None
    except MetricError as exc:
        return {}, str(exc)


def _spawn(command: str, cwd: Path, env: Mapping[str, str], join: str) -> tuple[int, int, int]:
    """Start ``sh -c`` for a stage, leading its own session; returns its pid and the read ends
    of its stdout and stderr pipes. Where ``join`` names a ``cgroup.procs`` file, the shell
    writes itself there first, before it starts anything, so every process of the stage is
    born in that cgroup (a shell that cannot join exits 125 with the shell's message).

    ``os.posix_spawn`` does what ``subprocess.Popen`` would (stdin from /dev/null, a new session,
    SIGPIPE and SIGXFSZ back to their defaults, no descriptor of this process left open in the
    stage) at about half its cost in this process, most of a short trial's spawning. It has no
    working-folder action, so the shell changes folder first (with ``cd -P``: the physical
    path, as ``chdir`` gives), taking the folder as ``$1`` (and ``join`` as ``$2``) and
    shifting them away; a folder that is gone fails the stage with the shell's message on stderr.
    """
    script = f'cd -P -- "$1" || exit 126; {_JOIN}shift 2; {_OOM_FIRST}{command}'
    stdout_read, stdout_write = _pipe()
    stderr_read, stderr_write = _pipe()
    stdin = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    try:
        actions = [
            (os.POSIX_SPAWN_DUP2, stdin, 0),
            (os.POSIX_SPAWN_DUP2, stdout_write, 1),
            (os.POSIX_SPAWN_DUP2, stderr_write, 2),
        ]
        actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable_fds()]
        pid = os.posix_spawn(
            "/bin/sh",
            ["/bin/sh", "-c", script, "/bin/sh", os.fspath(cwd), join],
            env,
            file_actions=actions,
            setsid=True,
            setsigdef=_DEFAULT_SIGNALS,
        )
    except BaseException:
        os.close(stdout_read)
        os.close(stderr_read)
        raise
    finally:
        for fd in (stdin, stdout_write, stderr_write):
            os.close(fd)
    return pid, stdout_read, stderr_read


#: Signals this process ignores (Python ignores SIGPIPE) that a stage must get with their
#: default action, as ``subprocess`` restores them.
_DEFAULT_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name)
)


def _pipe() -> tuple[int, int]:
    """A close-on-exec pipe whose ends are above 2, so duplicating one onto a standard stream
    always makes a new, inheritable descriptor (a process started with 0-2 closed gets low
    descriptors from ``os.pipe``)."""
    ends = []
    for fd in os.pipe():
        if fd <= 2:
            raised = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
            os.close(fd)
            fd = raised
        ends.append(fd)
    return ends[0], ends[1]


def _inheritable_fds() -> list[int]:
    """Descriptors above 2 that an exec would keep: ``Popen``'s ``close_fds`` closes them, and
    so does the spawn.

    Python makes its own descriptors close-on-exec, so these came from outside (the process
    that started pytest) or from code that asked for them. Listing ``/proc/self/fd`` cost a
    short trial's spawn about a quarter of this process's time, so the listing is taken once,
    at the first stage; each spawn then checks only what it found (a closed one is forgotten).
    """
    global _found_inheritable
    if _found_inheritable is None:
        try:
            names = os.listdir("/proc/self/fd")
        except OSError:
            names = []
        _found_inheritable = [int(name) for name in names if int(name) > 2]
    kept = []
    for fd in _found_inheritable:
        with contextlib.suppress(OSError):  # closed since (the listing's own descriptor too)
            if os.get_inheritable(fd):
                kept.append(fd)
    _found_inheritable = kept
    return kept


_found_inheritable: list[int] | None = None


class _Waiter:
    """Waits for a stage leader's exit while reading its output and keeping its schedule.

    The leader's exit is a pidfd becoming readable (Linux 5.3+); where ``os.pidfd_open`` is
    missing or refused, one thread blocks in ``waitid(WNOWAIT)`` and signals a pipe instead,
    which leaves the zombie for ``os.wait4`` to reap with its resource usage.
    """

    def __init__(self, pid: int, outputs: dict[int, StageOutput]):
        self.pid = pid
        self.outputs = dict(outputs)
        self.poller = select.poll()
        for fd in self.outputs:
            self.poller.register(fd, select.POLLIN)
        self.exit_fd, self._close_exit_fd = self._exit_signal(pid)
        self.poller.register(self.exit_fd, select.POLLIN)

    @staticmethod
    def _exit_signal(pid: int) -> tuple[int, Callable[[], None]]:
        try:
            fd = os.pidfd_open(pid)
            return fd, lambda: os.close(fd)
        except (AttributeError, OSError):
            read, write = os.pipe()

            def wait_exit() -> None:
                with contextlib.suppress(ChildProcessError):
                    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
                os.close(write)

            threading.Thread(target=wait_exit, name=f"stage-exit-{pid}", daemon=True).start()
            return read, lambda: os.close(read)

    def wait(
        self,
        guard: MemoryGuard,
        t0: float,
        timeout_s: float | None,
        progress: Callable[[float, float], None] | None,
        progress_every_s: float,
    ) -> bool:
        """Block until the leader exits; returns whether its timeout stopped it."""
        next_sample = time.perf_counter()  # the first sample (of the leader alone) is due now
        next_tick = deadline = float("inf")
        go_live = t0 + LIVE_AFTER_S
        if progress is not None:
            next_tick = t0 + progress_every_s
        if timeout_s:
            deadline = t0 + timeout_s
        timed_out = False
        try:
            while True:
                now = time.perf_counter()
                if now >= next_sample:
                    interval = guard.sample()  # None: it has killed the stage, which exits soon
                    next_sample = float("inf") if interval is None else now + interval
                if now >= deadline:
                    timed_out, deadline = True, float("inf")
                    _kill_leftovers(self.pid)
                if now >= go_live:  # before the tick: what the live line shows is on disk
                    go_live = float("inf")
                    for output in self.outputs.values():
                        output.go_live()
                if now >= next_tick:
                    progress(now - t0, guard.peak_rss_mb)  # type: ignore[misc]
                    next_tick = now + progress_every_s
                wake = min(next_sample, deadline, next_tick, go_live)
                timeout_ms = None if wake == float("inf") else max(0, int((wake - now) * 1000) + 1)
                for fd, _ in self.poller.poll(timeout_ms):
                    if fd == self.exit_fd:
                        return timed_out
                    self._read(fd)
        finally:
            self._close_exit_fd()

    def _read(self, fd: int) -> None:
        chunk = os.read(fd, _READ_BYTES)
        if chunk:
            self.outputs[fd].write(chunk)
        else:
            self.poller.unregister(fd)
            del self.outputs[fd]


def _drain_and_close(pipes: dict[int, StageOutput]) -> None:
    """Read what the stage's pipes still hold, without waiting for writers that escaped its
    process group (a daemon it started), then close them and write the non-empty outputs."""
    for fd, output in pipes.items():
        os.set_blocking(fd, False)
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(fd, _READ_BYTES):
                output.write(chunk)
        os.close(fd)
        output.close()


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
