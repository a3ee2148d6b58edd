"""Proof against the real kernel: the memory guard beats the OOM killer in a shared memory cgroup.

In a child memory cgroup (384 MiB hard limit, no swap) made under this process's own cgroup, an
innocent co-tenant holding 224 MiB shares the cgroup with a runaway allocator:

* without the guard the kernel OOM-kills the co-tenant (the biggest process), not the runaway;
* with the guard (stage ceiling 256 MiB, below the limit, which the runaway never reaches before
  the cgroup is full) the guard's cgroup line stops the runaway, the co-tenant survives and the
  cgroup's ``oom_kill`` counter does not move;
* without the guard but with ``child_preexec`` (oom_score_adj 1000), the kernel at least picks
  the runaway.

Each at 256 MiB/s and at up to 2 GiB/s. Needs root and a memory cgroup controller; skipped with
the reason elsewhere.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
from support.cgroups import ChildCgroup
from support.guarding import Sampling

from pytest_benchmark_agent.guards.cgroup import MIB, child_cgroup_unavailable
from pytest_benchmark_agent.guards.memory import REASON_CGROUP, MemoryGuard, child_preexec

UNAVAILABLE = child_cgroup_unavailable()
pytestmark = [
    pytest.mark.oom_fidelity,
    pytest.mark.skipif(
        UNAVAILABLE is not None, reason=f"needs root and a memory cgroup: {UNAVAILABLE}"
    ),
]

LIMIT_MB = 384
CO_TENANT_MB = 224
RUNAWAY_TOP_MB = 320  # fits alone, not beside the co-tenant
RATES_MB_S = [256, 2048]

# Touch MB MiB (8 MiB at a time), say so, then hold until killed.
CO_TENANT = """
import sys, time
chunks = [b"\\x01" * (8 << 20) for _ in range(int(sys.argv[1]) // 8)]
print("ready", flush=True)
time.sleep(600)
"""
# Make up to TOP MiB resident in 8 MiB steps paced at RATE MiB/s, then exit 0. MAP_POPULATE
# faults every page in during mmap (resident at once, as touching would) and is fast enough to
# reach 2 GiB/s on a small machine.
RUNAWAY = """
import mmap, sys, time
rate, top = float(sys.argv[1]), int(sys.argv[2])
flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE
chunks, t0 = [], time.monotonic()
for i in range(1, top // 8 + 1):
    chunks.append(mmap.mmap(-1, 8 << 20, flags=flags))
    time.sleep(max(0.0, t0 + i * 8 / rate - time.monotonic()))
"""


@pytest.fixture
def cgroup() -> Iterator[ChildCgroup]:
    with ChildCgroup(LIMIT_MB) as child:
        yield child


def start_co_tenant(cgroup: ChildCgroup) -> subprocess.Popen[str]:
    tenant = cgroup.popen(
        [sys.executable, "-c", CO_TENANT, str(CO_TENANT_MB)], stdout=subprocess.PIPE, text=True
    )
    assert tenant.stdout is not None and tenant.stdout.readline().strip() == "ready"
    return tenant


def start_runaway(cgroup: ChildCgroup, rate: int, *, preexec: bool) -> subprocess.Popen[str]:
    return cgroup.popen(
        [sys.executable, "-c", RUNAWAY, str(rate), str(RUNAWAY_TOP_MB)],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=child_preexec if preexec else None,
        text=True,
    )


def test_child_cgroup_has_a_hard_limit_without_swap_and_is_removed_on_failure() -> None:
    with pytest.raises(RuntimeError, match="boom"), ChildCgroup(64) as child:
        memory = child.memory
        assert memory is not None and memory.limit_bytes() == 64 * MIB
        if memory.version == 1:
            memsw = (child.path / "memory.memsw.limit_in_bytes").read_text()
            assert int(memsw) == 64 * MIB
        else:
            assert (child.path / "memory.swap.max").read_text().strip() == "0"
        sleeper = child.popen(["sleep", "60"])
        assert memory.pids() == [sleeper.pid]
        raise RuntimeError("boom")
    assert sleeper.wait() == -signal.SIGKILL
    assert not child.path.exists()


@pytest.mark.parametrize("rate", RATES_MB_S, ids=lambda r: f"{r}MiB_s")
def test_without_the_guard_the_kernel_kills_the_innocent_co_tenant(
    cgroup: ChildCgroup, rate: int
) -> None:
    memory = cgroup.memory
    assert memory is not None
    kills_before = memory.oom_kills()
    tenant = start_co_tenant(cgroup)
    runaway = start_runaway(cgroup, rate, preexec=False)
    assert runaway.wait() == 0  # the runaway got everything it asked for
    assert tenant.wait() == -signal.SIGKILL  # the neighbour paid for it
    assert memory.oom_kills() > kills_before


@pytest.mark.parametrize("rate", RATES_MB_S, ids=lambda r: f"{r}MiB_s")
def test_oom_score_adj_alone_makes_the_kernel_pick_the_runaway(
    cgroup: ChildCgroup, rate: int
) -> None:
    memory = cgroup.memory
    assert memory is not None
    kills_before = memory.oom_kills()
    tenant = start_co_tenant(cgroup)
    runaway = start_runaway(cgroup, rate, preexec=True)
    assert runaway.wait() == -signal.SIGKILL
    assert tenant.poll() is None
    assert memory.oom_kills() > kills_before


@pytest.mark.parametrize("rate", RATES_MB_S, ids=lambda r: f"{r}MiB_s")
def test_the_guard_stops_the_runaway_before_the_kernel_acts(cgroup: ChildCgroup, rate: int) -> None:
    memory = cgroup.memory
    assert memory is not None
    kills_before = memory.oom_kills()
    tenant = start_co_tenant(cgroup)
    runaway = start_runaway(cgroup, rate, preexec=True)
    guard = Sampling(MemoryGuard(runaway.pid, 256, stage="search", cgroup=memory))
    _, status, rusage = os.wait4(runaway.pid, 0)
    runaway.returncode = 0  # reaped above
    report = guard.stop()
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert report.event is not None and report.event.reason == REASON_CGROUP
    assert report.event.peak_mb < 256  # a tree-only guard would still be waiting
    assert report.event.cgroup_mb is not None and report.event.cgroup_mb < LIMIT_MB
    assert tenant.poll() is None, "the co-tenant must survive"
    assert memory.oom_kills() == kills_before
    assert report.oom_kills == 0
