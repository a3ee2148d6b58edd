"""engine/protocol.py re-states pytest's runtest protocol for trial items; this checks that the
installed pytest still runs the protocol that copy follows, and that it is inside the range
pyproject.toml pins. A pytest release that changes the protocol fails here, naming what moved,
before a trial silently diverges from an ordinary item."""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import inspect
import re
from pathlib import Path

import _pytest.runner as runner
import pytest
import tomllib
from packaging.specifiers import SpecifierSet

REPO = Path(__file__).resolve().parent.parent

#: The steps of ``runtestprotocol`` and ``call_and_report`` that TrialProtocol re-states, in order:
#: the hooks they call, the options they read and the item state they reset. pytest 9.2 reads
#: ``setuponly`` first (``show_test_item`` gained ``add_space``) and resets the item in a
#: ``finally``; the copy follows that form, which behaves as 9.0's where nothing re-raises.
PROTOCOL_STEPS = {
    "9.0": [
        "_initrequest",
        "call_and_report",
        "getoption:setupshow",
        "show_test_item",
        "getoption:setuponly",
        "call_and_report",
        "shouldfail",
        "shouldstop",
        "call_and_report",
        "_request",
        "funcargs",
    ],
    "9.2": [
        "_initrequest",
        "call_and_report",
        "getoption:setuponly",
        "getoption:setupshow",
        "show_test_item",
        "call_and_report",
        "shouldfail",
        "shouldstop",
        "call_and_report",
        "_request",
        "funcargs",
    ],
}
REPORT_STEPS = [
    "pytest_runtest_setup",
    "pytest_runtest_call",
    "pytest_runtest_teardown",
    "from_call",
    "get_reraise_exceptions",
    "pytest_runtest_makereport",
    "pytest_runtest_logreport",
    "check_interactive_exception",
    "pytest_exception_interact",
]


def steps(function: object) -> list[str]:
    """The names a function's body calls, reads or assigns that the protocol depends on."""
    tree = ast.parse(inspect.getsource(function))
    out: list[str] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "getoption"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            out.append((node.lineno, node.col_offset, f"getoption:{node.args[0].value}"))
        elif isinstance(node, ast.Attribute) and (
            node.attr.startswith("pytest_")
            or node.attr in ("_initrequest", "shouldfail", "shouldstop", "from_call", "funcargs")
            or (node.attr == "_request" and isinstance(node.ctx, ast.Store))
        ):
            out.append((node.lineno, node.col_offset, node.attr))
        elif isinstance(node, ast.Name) and node.id in (
            "call_and_report",
            "show_test_item",
            "get_reraise_exceptions",
            "check_interactive_exception",
        ):
            out.append((node.lineno, node.col_offset, node.id))
    return [name for *_, name in sorted(out)]


def test_the_installed_pytest_runs_the_protocol_trial_items_follow() -> None:
    assert steps(runner.runtestprotocol) in PROTOCOL_STEPS.values(), (
        f"pytest {pytest.__version__} changed its runtest protocol: compare engine/protocol.py "
        f"with _pytest.runner.runtestprotocol ({steps(runner.runtestprotocol)})"
    )
    assert steps(runner.call_and_report) == REPORT_STEPS


def test_pytest_and_xdist_are_inside_the_pinned_range() -> None:
    pins = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    for name in ("pytest", "pytest-xdist"):
        spec = next(p for p in pins if re.match(rf"{re.escape(name)}\s*[<>=!~]", p))
        specifier = SpecifierSet(spec[len(name) :])
        assert "<" in str(specifier), f"{name} has no upper bound: {spec}"
        assert metadata.version(name) in specifier, f"{name} {metadata.version(name)}: {spec}"


def test_the_phase_hooks_the_copy_subsets_are_pytest_s_own() -> None:
    import _pytest.hookspec as hookspec

    from pytest_benchmark_agent.engine.protocol import _PHASE_HOOKS

    assert all(callable(getattr(hookspec, name, None)) for name in _PHASE_HOOKS.values())
