"""Isolation of stages: a quiet host (a measure stage runs alone) and containment of processes.

A measure stage holds the host's lock exclusively while its command runs; a prep stage holds it
shared. So under ``pytest -n N`` preps of different workers build in parallel, but no prep and
no other measurement of this session runs on the host while a measurement does. The lock is an
``flock`` under the data directory, so a crashed worker releases it. ``--bench-isolation=none``
turns it off (and the run is tagged with that caveat).

Every process a stage starts ends with its trial, however it detached (``setsid``, a double
fork): :class:`Containment` gives each stage a cgroup of its own where the machine allows it
(v1 or v2, under this process's own), else makes this process the stages' child subreaper; a
watchdog process kills what is left if this process dies, SIGKILL included. Trial records say
which containment was in force (docs/benchmark/RELIABILITY.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from pytest_benchmark_agent.guards.cgroup import CgroupMemory
from pytest_benchmark_agent.records.recover import start_ticks
from pytest_benchmark_agent.util.fsutil import open_creating

POLICIES = ("host", "none")


def host_id() -> str:
    """This host's identity: ``$BENCH_HOST_ID`` (to give local workers distinct hosts), else
    the node name."""
    return os.environ.get("BENCH_HOST_ID") or _node_name()


@functools.cache
def _node_name() -> str:
    """The node name, asked once per process (every trial record carries it)."""
    return os.uname().nodename


class HostIsolation:
    """The host lock of one data directory, applied per stage kind."""

    def __init__(self, home: Path, policy: str = "host"):
        if policy not in POLICIES:
            raise ValueError(f"--bench-isolation {policy!r}: use one of {', '.join(POLICIES)}")
        self.policy = policy
        self.path = home / ".locks" / f"host-{host_id()}.lock"
        self._fd: int | None = None  # opened once, locked and unlocked per stage

    @contextlib.contextmanager
    def stage(self, kind: str) -> Iterator[None]:
        """Hold the host lock as a stage of ``kind`` (``measure`` exclusive, ``prep`` shared)."""
        if self.policy == "none":
            yield
            return
        if self._fd is None:
            self._fd = open_creating(self.path, os.O_RDWR | os.O_CREAT)
        fcntl.flock(self._fd, fcntl.LOCK_EX if kind == "measure" else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)


# -- containment: every process a stage starts ends with its trial --------------------------------

#: How stages are contained, strongest first: a cgroup of their own (every process, however it
#: detached, is listed there); this process as their child subreaper (orphans come back to it);
#: their process group alone (a ``setsid`` child escapes: recorded, so a reader knows).
CONTAINMENTS = ("cgroup", "subreaper", "process-group")
#: Set in every stage's environment: the watchdog's sweep finds a stage's processes by it once
#: this process is gone, where no cgroup holds them.
TOKEN_VAR = "BENCH_CONTAINMENT_TOKEN"
#: ``$BENCH_CONTAINMENT`` may ask for a weaker containment than the machine allows (never a
#: stronger one): ``subreaper`` or ``process-group``.
CHOICE_VAR = "BENCH_CONTAINMENT"
_SESSION_PREFIX = "pba-session-"
_PR_SET_CHILD_SUBREAPER = 36
#: Rounds of SIGKILL over a stage's leftovers before giving up (each kill can let a parent's
#: children reparent or a fork land; a few rounds end any tree that does not fork forever).
_KILL_ROUNDS = 200

# The watchdog: one ``sh`` per session, its stdin the read end of a pipe this process holds.
# It reads the containment this process settled on, then blocks until the pipe ends (this
# process exited: normally, or killed with SIGKILL) and kills whatever stages left behind: every
# process of the session's stage cgroups, else every process carrying the session's token.
_WATCHDOG = r"""
trap '' INT HUP TERM QUIT
read mode
read _
i=0
while [ $i -lt 100 ]; do
  i=$((i + 1)); left=
  if [ "$mode" = cgroup ]; then
    for procs in "$1"/*/cgroup.procs; do
      [ -f "$procs" ] || continue
      pids=$(cat "$procs" 2>/dev/null)
      [ -n "$pids" ] && { kill -9 $pids 2>/dev/null; left=1; }
    done
  else
    pids=$(grep -lzx "$3=$4" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3)
    [ -n "$pids" ] && { kill -9 $pids 2>/dev/null; left=1; }
  fi
  [ -z "$left" ] && break
  sleep 0.05
done
if [ "$mode" = cgroup ]; then
  for folder in "$1"/*/; do [ -d "$folder" ] && rmdir "$folder" 2>/dev/null; done
  echo $$ > "$2" 2>/dev/null
  rmdir "$1" 2>/dev/null
