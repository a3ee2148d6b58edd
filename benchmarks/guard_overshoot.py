"""How far past its ceiling a runaway stage gets before the memory guard kills it, and what the
guard costs, for several sampling policies and allocation rates.

Each trial starts a runaway allocator (resident memory in 4 MiB steps paced at the requested
rate; from 2 GiB/s up, two forked processes of half the rate each) the way the engine starts a
stage, inside a fresh child memory cgroup with a generous limit when this machine allows one
(root + memory controller). The cgroup's own high-water mark (``memory.max_usage_in_bytes`` /
``memory.peak``) then gives the true peak, independent of the guard's sampling; without a cgroup
only the overshoot the guard saw is shown.

Columns: ``seen`` is the tree RSS at the breaching sample minus the ceiling; ``true`` is the
cgroup's peak minus the ceiling (less the constant gap between cgroup usage and tree RSS);
``lag`` is the overshoot over the rate the runaway really got, i.e. the guard's detection delay,
which predicts the overshoot at other rates (this machine is shared, so the rate got can fall
short of the rate asked); ``cpu %`` is the guard thread's CPU time over the trial's wall time, in
% of one core. A second table holds a stage still for a few seconds near its ceiling (the worst
case for an adaptive policy) and far below it (the usual case). A third (with a cgroup) puts the
runaway beside an innocent co-tenant in a small cgroup, guarded by the stage tree alone or by
the tree and the cgroup, and counts who survives. A fourth shows what the reads of one sample
cost.

Run: ``python benchmarks/guard_overshoot.py [--reps 3] [--hold-s 3]`` (about two minutes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from pytest_benchmark_agent.guards.cgroup import MIB, CgroupMemory, child_cgroup_unavailable
from pytest_benchmark_agent.guards.memory import (
    GuardReport,
    MemoryGuard,
    Pacing,
    _ProcessTree,
    child_preexec,
)

# The hard-limited child cgroup and the threaded sampling are test support, shared with the tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.cgroups import ChildCgroup  # noqa: E402
from support.guarding import Sampling  # noqa: E402

# PROCS processes (forked, so the guard must see the tree) together make TOP MiB resident at
# RATE MiB/s in 4 MiB steps; MAP_POPULATE faults the pages in during mmap, fast enough for 2 GiB/s.
RUNAWAY = """
import mmap, os, sys, time
rate, top, procs = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for _ in range(procs - 1):
    if os.fork() == 0:
        break
flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE
chunks, t0 = [], time.monotonic()
for i in range(1, top // procs // 4 + 1):
    chunks.append(mmap.mmap(-1, 4 << 20, flags=flags))
    time.sleep(max(0.0, t0 + i * 4 * procs / rate - time.monotonic()))
"""
HOLDER = """
import sys, time
chunks = [b"\\x01" * (4 << 20) for _ in range(int(sys.argv[1]) // 4)]
print("ready", flush=True)
time.sleep(float(sys.argv[2]))
"""


@dataclass(frozen=True)
class Policy:
    name: str
    min_s: float
    max_s: float

    def guard(self, pid: int, ceiling_mb: float, cgroup: CgroupMemory | None) -> MemoryGuard:
        return MemoryGuard(
            pid,
            ceiling_mb,
            stage="bench",
            cgroup=cgroup,
            pacing=Pacing(min_interval_s=self.min_s, max_interval_s=self.max_s),
        )


POLICIES = [
    Policy("fixed 100 ms", 0.1, 0.1),
    Policy("fixed 50 ms", 0.05, 0.05),
    Policy("fixed 20 ms", 0.02, 0.02),
    Policy("fixed 10 ms", 0.01, 0.01),
    Policy("fixed 5 ms", 0.005, 0.005),
    Policy("adaptive 10-100 ms (default)", 0.01, 0.1),
    Policy("adaptive 5-100 ms", 0.005, 0.1),
]
RATES_MB_S = [256, 1024, 2048]


def cgroup_peak(memory: CgroupMemory) -> int | None:
    name = "memory.max_usage_in_bytes" if memory.version == 1 else "memory.peak"
    try:
        return int((memory.path / name).read_text())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class Trial:
    seen_mb: float
    true_mb: float | None
    achieved_mb_s: float

    @property
    def lag_ms(self) -> float:
        past = self.true_mb if self.true_mb is not None else self.seen_mb
        return 1000 * max(0.0, past) / self.achieved_mb_s

    samples: int
    cpu_pct: float


def run_guarded(
    argv: list[str], policy: Policy, ceiling_mb: float, child: ChildCgroup | None
) -> tuple[GuardReport, subprocess.Popen[bytes]]:
    """Start ``argv`` as the engine starts a stage (in ``child`` if given) and guard it."""
    kwargs = dict(start_new_session=True, stdout=subprocess.DEVNULL)
    if child is not None:
        proc = child.popen(argv, preexec_fn=child_preexec, **kwargs)
    else:
        proc = subprocess.Popen(argv, preexec_fn=child_preexec, **kwargs)
    guard = policy.guard(proc.pid, ceiling_mb, None if child is None else child.memory)
    sampling = Sampling(guard)
    _, _, rusage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped above
    return sampling.stop(), proc


def runaway_trial(policy: Policy, rate: int, ceiling_mb: float, use_cgroup: bool) -> Trial:
    procs = 2 if rate >= 2048 else 1
    argv = [sys.executable, "-c", RUNAWAY, str(rate), str(int(ceiling_mb * 4)), str(procs)]
    if use_cgroup:
        with ChildCgroup(ceiling_mb * 8) as child:
            report, _ = run_guarded(argv, policy, ceiling_mb, child)
            assert child.memory is not None
            peak = cgroup_peak(child.memory)
    else:
        report, _ = run_guarded(argv, policy, ceiling_mb, None)
        peak = None
    event = report.event
    if event is None:
        raise RuntimeError(f"{policy.name} at {rate} MiB/s: the guard never fired")
    last = event.series[-1]
    true_mb = None
    if peak is not None and last[2] is not None:
        gap = last[2] - last[1]  # cgroup usage the tree's RSS does not show (page tables, ...)
        true_mb = peak / MIB - gap - ceiling_mb
    start = next(p for p in event.series if p[1] >= ceiling_mb / 4)
    achieved = (last[1] - start[1]) / max(1e-3, last[0] - start[0])
    return Trial(
        seen_mb=event.peak_mb - ceiling_mb,
        true_mb=true_mb,
        achieved_mb_s=achieved,
        samples=report.n_samples,
        cpu_pct=100 * report.cpu_s / report.wall_s,
    )


def shared_cgroup_trial(rate: int, watch_cgroup: bool, raise_adj: bool) -> tuple[bool, int, str]:
    """A runaway (ceiling 256 MiB) beside a 224 MiB co-tenant in a 384 MiB cgroup.

    Returns whether the co-tenant survived, the cgroup's new OOM kills and what stopped the
    runaway. A tree-only guard (``watch_cgroup`` False) never sees 256 MiB before the cgroup is
    full; ``raise_adj`` starts the runaway with ``child_preexec`` (oom_score_adj 1000).
    """
    with ChildCgroup(384) as child:
        memory = child.memory
        assert memory is not None
        kills = memory.oom_kills()
        tenant = child.popen([sys.executable, "-c", HOLDER, "224", "60"], stdout=subprocess.PIPE)
        assert tenant.stdout is not None
        tenant.stdout.readline()
        runaway = [sys.executable, "-c", RUNAWAY, str(rate), "320", "1"]
        proc = child.popen(
            runaway, preexec_fn=child_preexec if raise_adj else None, start_new_session=True
        )
        guard = Sampling(MemoryGuard(proc.pid, 256, "bench", memory if watch_cgroup else None))
        proc.wait()
        report = guard.stop()
        survived = tenant.poll() is None
        stopped_by = report.event.reason if report.event else f"exit {proc.returncode}"
        return survived, memory.oom_kills() - kills, stopped_by


def steady_cpu(policy: Policy, hold_mb: int, ceiling_mb: float, hold_s: float) -> float:
    """Guard CPU (% of a core) while a stage holds ``hold_mb`` still for ``hold_s``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(hold_mb), str(hold_s)],
        start_new_session=True,
        stdout=subprocess.PIPE,
        preexec_fn=child_preexec,
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    guard = Sampling(policy.guard(proc.pid, ceiling_mb, CgroupMemory.of_self()))
    proc.wait()
    report = guard.stop()
    if report.event is not None:
        raise RuntimeError(f"{policy.name}: the guard fired on a stage under its ceiling")
    return 100 * report.cpu_s / report.wall_s


def per_read_costs() -> list[tuple[str, float]]:
    """Microseconds per read for what one sample can do (CPU time of this thread)."""
    me = os.getpid()
    fd_statm = os.open(f"/proc/{me}/statm", os.O_RDONLY)
    own = CgroupMemory.of_self()
    costs: list[tuple[str, Callable[[], object], int]] = [
        ("statm of one process (open descriptor)", lambda: os.pread(fd_statm, 128, 0), 20000),
    ]
    if own is not None:
        fd_cg = os.open(own.usage_file, os.O_RDONLY)
        costs.append(("cgroup usage file (open descriptor)", lambda: os.pread(fd_cg, 64, 0), 20000))
        costs.append(("cgroup memory.stat (confirm near the line)", own.inactive_file_bytes, 2000))
    tree = _ProcessTree(me, None if own is None else own.path / "cgroup.procs")
    tree.discover(full=True)
    costs.append(("own cgroup's procs, new pids only (every 25 ms)", tree.discover, 2000))
    costs.append(
        ("/proc listing, new pids only (every 1 s)", lambda: tree.discover(full=True), 2000)
    )
    costs.append(
        (
            "/proc full scan, every pid's stat (at start)",
            lambda: _ProcessTree(me, None).discover(full=True),
            200,
        )
    )
    walk = psutil.Process(me)
    costs.append(
        (
            "psutil tree walk + memory_info",
            lambda: [c.memory_info().rss for c in walk.children(recursive=True)],
            200,
        )
    )
    out = []
    for name, fn, n in costs:
        t0 = time.thread_time()
        for _ in range(n):
            try:
                fn()
            except psutil.NoSuchProcess:
                pass
        out.append((name, (time.thread_time() - t0) / n * 1e6))
    tree.close()
    return out


def fmt(values: list[float]) -> str:
    return f"{statistics.median(values):6.1f} / {max(values):6.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3, help="trials per policy and rate")
    parser.add_argument("--ceiling-mb", type=float, default=256.0)
    parser.add_argument("--hold-s", type=float, default=3.0, help="steady-state hold time")
    args = parser.parse_args()
    reason = child_cgroup_unavailable()
    use_cgroup = reason is None
    print(
        f"# guard overshoot: ceiling {args.ceiling_mb:g} MiB, {args.reps} trials per cell,"
        f" {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    )
    print(
        "true peak from the child cgroup's high-water mark"
        if use_cgroup
        else f"no child cgroup ({reason}): only the overshoot the guard saw"
    )
    print()
    print(
        "| policy | rate asked MiB/s | rate got MiB/s | past ceiling seen MiB (median / max)"
        " | past ceiling true MiB (median / max) | lag ms (median / max) | samples"
        " | guard cpu % (whole trial) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for policy in POLICIES:
        for rate in RATES_MB_S:
            trials = [
                runaway_trial(policy, rate, args.ceiling_mb, use_cgroup) for _ in range(args.reps)
            ]
            true = [t.true_mb for t in trials if t.true_mb is not None]
            got = statistics.median(t.achieved_mb_s for t in trials)
            print(
                f"| {policy.name} | {rate} | {got:.0f}"
                f" | {fmt([t.seen_mb for t in trials])}"
                f" | {fmt(true) if true else 'n/a'}"
                f" | {fmt([t.lag_ms for t in trials])}"
                f" | {statistics.median(t.samples for t in trials):.0f}"
                f" | {statistics.median(t.cpu_pct for t in trials):.2f} |",
                flush=True,
            )
    if use_cgroup:
        print()
        print(
            "| guard watches | runaway oom_score_adj | rate asked MiB/s | co-tenant survived"
            " | kernel OOM kills | runaway stopped by |"
        )
        print("|---|---|---|---|---|---|")
        for watch, adj in ((False, False), (False, True), (True, True)):
            for rate in (256, 2048):
                runs = [shared_cgroup_trial(rate, watch, adj) for _ in range(args.reps)]
                stops = sorted({r[2] for r in runs})
                print(
                    f"| {'tree + cgroup' if watch else 'tree only'} | {1000 if adj else 0}"
                    f" | {rate} | {sum(r[0] for r in runs)}/{len(runs)}"
                    f" | {sum(r[1] for r in runs)} | {', '.join(stops)} |",
                    flush=True,
                )
    print()
    print(
        f"| policy | cpu % holding 95% of the ceiling for {args.hold_s:g} s"
        f" | cpu % holding 50 MiB under a 16 GiB ceiling |"
    )
    print("|---|---|---|")
    for policy in POLICIES:
        near = steady_cpu(policy, int(args.ceiling_mb * 0.95), args.ceiling_mb, args.hold_s)
        far = steady_cpu(policy, 48, 16384, args.hold_s)
        print(f"| {policy.name} | {near:.2f} | {far:.2f} |", flush=True)
    print()
    print("| one read | CPU µs |")
    print("|---|---|")
    for name, micros in per_read_costs():
        print(f"| {name} | {micros:.1f} |")


if __name__ == "__main__":
    main()
