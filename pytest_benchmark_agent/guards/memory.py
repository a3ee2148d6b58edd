"""Memory guard: kill a stage's process tree before the kernel's OOM killer picks a neighbour.

Measured on the reference machine (docs/benchmark/GUARDRAILS.md): a guard that compares only
the stage's own RSS with its ceiling loses whenever the stage shares a memory cgroup with others,
because the kernel kills the biggest process of the cgroup (an innocent co-tenant) long before
the stage reaches its ceiling. So the guard watches two things on every sample:

* the stage's whole process tree (descendants of the stage leader plus its session and process
  group) against the stage's ceiling, summing ``/proc/<pid>/statm`` read through descriptors
  kept open; new processes are found by listing the stage's own cgroup every 25 ms and all of
  ``/proc`` every second, reading ``stat`` only for pids not classified yet;
* every limited level of the enclosing memory cgroup (``memory.usage_in_bytes`` /
  ``memory.current`` through an open descriptor) against its limit minus a margin; a usage over
  the line is confirmed by discounting inactive page cache (``memory.stat``), which the kernel
  reclaims before it OOM-kills.

Sampling is adaptive: the interval is the remaining headroom divided by an assumed worst-case
allocation rate (or the observed one, if higher), clamped to 10-100 ms, so the guard sleeps long
when far from any limit and samples fast near one (at most about 20 MiB past a ceiling at
2 GiB/s, 0.3% of a core far from limits, under 2% near one: see the benchmark). On breach it
SIGKILLs the stage's process group and every tree member at once and records a ``GuardEvent``.

Stages should lead their own session (``start_new_session=True``) with an ``oom_score_adj`` of
1000 (``preexec_fn=child_preexec``, or the shell prefix ``stages.run_stage`` uses), which makes
them the kernel's first choice if the kernel ever acts before the guard.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.guards.cgroup import MIB, CgroupMemory

_PAGE = os.sysconf("SC_PAGE_SIZE")
REASON_TREE = "stage tree over its ceiling"
REASON_CGROUP = "cgroup near its limit"


def child_preexec() -> None:
    """Runs in a stage's child before exec: make it the OOM killer's first choice, not a neighbour.

    Raising ``oom_score_adj`` needs no privilege; where /proc is not writable the stage still runs,
    guarded by the memory guard alone.
    """
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as adj:
        adj.write("1000")


def _peak_mb(peak_bytes: int) -> float:
    """A peak in MiB at 0.1 MiB, rounded up: a tree killed a few pages over its ceiling must
    not read as a peak at the ceiling (96 MiB + 4 KiB rounded to nearest read 96.0)."""
    return math.ceil(peak_bytes * 10 / MIB) / 10


def _utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass(frozen=True)
class GuardEvent:
    """A memory guard kill: what it saw, when, and the memory time series up to the kill."""

    stage: str
    reason: str
    peak_mb: float
    ceiling_mb: float | None
    at: str
    series: list[list[float | None]]
    cgroup_mb: float | None = None
    cgroup_limit_mb: float | None = None
    cgroup_path: str | None = None
    pids_killed: int = 0
    kind: str = "memory"

    def as_record(self) -> dict[str, Any]:
        """The event as plain data for results.yaml."""
        return {
            "kind": self.kind,
            "stage": self.stage,
            "reason": self.reason,
            "peak_mb": self.peak_mb,
            "ceiling_mb": self.ceiling_mb,
            "at": self.at,
            "cgroup_mb": self.cgroup_mb,
            "cgroup_limit_mb": self.cgroup_limit_mb,
            "cgroup_path": self.cgroup_path,
            "pids_killed": self.pids_killed,
            "series": [list(point) for point in self.series],
        }


@dataclass(frozen=True)
class GuardReport:
    """What the guard saw over a stage's life.

    ``peak_rss_mb`` is the peak of the tree's summed RSS (never ``ru_maxrss``: the kernel folds
    the forking parent's RSS, inherited until exec, into a child's maximum); ``oom_kills``
    counts kernel OOM kills in the watched cgroups while the guard ran (0 unless the kernel
    acted before the guard, or on someone else);
    ``cpu_s`` is the guard thread's own CPU time.
    """

    stage: str
    peak_rss_mb: float
    event: GuardEvent | None
    n_samples: int
    oom_kills: int
    cpu_s: float
    wall_s: float


class _ProcessTree:
    """The processes of one stage: the leader's descendants, session and process group.

    A process joins the tree only when it is created, so each scan reads ``stat`` only for pids
    it has not classified yet. The frequent scan lists the stage's own cgroup (``cgroup.procs``,
    a handful of pids, where the stage runs in a memory cgroup); a periodic full scan of
    ``/proc`` catches members that moved to another cgroup and forgets pids that are gone.
    A pid reused between two full scans would be missed; that needs the pid space to wrap.
    """

    def __init__(self, leader: int, cgroup_procs: Path | None) -> None:
        self.leader = leader
        self._procs = cgroup_procs
        self.scoped = cgroup_procs is not None
        try:
            self._session = leader if os.getsid(leader) == leader else None
            self._group = leader if os.getpgid(leader) == leader else None
        except ProcessLookupError:
            self._session = self._group = None
        self._classified: set[int] = set()
        self.members: dict[int, int | None] = {}  # pid -> open statm descriptor (None: EMFILE)
        self._classified.add(leader)
        self._add(leader)

    def _candidates(self, full: bool) -> set[int]:
        if not full and self._procs is not None:
            try:
                return {int(word) for word in self._procs.read_bytes().split()}
            except OSError:
                pass  # the cgroup went away: fall back to /proc
        pids = {int(name) for name in os.listdir("/proc") if name.isdigit()}
        self._classified &= pids
        return pids

    def discover(self, full: bool = False) -> None:
        """Add processes created since they were last looked at that belong to the stage."""
        fresh = {}
        for pid in self._candidates(full) - self._classified:
            self._classified.add(pid)
            try:
                with open(f"/proc/{pid}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            fresh[pid] = (int(fields[1]), int(fields[2]), int(fields[3]))
        added = True
        while added:
            added = False
            for pid, (ppid, group, session) in list(fresh.items()):
                if (
                    pid == self.leader
                    or ppid in self.members
                    or (self._session is not None and session == self._session)
                    or (self._group is not None and group == self._group)
                ):
                    self._add(pid)
                    del fresh[pid]
                    added = True

    def _add(self, pid: int) -> None:
        try:
            self.members[pid] = os.open(f"/proc/{pid}/statm", os.O_RDONLY)
        except OSError:
            self.members[pid] = None

    def rss_bytes(self) -> int:
        """Summed resident memory of the live members; members that are gone are dropped."""
        total = 0
        for pid, fd in list(self.members.items()):
            try:
                if fd is None:
                    with open(f"/proc/{pid}/statm", "rb") as statm:
                        text = statm.read()
                else:
                    text = os.pread(fd, 128, 0)
                total += int(text.split()[1]) * _PAGE
            except (OSError, IndexError, ValueError):
                self._drop(pid)
        return total

    def _drop(self, pid: int) -> None:
        fd = self.members.pop(pid, None)
        if fd is not None:
            os.close(fd)

    def kill(self) -> int:
        """SIGKILL the process group, then every member; returns how many processes were hit."""
        if self._group is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._group, signal.SIGKILL)
        self.discover(full=True)
        hit = 0
        for pid in self.members:
            try:
                os.kill(pid, signal.SIGKILL)
                hit += 1
            except (ProcessLookupError, PermissionError):
                pass
        return hit

    def close(self) -> None:
        for pid in list(self.members):
            self._drop(pid)


class _CgroupLevel:
    """One limited cgroup of the lineage, its usage file kept open, and the guard's kill line."""

    def __init__(self, cgroup: CgroupMemory, limit: int, margin: int) -> None:
        self.cgroup = cgroup
        self.limit = limit
        self.line = limit - margin
        self.fd = os.open(cgroup.usage_file, os.O_RDONLY)
        self.oom_kills_at_start = cgroup.oom_kills()

    def usage(self) -> int:
        return int(os.pread(self.fd, 64, 0))

    def over_line(self, usage: int) -> bool:
        """Usage past the line, after discounting inactive page cache the kernel would reclaim."""
        return usage > self.line and usage - self.cgroup.inactive_file_bytes() > self.line


