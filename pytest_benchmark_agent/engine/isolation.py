"""Quiet host: on one host, a measure stage runs alone.

A measure stage holds the host's lock exclusively while its command runs; a prep stage holds it
shared. So under ``pytest -n N`` preps of different workers build in parallel, but no prep and
no other measurement of this session runs on the host while a measurement does. The lock is an
``flock`` under the data directory, so a crashed worker releases it. ``--bench-isolation=none``
turns it off (and the run is tagged with that caveat).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
from collections.abc import Iterator
from pathlib import Path

from pytest_benchmark_agent.records.fsutil import open_creating

POLICIES = ("host", "none")
CAVEAT_NONE = (
    "isolation 'none': measurements may have overlapped other stages of this session "
    "on the same host"
)


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
