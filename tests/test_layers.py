"""The package graph is layered and has no import cycle (docs/benchmark/DESIGN.md, "Layers").

The layers are an import-linter contract in pyproject.toml, which excuses no import; grimp,
which builds the graph for it, counts imports inside functions too. No module imports itself
through others, and no package does: the packages' graph is checked here on its own, so a cycle
the contract's layer order would not name (two packages reaching each other through a third's
function-level import) still fails.
"""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest
import tomllib
from importlinter.cli import EXIT_STATUS_SUCCESS, lint_imports

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "pytest_benchmark_agent"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(PACKAGE, exclude_type_checking_imports=True, cache_dir=None)


def test_the_layers_contract_is_kept(capsys: pytest.CaptureFixture[str]) -> None:
    status = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    report = capsys.readouterr().out
    assert status == EXIT_STATUS_SUCCESS, report
    assert "1 kept, 0 broken" in report


def test_the_contract_excuses_no_import() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [contract] = config["contracts"]
    assert "ignore_imports" not in contract and "ignore_imports" not in config


def package_of(module: str) -> str:
    """``pytest_benchmark_agent.config.gate1`` -> ``config``; a top-level module is its own."""
    return module.split(".")[1]


def package_cycles(graph: grimp.ImportGraph) -> list[str]:
    """Every set of packages that import one another, directly or through others, each shown
    with one module import per package edge inside it."""
    edges: dict[str, dict[str, str]] = {}
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if module.count(".") and imported.count("."):
                a, b = package_of(module), package_of(imported)
                if a != b:
                    edges.setdefault(a, {}).setdefault(b, f"{module} -> {imported}")

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for nxt in edges.get(todo.pop(), {}):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reached = {package: reach(package) for package in edges}
    cycles = []
    for members in {
        frozenset(p for p in reached if p in reached[start] and start in reached[p])
        for start in reached
        if start in reached[start]
    }:
        inside = sorted(edges[a][b] for a in members for b in edges[a] if b in members)
        cycles.append(f"{sorted(members)}: {'; '.join(inside)}")
    return sorted(cycles)


def test_no_package_imports_itself_through_others(graph: grimp.ImportGraph) -> None:
    assert package_cycles(graph) == []


def test_a_package_cycle_closed_inside_a_function_is_found() -> None:
    """The graph grimp builds holds function-level imports as plain edges: one closing a
    cycle of packages (errors.py scrubbing through records/, which imports errors.py) is
    found and named by its import."""
    graph = grimp.ImportGraph()
    for module in ("errors", "records", "records.redact", "config", "config.models"):
        graph.add_module(f"{PACKAGE}.{module}")
    graph.add_import(importer=f"{PACKAGE}.records.redact", imported=f"{PACKAGE}.config.models")
    graph.add_import(importer=f"{PACKAGE}.config.models", imported=f"{PACKAGE}.errors")
    graph.add_import(
        importer=f"{PACKAGE}.errors",
        imported=f"{PACKAGE}.records.redact",
        line_number=30,
        line_contents="from pytest_benchmark_agent.records.redact import scrub_text",
    )
    [cycle] = package_cycles(graph)
    assert cycle.startswith("['config', 'errors', 'records']: ")
    assert f"{PACKAGE}.errors -> {PACKAGE}.records.redact" in cycle


def test_no_module_imports_itself_through_others(graph: grimp.ImportGraph) -> None:
    cycles = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back is not None:
                cycles.append(" -> ".join((module, *back)))
    assert cycles == []


def test_imports_inside_functions_are_counted(graph: grimp.ImportGraph) -> None:
    """The recovery's finisher loads only when a run is recovered: an import in a function,
    which the graph (and so the contract) still sees."""
    details = graph.get_import_details(
        importer=f"{PACKAGE}.engine.recovery", imported=f"{PACKAGE}.engine.finish"
    )
    assert details and details[0]["line_contents"].startswith("from ")
    source = (ROOT / PACKAGE / "engine" / "recovery.py").read_text().splitlines()
    assert source[details[0]["line_number"] - 1].startswith("    from ")
