"""Memory cgroups, v1 and v2: find a process's own, read usage, limit and OOM kills, make children.

The memory guard and the preflight check read the enclosing cgroup because the kernel's OOM killer
acts on the cgroup's total, not on any one process. ``ChildCgroup`` makes a hard-limited child
cgroup under this process's own one (root only) for the OOM-fidelity tests and the overshoot
benchmark; processes are started inside it, because moving a running process does not move the
memory it has already charged.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
                if "memory" in _read_words(mount / "cgroup.controllers"):
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
        return [int(word) for word in _read_words(self.path / "cgroup.procs")]


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


def _read_words(path: Path) -> list[str]:
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
        enabled = _read_words(parent.path / "cgroup.subtree_control")
        if "memory" not in enabled and parent.pids():
            return (
                f"cgroup v2 {parent.path} holds processes and does not delegate the memory "
                "controller to children (cgroup.subtree_control lacks 'memory')"
            )
    return None


class ChildCgroup:
    """A child memory cgroup with a hard limit and no swap, made under this process's own.

    Use as a context manager: it is created on entry and, on exit (failure included), every
    process left in it is killed and the directory removed.
    """

    def __init__(self, limit_mb: float, *, parent: CgroupMemory | None = None) -> None:
        if limit_mb <= 0:
            raise ValueError(f"ChildCgroup: limit_mb must be > 0 MiB, got {limit_mb}")
        self.limit_bytes = int(limit_mb * MIB)
        self._parent = parent
        self.memory: CgroupMemory | None = None

    def __enter__(self) -> ChildCgroup:
        reason = child_cgroup_unavailable(self._parent)
        if reason is not None:
            raise PermissionError(f"cannot make a child memory cgroup: {reason}")
        parent = self._parent or CgroupMemory.of_self()
        assert parent is not None  # child_cgroup_unavailable checked it
        path = parent.path / f"pba-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        path.mkdir()
        self.memory = CgroupMemory(path, parent.version, parent.mount)
        try:
            self._set_limit(parent)
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    @property
    def path(self) -> Path:
        return self._require().path

    def _require(self) -> CgroupMemory:
        if self.memory is None:
            raise RuntimeError("ChildCgroup is used outside its `with` block")
        return self.memory

    def _set_limit(self, parent: CgroupMemory) -> None:
        path = self._require().path
        if parent.version == 1:
            (path / "memory.limit_in_bytes").write_text(str(self.limit_bytes))
            memsw = path / "memory.memsw.limit_in_bytes"
            if memsw.exists():  # absent when the kernel runs without swap accounting
                memsw.write_text(str(self.limit_bytes))
            return
        subtree = parent.path / "cgroup.subtree_control"
        if "memory" not in _read_words(subtree):
            subtree.write_text("+memory")
        (path / "memory.max").write_text(str(self.limit_bytes))
        swap = path / "memory.swap.max"
        if swap.exists():
            swap.write_text("0")

    def join(self) -> None:
        """Move the calling process into the cgroup; meant as (part of) a Popen ``preexec_fn``."""
        with open(self.path / "cgroup.procs", "w") as procs:
            procs.write(str(os.getpid()))

    def popen(
        self,
        args: str | Sequence[str],
        *,
        preexec_fn: Callable[[], None] | None = None,
        **kwargs: Any,
    ) -> subprocess.Popen[Any]:
        """Start a process inside the cgroup, so that all its memory is charged here."""
        self._require()

        def enter() -> None:
            self.join()
            if preexec_fn is not None:
                preexec_fn()

        return subprocess.Popen(args, preexec_fn=enter, **kwargs)

    def remove(self, timeout_s: float = 10.0) -> None:
        """Kill every process left in the cgroup, wait for them to leave, remove the directory."""
        if self.memory is None or not self.memory.path.exists():
            return
        deadline = time.monotonic() + timeout_s
        while True:
            pids = self.memory.pids()
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                self.memory.path.rmdir()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"could not remove cgroup {self.memory.path}: processes {pids} remain"
                    ) from None
                time.sleep(0.02)
