"""A hard-limited child memory cgroup for the OOM-fidelity tests and the overshoot benchmark.

Test support, not engine code: the engine contains stages in unlimited cgroups of its own
(``engine/isolation.py``) and never sets a limit. Processes are started inside the child, because
moving a running process does not move the memory it has already charged.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.guards.cgroup import (
    MIB,
    CgroupMemory,
    child_cgroup_unavailable,
    read_words,
)


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
        if "memory" not in read_words(subtree):
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