class _Series:
    """A memory time series bounded to about ``cap`` points: pairs merge, keeping the larger."""

    def __init__(self, cap: int = 600) -> None:
        self.cap = cap
        self.points: list[list[float | None]] = []
        self._stride = 1
        self._bucket: list[float | None] | None = None
        self._in_bucket = 0

    def add(self, point: list[float | None]) -> None:
        if self._bucket is None or (point[1] or 0) > (self._bucket[1] or 0):
            self._bucket = point
        self._in_bucket += 1
        if self._in_bucket < self._stride:
            return
        self.points.append(self._bucket)
        self._bucket, self._in_bucket = None, 0
        if len(self.points) >= 2 * self.cap:
            self.points = [
                max(self.points[i : i + 2], key=lambda p: p[1] or 0)
                for i in range(0, len(self.points), 2)
            ]
            self._stride *= 2

    def finish(self, last: list[float | None] | None) -> list[list[float | None]]:
        """The points so far, the unfinished bucket and the ``last`` (breach) sample."""
        out = list(self.points)
        if self._bucket is not None:
            out.append(self._bucket)
        if last is not None:
            out.append(last)
        return out


#: How long the limits of a cgroup lineage are reused between stages (reading them for every
#: stage of a short trial cost about 0.15 ms); a limit changed meanwhile is seen this late.
#: Keyed by the cgroup: the session's stage cgroups are reused from stage to stage
#: (engine/isolation.py), so the entries stay as few as the stages running at once.
LIMITS_TTL_S = 1.0
_limits_seen: dict[Path, tuple[float, list[tuple[CgroupMemory, int]]]] = {}


