"""Preflight arithmetic and cgroup discovery, read from temporary trees shaped like the kernel's.

Each test writes a ``proc/`` (``self/cgroup``, ``meminfo``) and a ``sys/fs/cgroup/`` tree for
cgroup v1 or v2, and points ``check_resources`` / ``CgroupMemory.of_self`` at them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_benchmark_agent.engine.preflight import check_resources
from pytest_benchmark_agent.guards.cgroup import MIB, CgroupMemory

V1_UNLIMITED = "9223372036854771712"


def make_tree(
    root: Path,
    version: int,
    *,
    mem_available_mb: int,
    levels: dict[str, tuple[str, int, int]],
    own: str = "/jobs/me",
) -> tuple[Path, Path]:
    """Write a fake /proc and /sys/fs/cgroup; ``levels`` maps a cgroup path to
    (limit: MiB number or "max", usage MiB, inactive file MiB). Returns (proc_root, cgroup_root)."""
    proc = root / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text(
        "MemTotal:       25000000 kB\n"
        "MemFree:         1000000 kB\n"
        f"MemAvailable:   {mem_available_mb * 1024:>8} kB\n"
    )
    cgroup_root = root / "sys" / "fs" / "cgroup"
    if version == 1:
        (proc / "self" / "cgroup").write_text(
            f"5:cpu,cpuacct:/\n4:memory:{own}\n1:name=systemd:/\n0::/\n"
        )
        mount = cgroup_root / "memory"
    else:
        (proc / "self" / "cgroup").write_text(f"0::{own}\n")
        mount = cgroup_root
        mount.mkdir(parents=True)
        (mount / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    for rel, (limit, usage, inactive) in levels.items():
        d = mount.joinpath(*[p for p in rel.split("/") if p])
        d.mkdir(parents=True, exist_ok=True)
        (d / "cgroup.procs").write_text("")
        if version == 1:
            lim = V1_UNLIMITED if limit == "max" else str(int(limit) * MIB)
            (d / "memory.limit_in_bytes").write_text(lim + "\n")
            (d / "memory.usage_in_bytes").write_text(f"{usage * MIB}\n")
            (d / "memory.stat").write_text(
                f"cache 0\nrss 0\ninactive_file 1\ntotal_inactive_file {inactive * MIB}\n"
            )
            (d / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
        else:
            if rel != "/":  # v2's root has no memory.max / memory.current
                lim = "max" if limit == "max" else str(int(limit) * MIB)
                (d / "memory.max").write_text(lim + "\n")
                (d / "memory.current").write_text(f"{usage * MIB}\n")
            (d / "memory.stat").write_text(f"anon 0\nfile 0\ninactive_file {inactive * MIB}\n")
            (d / "memory.events").write_text("low 0\nhigh 0\nmax 5\noom 2\noom_kill 2\n")
    return proc, cgroup_root


@pytest.fixture(params=[1, 2], ids=["cgroup-v1", "cgroup-v2"])
def version(request: pytest.FixtureRequest) -> int:
    return request.param


def levels_with(
    own_limit: str | int,
    usage: int,
    inactive: int = 0,
    parent_limit: str | int = "max",
    parent_usage: int = 0,
):
    return {
        "/": ("max", 9000, 0),
        "/jobs": (parent_limit, parent_usage, 0),
        "/jobs/me": (own_limit, usage, inactive),
    }


def test_discovers_own_cgroup_and_reads_it(tmp_path: Path, version: int) -> None:
    proc, cg = make_tree(
        tmp_path, version, mem_available_mb=20000, levels=levels_with(4096, 1000, inactive=200)
    )
    found = CgroupMemory.of_self(proc_root=proc, cgroup_root=cg)
    assert found is not None
    assert found.version == version
    assert found.path.name == "me"
    assert found.limit_bytes() == 4096 * MIB
    assert found.usage_bytes() == 1000 * MIB
    assert found.inactive_file_bytes() == 200 * MIB
    assert found.oom_kills() == (3 if version == 1 else 2)
    assert [c.path.name for c in found.lineage()][:2] == ["me", "jobs"]
    room = found.headroom()
    assert room is not None and room.free_bytes == (4096 - 800) * MIB


def test_container_view_drops_leading_path_components(tmp_path: Path) -> None:
    """Without a cgroup namespace the container's cgroup is mounted as the hierarchy's root."""
    proc, cg = make_tree(
        tmp_path, 1, mem_available_mb=20000, levels={"/": (2048, 100, 0)}, own="/docker/abc123"
    )
    found = CgroupMemory.of_self(proc_root=proc, cgroup_root=cg)
    assert found is not None and found.path == cg / "memory"
    assert found.limit_bytes() == 2048 * MIB


def test_no_memory_controller_is_none(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text("3:cpu:/\n")
    assert CgroupMemory.of_self(proc_root=proc, cgroup_root=tmp_path / "nothing") is None


def test_fits_with_room(tmp_path: Path, version: int) -> None:
    proc, cg = make_tree(tmp_path, version, mem_available_mb=20000, levels=levels_with(8192, 1000))
    result = check_resources(2048, None, [], False, proc_root=proc, cgroup_root=cg)
    assert result.ok and result.caveat is None
    assert "limit 8192.0 MiB - in use 1000.0 MiB" in result.message
    assert "= 7192.0 MiB free" in result.message
    assert "need 2048 MiB (resources.mem_mb) + 10% margin = 2252.8 MiB" in result.message


def test_cgroup_tighter_than_machine_does_not_fit(tmp_path: Path, version: int) -> None:
    proc, cg = make_tree(tmp_path, version, mem_available_mb=20000, levels=levels_with(3072, 1500))
    result = check_resources(2048, None, [], accept_risk=True, proc_root=proc, cgroup_root=cg)
    assert not result.ok
    assert "limit 3072.0 MiB - in use 1500.0 MiB" in result.message
    assert "available: 1572.0 MiB" in result.message
    assert "need 2048 MiB > 1572.0 MiB available" in result.message


def test_inactive_page_cache_counts_as_free(tmp_path: Path, version: int) -> None:
    proc, cg = make_tree(
        tmp_path, version, mem_available_mb=20000, levels=levels_with(3072, 2500, inactive=1500)
    )
    result = check_resources(1024, None, [], False, proc_root=proc, cgroup_root=cg)
    assert result.ok, result.message
    assert "(usage 2500.0 MiB - inactive file 1500.0 MiB) = 2072.0 MiB free" in result.message


def test_tight_headroom_needs_accept_risk_then_caveat(tmp_path: Path, version: int) -> None:
    # 2150 MiB free for 2048 MiB: fits, with 5% headroom, under the 10% margin
    proc, cg = make_tree(tmp_path, version, mem_available_mb=20000, levels=levels_with(3150, 1000))
    refused = check_resources(2048, None, [], False, proc_root=proc, cgroup_root=cg)
    assert not refused.ok and refused.caveat is None
    assert "headroom 5.0% is under the 10% margin" in refused.message
    assert "--bench-accept-risk" in refused.message
    accepted = check_resources(2048, None, [], True, proc_root=proc, cgroup_root=cg)
    assert accepted.ok
    assert accepted.caveat is not None and "headroom 5.0%" in accepted.caveat


def test_machine_tighter_than_unlimited_cgroup(tmp_path: Path, version: int) -> None:
    proc, cg = make_tree(tmp_path, version, mem_available_mb=1000, levels=levels_with("max", 500))
    result = check_resources(2048, None, [], False, proc_root=proc, cgroup_root=cg)
    assert not result.ok
    assert "no limit on it or above it" in result.message
    assert "MemAvailable 1000.0 MiB" in result.message
    assert "need 2048 MiB > 1000.0 MiB available" in result.message


def test_ancestor_limit_is_the_binding_one(tmp_path: Path, version: int) -> None:
    proc, cg = make_tree(
        tmp_path,
        version,
        mem_available_mb=20000,
        levels=levels_with("max", 100, parent_limit=4096, parent_usage=3000),
    )
    result = check_resources(2048, None, [], False, proc_root=proc, cgroup_root=cg)
    assert not result.ok
    assert f"{cg}" in result.message and "jobs: limit 4096.0 MiB" in result.message
    assert "need 2048 MiB > 1096.0 MiB available" in result.message


def test_disk_arithmetic_on_real_filesystems(tmp_path: Path) -> None:
    vfs = os.statvfs(tmp_path)
    free_mb = vfs.f_bavail * vfs.f_frsize / MIB
    cache, run = tmp_path / "cache" / "sig", tmp_path / "runs" / "r1"  # not made yet
    ok = check_resources(None, 1, [cache, run], False)
    assert ok.ok and "same filesystem as above" in ok.message
    too_big = check_resources(None, free_mb * 2, [cache, run], True)
    assert not too_big.ok and "does not fit" in too_big.message
    tight = check_resources(None, free_mb / 1.05, [cache], False)
    assert not tight.ok and "under the 10% margin" in tight.message
    assert check_resources(None, free_mb / 1.05, [cache], True).caveat is not None


def test_bad_input_names_the_field() -> None:
    with pytest.raises(ValueError, match="resources.mem_mb"):
        check_resources(0, None, [], False)
    with pytest.raises(ValueError, match="resources.disk_mb"):
        check_resources(None, -5, [Path("/")], False)
    with pytest.raises(ValueError, match="no folders"):
        check_resources(None, 10, [], False)


def test_nothing_declared_passes(tmp_path: Path) -> None:
    result = check_resources(None, None, [], False)
    assert result.ok and "no resources.mem_mb declared" in result.message