fi
exit 0
"""


def _empty_cgroup(folder: Path) -> bool:
    """SIGKILL every process of the cgroup ``folder`` until it holds none; whether it is empty
    (False where it is gone or still holds processes after every round)."""
    procs = folder / "cgroup.procs"
    for _ in range(_KILL_ROUNDS):
        try:
            pids = procs.read_bytes().split()
        except OSError:
            return False  # already gone
        if not pids:
            return True
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.001)
    return False


def _kill_cgroup(folder: Path) -> None:
    """Empty the cgroup ``folder`` (:func:`_empty_cgroup`), then remove it."""
    _empty_cgroup(folder)
    with contextlib.suppress(OSError):
        folder.rmdir()


class StageScope:
    """One stage's containment: what its shell joins, what it carries, and its end."""

    def __init__(
        self,
        kind: str,
        token: str,
        cgroup: CgroupMemory | None = None,
        release: Callable[[Path], None] | None = None,
    ):
        self.kind = kind
        self.cgroup = cgroup
        self._release = release
        #: The ``cgroup.procs`` file the stage's shell writes itself into ("" for none).
        self.join = str(cgroup.path / "cgroup.procs") if cgroup is not None else ""
        self.env = {TOKEN_VAR: token} if token else {}
        self._before = _children() if kind == "subreaper" else set()

    def end(self) -> None:
        """Kill every process the stage left (its leader already reaped) and reap them; an
        emptied cgroup goes back to the session for its next stage."""
        if self.cgroup is not None:
            if self._release is not None and _empty_cgroup(self.cgroup.path):
                self._release(self.cgroup.path)
            else:
                _kill_cgroup(self.cgroup.path)
        elif self.kind == "subreaper":
            for _ in range(_KILL_ROUNDS):
                orphans = _children() - self._before
                if not orphans:
                    break
                for pid in orphans:  # each one's children come back to this process next
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                for pid in orphans:
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(pid, 0)


