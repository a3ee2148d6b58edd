"""Drive a :class:`.MemoryGuard` from a thread, for tests that start a process themselves.

The engine drives a guard from the loop that waits for its stage (``engine/stages.py``):
``begin()``, ``sample()`` whenever the interval it returned has passed, ``finish()``. This driver
makes exactly those calls, so a test exercises the guard as the engine runs it.
"""

from __future__ import annotations

import threading

from pytest_benchmark_agent.guards.memory import GuardReport, MemoryGuard


class Sampling:
    """A guard sampled in a daemon thread until :meth:`stop`."""

    def __init__(self, guard: MemoryGuard) -> None:
        self.guard = guard
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._report: GuardReport | None = None
        guard.begin()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="guard-sampling")
        self._thread.start()

    def _loop(self) -> None:
        try:
            while True:
                interval = self.guard.sample()
                if interval is None or self._stop.wait(interval):
                    return
        except BaseException as error:  # raised again by stop(): a guard never fails silently
            self._error = error

    def stop(self) -> GuardReport:
        """Stop sampling and report what was seen (the same report on a second call)."""
        if self._report is None:
            self._stop.set()
            self._thread.join()
            self._report = self.guard.finish()
        if self._error is not None:
            raise self._error
        return self._report
