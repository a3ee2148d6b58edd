"""Every module of the package reads in one sitting (issue 36): none over
:data:`MAX_MODULE_LINES` lines and no function (a method or a nested one included) over
:data:`MAX_FUNCTION_LINES`, counted from its ``def`` to its last line as Python's ``ast`` sees
it; and no function of ``engine/`` takes over :data:`MAX_ENGINE_PARAMETERS` parameters (issue
46). A failure names each offender with its place and length, so the fix starts from the list.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_benchmark_agent"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
#: Parameters of an engine function (``self`` and ``cls`` not counted): a stage's settings
#: travel as one ``StageInvocation`` (issue 46), not as a long list.
MAX_ENGINE_PARAMETERS = 7


def long_modules(root: Path) -> list[str]:
    """``file: N lines`` of each module under ``root`` over the limit."""
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            found.append(f"{path.relative_to(root.parent).as_posix()}: {lines} lines")
    return found


def long_functions(root: Path) -> list[str]:
    """``file:line name: N lines`` of each function under ``root`` over the limit."""
    found = []
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append((where, node.lineno, f"{node.name}: {length} lines"))
    return [f"{where}:{line} {what}" for where, line, what in sorted(found)]


def many_parameters(root: Path, most: int) -> list[str]:
    """``file:line name: N parameters`` of each function under ``root`` taking over ``most``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
                count = len([n for n in names if n not in ("self", "cls")])
                if count > most:
                    found.append((where, node.lineno, f"{node.name}: {count} parameters"))
    return [f"{where}:{line} {what}" for where, line, what in sorted(found)]


def test_no_module_is_over_600_lines() -> None:
    found = long_modules(PACKAGE)
    assert not found, f"modules over {MAX_MODULE_LINES} lines (split them by concern):\n" + (
        "\n".join(found)
    )


def test_no_function_is_over_60_lines() -> None:
    found = long_functions(PACKAGE)
    assert not found, f"functions over {MAX_FUNCTION_LINES} lines (split them by step):\n" + (
        "\n".join(found)
    )


def test_no_engine_function_takes_over_7_parameters() -> None:
    found = many_parameters(PACKAGE / "engine", MAX_ENGINE_PARAMETERS)
    assert not found, (
        f"engine functions over {MAX_ENGINE_PARAMETERS} parameters (group them in one value):\n"
        + "\n".join(found)
    )


def test_the_checks_name_a_long_module_and_a_long_nested_function(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 1))
    (package / "sub" / "deep.py").write_text(
        f"def outer():\n    def inner():\n{body}\n    return inner\n"
    )
    (package / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (package / "short.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    assert long_modules(package) == [f"pkg/long.py: {MAX_MODULE_LINES + 1} lines"]
    assert long_functions(package) == [f"pkg/sub/deep.py:1 outer: {MAX_FUNCTION_LINES + 2} lines"]
    (package / "wide.py").write_text("class C:\n    def m(self, a, b, *, c):\n        pass\n")
    assert many_parameters(package, 2) == ["pkg/wide.py:2 m: 3 parameters"]
