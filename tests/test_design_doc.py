"""docs/benchmark/DESIGN.md names exactly the hooks hookspecs.py defines, and its module table
lists exactly the package's modules (a module moved or added shows here first)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from pytest_benchmark_agent import hookspecs

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "pytest_benchmark_agent"
DESIGN = (REPO / "docs" / "benchmark" / "DESIGN.md").read_text()


def test_design_lists_the_hooks_hookspecs_defines() -> None:
    defined = {
        name
        for name, value in inspect.getmembers(hookspecs, inspect.isfunction)
        if name.startswith("pytest_bench_") and value.__module__ == hookspecs.__name__
    }
    [row] = [line for line in DESIGN.splitlines() if line.startswith("| | `hookspecs.py` |")]
    assert set(re.findall(r"pytest_bench_\w+", row)) == defined
    assert set(re.findall(r"pytest_bench_\w+", DESIGN)) <= defined


def test_the_module_table_lists_every_module_and_no_other() -> None:
    listed = set()
    package = ""
    for line in DESIGN.splitlines():
        cells = [cell.strip() for cell in line.split("|")[1:-1]]
        if len(cells) != 3 or cells[0] in ("package", "---"):
            continue
        if cells[0]:
            package = "" if cells[0] == "(top)" else cells[0].strip("`")
        listed |= {f"{package}{module}" for module in re.findall(r"`([\w.]+\.py)`", cells[1])}
    modules = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py"
    }
    assert listed == modules
