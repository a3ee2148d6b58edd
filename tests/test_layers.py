"""The package graph is layered and has no import cycle (docs/benchmark/DESIGN.md, "Layers").

The layers are an import-linter contract in pyproject.toml; grimp, which builds the graph for
it, counts imports inside functions too. The contract lists its known upward imports; a cycle
through one of them is caught here by the module graph itself.
"""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest
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