def _children() -> set[int]:
    """This process's direct children (every thread's), as the kernel lists them."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError):
                with open(f"/proc/self/task/{task}/children", "rb") as children:
                    found.update(int(pid) for pid in children.read().split())
    return found


class Containment:
    """How this session contains its stages, settled at the first stage and ended at exit.

    With a cgroup: ``pba-session-<pid>-<start ticks>-<random>/`` under this process's own cgroup,
    one child per running stage, emptied when the stage ends and reused by the next one (making
    and removing a cgroup for every stage was a tenth of a short trial's cost), all removed at
    :meth:`close`; a later session removes a session's
    folder whose owner is gone. Else this process becomes its stages' child subreaper. Either
    way a watchdog (:data:`_WATCHDOG`) cleans up when this process is gone, SIGKILL included.
    """

    def __init__(self) -> None:
        self.kind = "process-group"
        self.token = f"{os.getpid()}-{secrets.token_hex(4)}"
        self._session: CgroupMemory | None = None
        self._stages = 0
        self._spare: list[Path] = []  # emptied stage cgroups, for the next stages
        self._watchdog: int | None = None
        self._pipe: int | None = None
        self._folder: Path | None = None
        self._started = False
        #: Stages of a counted batch (engine/counted.py) take their scopes from several threads.
        self._lock = threading.Lock()

    def allows_overlap(self) -> bool:
        """Whether stages may run at once: a subreaper's scope ends every child this process
        gained while its stage ran, so it would kill another stage running beside it."""
        with self._lock:
            if not self._started:
                self._start()
        return self.kind != "subreaper"

    def stage(self) -> StageScope:
        """The scope of the next stage (the containment is set up at the first one)."""
        with self._lock:
            return self._next_scope()

    def _next_scope(self) -> StageScope:
        if not self._started:
            self._start()
        if self._session is None:
            return StageScope(self.kind, self.token)
        if self._spare:
            folder = self._spare.pop()
        else:
            self._stages += 1
            folder = self._session.path / f"stage-{self._stages}"
            try:
                folder.mkdir()
            except OSError:  # the session folder went away (removed by hand): contain by group
                return StageScope("process-group", self.token)
        return StageScope(
            "cgroup", self.token, replace(self._session, path=folder), self._spare.append
        )

    def _start(self) -> None:
        self._started = True
        wanted = os.environ.get(CHOICE_VAR, "cgroup")
        allowed = CONTAINMENTS[CONTAINMENTS.index(wanted) :] if wanted in CONTAINMENTS else ()
        own = CgroupMemory.of_self() if "cgroup" in allowed else None
        if own is not None:
            sweep_orphan_sessions(own.path)
        self._spawn_watchdog(own)
        if own is not None and self._join_session(own):
            self.kind = "cgroup"
        elif "subreaper" in allowed and _become_subreaper():
            self.kind = "subreaper"
        if self._pipe is not None:
            with contextlib.suppress(OSError):
                os.write(self._pipe, f"{self.kind}\n".encode())

    def _spawn_watchdog(self, own: CgroupMemory | None) -> None:
        """Start the watchdog (its own session: no terminal signal reaches it)."""
        name = f"{_SESSION_PREFIX}{os.getpid()}-{start_ticks(os.getpid())}-{self.token[-8:]}"
        folder = own.path / name if own is not None else None
        read, write = os.pipe()
        try:
            self._watchdog = os.posix_spawn(
                "/bin/sh",
                [
                    "/bin/sh",
                    "-c",
                    _WATCHDOG,
                    "watchdog",
                    str(folder or ""),
                    str(own.path / "cgroup.procs") if own else "",
                    TOKEN_VAR,
                    self.token,
                ],
                {"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                file_actions=[(os.POSIX_SPAWN_DUP2, read, 0)],
                setsid=True,
            )
            self._pipe = write
        except OSError:
            os.close(write)
        finally:
            os.close(read)
        self._folder = folder

    def _join_session(self, own: CgroupMemory) -> bool:
        """Make the session's cgroup and move the watchdog into it: where that works, a stage's
        shell can join its own child of it too."""
        if self._folder is None or self._watchdog is None:
            return False
        try:
            self._folder.mkdir()
        except OSError:
            return False
        try:
            (self._folder / "cgroup.procs").write_text(str(self._watchdog))
        except OSError:
            with contextlib.suppress(OSError):
                self._folder.rmdir()
            return False
        self._session = replace(own, path=self._folder)
        return True

    def close(self) -> None:
        """End the session's containment: the spare stage cgroups are removed, and the watchdog
        sweeps (nothing, normally) and exits."""
        while self._spare:
            with contextlib.suppress(OSError):
                self._spare.pop().rmdir()
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None
        if self._watchdog is not None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self._watchdog, 0)
            self._watchdog = None


def _become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (Linux 3.4+)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def sweep_orphan_sessions(own: Path) -> list[Path]:
    """Kill the processes of, and remove, every session cgroup under ``own`` whose owner
    (pid and start time in its name) is gone; returns the folders removed."""
    removed = []
    try:
        names = [name for name in os.listdir(own) if name.startswith(_SESSION_PREFIX)]
    except OSError:
        return removed
    for name in names:
        pid_text, ticks = (name[len(_SESSION_PREFIX) :].split("-") + ["", ""])[:2]
        if not (pid_text.isdigit() and ticks.isdigit()):
            continue
        if start_ticks(int(pid_text)) == int(ticks):
            continue  # its session still runs
        folder = own / name
        with contextlib.suppress(OSError):
            for child in folder.iterdir():
                if child.is_dir():
                    _kill_cgroup(child)
        _kill_cgroup(folder)
        removed.append(folder)
    return removed