def _limited_lineage(cgroup: CgroupMemory) -> list[tuple[CgroupMemory, int]]:
    """The levels of ``cgroup``'s lineage that have a limit, with it (read at most once per
    ``LIMITS_TTL_S``)."""
    now = time.monotonic()
    seen = _limits_seen.get(cgroup.path)
    if seen is None or now - seen[0] > LIMITS_TTL_S:
        limited = [
            (node, limit) for node in cgroup.lineage() if (limit := node.limit_bytes()) is not None
        ]
        seen = _limits_seen[cgroup.path] = (now, limited)
    return seen[1]


@dataclass(frozen=True)
class Pacing:
    """How often a :class:`MemoryGuard` samples: its interval is the headroom over
    ``assumed_rate_mb_s`` (or the observed rate, if higher), clamped to ``min_interval_s`` ..
    ``max_interval_s``; it lists the stage's cgroup for new processes every
    ``discover_interval_s`` and scans all of ``/proc`` every ``full_scan_interval_s``."""

    min_interval_s: float = 0.01
    max_interval_s: float = 0.1
    assumed_rate_mb_s: float = 4096.0
    discover_interval_s: float = 0.025
    full_scan_interval_s: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.min_interval_s <= self.max_interval_s:
            raise ValueError(
                f"memory guard: need 0 < min_interval_s <= max_interval_s, "
                f"got {self.min_interval_s} and {self.max_interval_s}"
            )


#: The guard's pacing unless told otherwise: 10-100 ms, assuming 4 GiB/s (the module's note).
DEFAULT_PACING = Pacing()


