"""The runtest protocol of a trial item: pytest's own, less the per-phase output capture.

A trial's work is its stage, a child process whose stdout and stderr already go through pipes
into the run folder (:mod:`.stages`). pytest's capture and log-capture plugins wrap each of an
item's three phases to catch what the *test function* prints or logs; around a trial they only
catch the harness itself, and they cost a fd swap and a tmpfile read per phase, a large share of
a short trial's cycle (docs/benchmark/PERFORMANCE.md). Worse, while they are active the
harness's own live lines (a long stage's progress) land in the captured section, not on the
terminal. So a trial item runs pytest's protocol (log start, setup, call, teardown, a report
per phase through ``pytest_runtest_makereport`` and ``pytest_runtest_logreport``, the
interactive-exception hook, log finish) with the ``pytest_runtest_setup/call/teardown`` hook
implementations of every plugin except those two: xdist, the terminal, junitxml, ``-x`` and
``--setup-show`` see a trial as they see any item.
"""

from __future__ import annotations

import bdb
from pathlib import Path
from typing import Any, Literal

import pytest

#: The plugins (by registered name) left out of a trial's setup, call and teardown phases.
PHASE_CAPTURE_PLUGINS = ("capturemanager", "logging-plugin")
_PHASE_HOOKS = {
    "setup": "pytest_runtest_setup",
    "call": "pytest_runtest_call",
    "teardown": "pytest_runtest_teardown",
}

Phase = Literal["setup", "call", "teardown"]


class TrialProtocol:
    """Runs trial items; the phase hook callers are built once per benchmark file."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self._callers: dict[Path, dict[str, Any]] = {}
        #: What a phase must not turn into a report: ``pytest.exit`` and, unless ``--pdb``
        #: wants it, Ctrl-C.
        self._reraise: tuple[type[BaseException], ...] = (pytest.exit.Exception,) + (
            () if config.getoption("usepdb", False) else (KeyboardInterrupt,)
        )

    def run(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """``runner.pytest_runtest_protocol`` for one trial item."""
        ihook = item.ihook  # computed per access: once here
        callers = self._callers.get(item.path)
        if callers is None:
            callers = self._callers[item.path] = self._phase_callers(ihook)
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        if not getattr(item, "_request", True):  # re-run (pytest-rerunfailures): a new request
            item._initrequest()  # type: ignore[attr-defined]
        try:
            setup = self._phase(item, ihook, callers, "setup")
            if setup.passed:
                setup_only = self.config.getoption("setuponly", False)
                if self.config.getoption("setupshow", False):
                    _show_item(item, add_space=not setup_only)
                if not setup_only:
                    self._phase(item, ihook, callers, "call")
            if item.session.shouldfail or item.session.shouldstop:
                nextitem = None  # tear everything down, so fixture teardown errors are reported
            self._phase(item, ihook, callers, "teardown", nextitem=nextitem)
        finally:  # even when a phase re-raised (Ctrl-C, pytest.exit), as pytest 9.2 does
            item._request = False  # type: ignore[attr-defined]
            item.funcargs = None  # type: ignore[attr-defined]
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)

    def _phase(
        self, item: pytest.Item, ihook: Any, callers: dict[str, Any], when: Phase, **kwargs: Any
    ) -> pytest.TestReport:
        hook = callers[_PHASE_HOOKS[when]]
        call = pytest.CallInfo.from_call(
            lambda: hook(item=item, **kwargs), when=when, reraise=self._reraise
        )
        report: pytest.TestReport = ihook.pytest_runtest_makereport(item=item, call=call)
        ihook.pytest_runtest_logreport(report=report)
        if _interactive(call, report):
            ihook.pytest_exception_interact(node=item, call=call, report=report)
        return report

    def _phase_callers(self, ihook: Any) -> dict[str, Any]:
        """The three phase hooks of ``ihook`` without the capture plugins' implementations.

        ``ihook`` knows which conftests apply to an item's path (pytest builds a new proxy per
        access where some do not), so the callers are kept per path, not per proxy.
        """
        manager = self.config.pluginmanager
        # Looked up here: the logging plugin registers itself late in pytest_configure.
        dropped = {
            plugin
            for name in PHASE_CAPTURE_PLUGINS
            if (plugin := manager.get_plugin(name)) is not None
        }
        callers = {}
        for name in _PHASE_HOOKS.values():
            applicable = {impl.plugin for impl in getattr(ihook, name).get_hookimpls()}
            every = {impl.plugin for impl in getattr(manager.hook, name).get_hookimpls()}
            callers[name] = manager.subset_hook_caller(
                name, remove_plugins=(every - applicable) | dropped
            )
        return callers


def _interactive(call: pytest.CallInfo[Any], report: pytest.TestReport) -> bool:
    """Whether the phase raised an error worth ``pytest_exception_interact`` (``--pdb``)."""
    if call.excinfo is None or hasattr(report, "wasxfail"):
        return False
    return not isinstance(call.excinfo.value, (pytest.skip.Exception, bdb.BdbQuit))


def _show_item(item: pytest.Item, *, add_space: bool) -> None:
    """``--setup-show``'s line for the item, between its setup and teardown lines."""
    writer = item.config.get_terminal_writer()
    writer.line()
    writer.write(" " * 8 + item.nodeid)
    used = sorted(getattr(item, "fixturenames", []))
    if used:
        writer.write(" (fixtures used: {})".format(", ".join(used)))
    if add_space:  # pytest 9.2: the space before the call phase's outcome letter
        writer.write(" ")
    writer.flush()
