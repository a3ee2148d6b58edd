"""Issue 45, point 8: no outcome depends on the machine's load.

The host check watches other processes only on a busy machine, and imports psutil only then; a
session run by an interpreter without psutil (a project's own virtualenv) stopped with an
INTERNALERROR whenever the machine was busy, and passed on a quiet one.
"""

from __future__ import annotations

import sys

import pytest

from pytest_benchmark_agent.records import hostcheck


def test_a_busy_machine_is_watched_without_psutil(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import psutil`` fails (``None`` in ``sys.modules``); watching gives no process."""
    monkeypatch.setitem(sys.modules, "psutil", None)
    watched = hostcheck._start_watching()
    assert watched == []
    assert hostcheck._busy_processes(watched) == []


def test_a_busy_machine_is_watched_with_psutil() -> None:
    watched = hostcheck._start_watching()
    assert watched and all(process.pid != 0 for process in watched)