@dataclass
class _State:
    peak: int = 0
    samples: int = 0
    event: GuardEvent | None = None
    oom_kills: int = 0
    cpu_s: float = 0.0
    series: _Series = field(default_factory=_Series)
    # Pacing of the samples, carried from one to the next.
    last_discovery: float = 0.0
    last_full_scan: float = 0.0
    last_room: float | None = None
    last_t: float = 0.0


class MemoryGuard:
    """Watches one stage's process tree and enclosing cgroup; kills the stage on breach.

    ``ceiling_mb`` is the stage's own ceiling (None: only peak RSS is recorded and the cgroup
    watched); ``cgroup`` is the memory cgroup the stage runs in (``CgroupMemory.of_self()`` for
    stages started by this process; None where there is no memory controller, and then the
    stage's own cgroup is looked up). Every limited level of its lineage is watched against its
    limit minus ``cgroup_margin_mb`` (default: the larger of 64 MiB and 2% of the limit);
    ``pacing`` says how often it samples (:class:`Pacing`).

    Its caller waits for the stage in a loop (``run_stage``): ``begin()``, then ``sample()``
    whenever the interval it returned has passed, then ``finish()``. (The tests drive the same
    three calls from a thread: ``tests/support/guarding.py``.)
    """

    def __init__(
        self,
        pid: int,
        ceiling_mb: float | None,
        stage: str,
        cgroup: CgroupMemory | None = None,
        *,
        cgroup_margin_mb: float | None = None,
        pacing: Pacing = DEFAULT_PACING,
    ) -> None:
        if ceiling_mb is not None and ceiling_mb <= 0:
            raise ValueError(
                f"memory guard for stage {stage!r}: mem_mb must be > 0, got {ceiling_mb}; "
                "set resources.mem_mb (or the stage's mem_mb) to a positive number of MiB"
            )
        self.pid = pid
        self.stage = stage
        self.ceiling_mb = ceiling_mb
        self.cgroup = cgroup
        self._ceiling = None if ceiling_mb is None else int(ceiling_mb * MIB)
        self._margin_mb = cgroup_margin_mb
        self._min = pacing.min_interval_s
        self._max = pacing.max_interval_s
        self._rate = pacing.assumed_rate_mb_s * MIB
        self._discover_every = pacing.discover_interval_s
        self._full_scan_every = pacing.full_scan_interval_s
        self._state = _State()
        self._tree: _ProcessTree | None = None
        self._watched: list[_CgroupLevel] = []
        self._report: GuardReport | None = None
        self._t0 = 0.0

    def _levels(self) -> list[_CgroupLevel]:
        if self.cgroup is None:
            return []
        levels = []
        for node, limit in _limited_lineage(self.cgroup):
            margin_mb = (
                self._margin_mb if self._margin_mb is not None else max(64.0, 0.02 * limit / MIB)
            )
            levels.append(_CgroupLevel(node, limit, int(margin_mb * MIB)))
        return levels

    @property
    def peak_rss_mb(self) -> float:
        """The tree's peak RSS seen so far (for progress lines while the stage still runs)."""
        return _peak_mb(self._state.peak)

    def begin(self) -> None:
        """Open what the samples read; the first sample reads the leader alone.

        The stage starts in ``cgroup`` (or, where none was given, the cgroup it is found in), so
        listing that cgroup finds its later processes; the costly full scans of ``/proc`` wait a
        full period, which short stages never reach.
        """
        if self._tree is not None:
            raise RuntimeError(f"memory guard for stage {self.stage!r} was already started")
        own = self.cgroup if self.cgroup is not None else CgroupMemory.of_pid(self.pid)
        self._tree = _ProcessTree(self.pid, None if own is None else own.path / "cgroup.procs")
        self._watched = self._levels()
        self._state.last_discovery = -self._discover_every  # the second sample looks for more
        if not self._tree.scoped:
            self._state.last_full_scan = -self._full_scan_every
        self._t0 = time.monotonic()

    def sample(self) -> float | None:
        """Take one sample: the seconds until the next is due, or None once the stage is killed.

        An error while sampling is raised as a RuntimeError naming the stage: a guard must never
        stop watching silently.
        """
        cpu0 = time.thread_time()
        try:
            return self._sample()
        except Exception as error:
            raise self._stopped_watching(error) from error
        finally:
            self._state.cpu_s += time.thread_time() - cpu0

    def finish(self) -> GuardReport:
        """Stop watching: close the descriptors, count kernel OOM kills, report what was seen.

        Safe to call whether or not ``begin()`` got through (a stage that failed to start).
        """
        if self._report is not None:
            return self._report
        state = self._state
        try:
            for level in self._watched:
                state.oom_kills = max(
                    state.oom_kills, level.cgroup.oom_kills() - level.oom_kills_at_start
                )
        finally:
            if self._tree is not None:
                self._tree.close()
            for level in self._watched:
                os.close(level.fd)
        self._report = GuardReport(
            stage=self.stage,
            peak_rss_mb=_peak_mb(state.peak),
            event=state.event,
            n_samples=state.samples,
            oom_kills=state.oom_kills,
            cpu_s=state.cpu_s,
            wall_s=time.monotonic() - self._t0,
        )
        return self._report

    def _stopped_watching(self, error: BaseException) -> RuntimeError:
        return RuntimeError(f"memory guard for stage {self.stage!r} stopped watching: {error!r}")

    def _sample(self) -> float | None:
        state, tree = self._state, self._tree
        assert tree is not None, "begin() opens the tree"
        now = time.monotonic() - self._t0
        if state.samples == 0:
            pass  # the leader alone: nothing else of the stage exists yet
        elif now - state.last_full_scan >= self._full_scan_every:
            tree.discover(full=True)
            state.last_discovery = state.last_full_scan = now
        elif now - state.last_discovery >= self._discover_every:
            tree.discover()
            state.last_discovery = now
        rss = tree.rss_bytes()
        state.peak = max(state.peak, rss)
        state.samples += 1
        room = float("inf") if self._ceiling is None else float(self._ceiling - rss)
        reason = REASON_TREE if room < 0 else None
        binding: tuple[_CgroupLevel, int] | None = None
        for level in self._watched:
            usage = level.usage()
            if binding is None or level.line - usage < binding[0].line - binding[1]:
                binding = (level, usage)
            room = min(room, float(level.line - usage))
            if reason is None and rss > 0 and level.over_line(usage):
                reason, binding = REASON_CGROUP, (level, usage)
        point = [
            round(now, 3),
            round(rss / MIB, 1),
            None if binding is None else round(binding[1] / MIB, 1),
        ]
        if reason is not None:
            self._breach(tree, reason, point, binding)
            return None
        state.series.add(point)
        rate = self._rate
        if state.last_room is not None and now > state.last_t:
            rate = max(rate, (state.last_room - room) / (now - state.last_t))
        state.last_room, state.last_t = room, now
        return min(self._max, max(self._min, room / rate))

    def _breach(
        self,
        tree: _ProcessTree,
        reason: str,
        point: list[float | None],
        binding: tuple[_CgroupLevel, int] | None,
    ) -> None:
        at = _utc_now()
        hit = tree.kill()
        level = binding[0] if binding is not None else None
        self._state.event = GuardEvent(
            stage=self.stage,
            reason=reason,
            peak_mb=_peak_mb(self._state.peak),
            ceiling_mb=self.ceiling_mb,
            at=at,
            series=self._state.series.finish(point),
            cgroup_mb=point[2],
            cgroup_limit_mb=None if level is None else round(level.limit / MIB, 1),
            cgroup_path=None if level is None else str(level.cgroup.path),
            pids_killed=hit,
        )
