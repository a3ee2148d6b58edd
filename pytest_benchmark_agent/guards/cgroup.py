"""Memory cgroups, v1 and v2: find a process's own, read usage, limit and OOM kills, make children.

The memory guard and the preflight check read the enclosing cgroup because the kernel's OOM killer
acts on the cgroup's total, not on any one process. :func:`child_cgroup_unavailable` says whether
a child cgroup can be made here (the engine's containment makes one per stage; the tests' and the
overshoot benchmark's hard-limited ``ChildCgroup`` lives in ``tests/support/cgroups.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MIB = 1024 * 1024
# v1 reports "no limit" as PAGE_COUNTER_MAX pages (about 2**63); anything this large is no limit.
_UNLIMITED_V1 = 1 << 60


@dataclass(frozen=True)
class Headroom:
    """How much more memory one cgroup of a lineage lets in: its limit minus its working set."""

    cgroup: CgroupMemory
    limit_bytes: int
    usage_bytes: int
    inactive_file_bytes: int

    @property
    def in_use_bytes(self) -> int:
        """The working set: usage minus the inactive page cache the kernel reclaims before OOM."""
        return max(0, self.usage_bytes - self.inactive_file_bytes)

    @property
    def free_bytes(self) -> int:
        return self.limit_bytes - self.in_use_bytes


@dataclass(frozen=True)
class CgroupMemory:
    """One memory cgroup directory (``version`` 1 or 2) in the hierarchy mounted at ``mount``."""

    path: Path
    version: int
    mount: Path

    @classmethod
    def of_self(
        cls,
        *,
        proc_root: str | os.PathLike[str] = "/proc",
        cgroup_root: str | os.PathLike[str] = "/sys/fs/cgroup",
    ) -> CgroupMemory | None:
        """This process's memory cgroup, or None where no memory controller is mounted."""
        return cls.of_pid("self", proc_root=proc_root, cgroup_root=cgroup_root)

    @classmethod
    def of_pid(
        cls,
        pid: int | str,
        *,
        proc_root: str | os.PathLike[str] = "/proc",
        cgroup_root: str | os.PathLike[str] = "/sys/fs/cgroup",
    ) -> CgroupMemory | None:
        """The memory cgroup of ``pid`` from ``<proc_root>/<pid>/cgroup``; v1 wins in hybrid mode.

        The directory is looked up under the usual mount points below ``cgroup_root``
        (``memory/`` or a co-mount such as ``cpu,memory/`` for v1; the root or ``unified/`` for
        v2). Where a container mounts its own cgroup as the root of the hierarchy, the path's
        leading components are dropped until the directory exists.
        """
        try:
            lines = Path(proc_root, str(pid), "cgroup").read_text().splitlines()
        except OSError:
            return None
        root = Path(cgroup_root)
        v2_path: str | None = None
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if controllers == "":
                v2_path = path
            elif "memory" in controllers.split(","):
                for mount in _v1_mounts(root):
                    found = _locate(mount, path, "memory.usage_in_bytes")
                    if found is not None:
                        return cls(found, 1, mount)
        if v2_path is not None:
            for mount in (root, root / "unified"):
                if "memory" in read_words(mount / "cgroup.controllers"):
                    found = _locate(mount, v2_path, "cgroup.procs")
                    if found is not None:
                        return cls(found, 2, mount)
        return None

    @property
    def usage_file(self) -> Path:
        """The file holding the cgroup's usage in bytes (kept open by the guard)."""
        return self.path / ("memory.usage_in_bytes" if self.version == 1 else "memory.current")

    def usage_bytes(self) -> int:
        """Memory charged to the cgroup and its descendants, page cache included."""
        return int(self.usage_file.read_text())

    def limit_bytes(self) -> int | None:
        """The hard limit, or None where there is none (v2's root has no limit file)."""
        name = "memory.limit_in_bytes" if self.version == 1 else "memory.max"
        try:
            text = (self.path / name).read_text().strip()
        except FileNotFoundError:
            return None
        if text == "max":
            return None
        value = int(text)
        return None if value >= _UNLIMITED_V1 else value

    def inactive_file_bytes(self) -> int:
        """Inactive page cache, which the kernel reclaims before it OOM-kills anything."""
        key = "total_inactive_file" if self.version == 1 else "inactive_file"
        return _stat_field(self.path / "memory.stat", key)

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer has killed for this cgroup.

        ``memory.failcnt`` stays 0 through OOM kills on some kernels; this counter moves.
        """
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        return _stat_field(self.path / name, "oom_kill")

    def parent(self) -> CgroupMemory | None:
        if self.path == self.mount:
            return None
        return CgroupMemory(self.path.parent, self.version, self.mount)

    def lineage(self) -> list[CgroupMemory]:
        """This cgroup and its ancestors up to the hierarchy's root: any of them can OOM."""
        chain: list[CgroupMemory] = []
        node: CgroupMemory | None = self
        while node is not None:
            chain.append(node)
            node = node.parent()
        return chain

    def headroom(self) -> Headroom | None:
        """The tightest limited level of the lineage, or None where no level has a limit."""
        tightest: Headroom | None = None
        for node in self.lineage():
            limit = node.limit_bytes()
            if limit is None:
                continue
            room = Headroom(node, limit, node.usage_bytes(), node.inactive_file_bytes())
            if tightest is None or room.free_bytes < tightest.free_bytes:
                tightest = room
        return tightest

    def pids(self) -> list[int]:
        """The processes directly in this cgroup."""
        return [int(word) for word in read_words(self.path / "cgroup.procs")]


def _v1_mounts(root: Path) -> list[Path]:
    """Directories under ``root`` that mount the v1 memory controller, ``memory`` first."""
    found = [root / "memory"] if (root / "memory" / "memory.usage_in_bytes").exists() else []
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return found
    for entry in entries:
        if entry.name != "memory" and "memory" in entry.name.split(","):
            found.append(entry)
    return found


def _locate(mount: Path, path: str, marker: str) -> Path | None:
    """``mount`` joined with ``path``, dropping leading components until ``marker`` is there."""
    parts = [p for p in path.split("/") if p]
    for start in range(len(parts) + 1):
        candidate = mount.joinpath(*parts[start:])
        if (candidate / marker).exists():
            return candidate
    return None


def read_words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def _stat_field(path: Path, key: str) -> int:
    """The value of ``key`` in a ``name value`` per line file such as memory.stat; 0 if absent."""
    for line in path.read_text().splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


def child_cgroup_unavailable(parent: CgroupMemory | None = None) -> str | None:
    """Why a child memory cgroup cannot be made here, or None when it can."""
    if os.geteuid() != 0:
        return f"making a memory cgroup needs root (this process runs as uid {os.geteuid()})"
    parent = parent or CgroupMemory.of_self()
    if parent is None:
        return "no memory cgroup controller is mounted under /sys/fs/cgroup"
    if not os.access(parent.path, os.W_OK):
        return f"the memory cgroup {parent.path} is not writable"
    if parent.version == 2 and parent.path != parent.mount:
        enabled = read_words(parent.path / "cgroup.subtree_control")
        if "memory" not in enabled and parent.pids():
            return (
                f"cgroup v2 {parent.path} holds processes and does not delegate the memory "
                "controller to children (cgroup.subtree_control lacks 'memory')"
            )
    return None
