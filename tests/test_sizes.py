"""Every module of the package reads in one sitting (issue 36): none over
:data:`MAX_MODULE_LINES` lines and no function (a method or a nested one included) over
:data:`MAX_FUNCTION_LINES`, counted from its ``def`` to its last line as Python's ``ast`` sees
it; and no function takes more than :data:`MAX_PARAMETERS` parameters (issue 46), but the
named exceptions of :data:`MANY_PARAMETERS`. A failure names each offender with its place and
size, so the fix starts from the list.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_benchmark_agent"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
MAX_PARAMETERS = 7

_DECLARATIVE = (
    "a public declarative API: its keyword arguments mirror the YAML stage fields one to one "
    "(produces, needs, params, inputs, seed, mem_mb, gpus, vram_mb, timeout_s), so a Python "
    "Domain declares a stage as a benchmark file does"
)

#: The functions allowed more than :data:`MAX_PARAMETERS` parameters, ``file:name`` -> why.
MANY_PARAMETERS = {
    "pytest_benchmark_agent/domains/api.py:prep": _DECLARATIVE,
    "pytest_benchmark_agent/domains/api.py:measure": _DECLARATIVE,
}


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


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The parameters a caller passes: positional-only, positional, keyword-only, ``*args``
    and ``**kwargs``, less a leading ``self`` or ``cls``."""
    args = node.args
    named = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    bound = 1 if named[:1] and named[0].arg in ("self", "cls") else 0
    return len(named) - bound + (args.vararg is not None) + (args.kwarg is not None)


def many_parameters(root: Path) -> list[tuple[str, str]]:
    """``(file:name, file:line name: N parameters)`` of each function under ``root`` that takes
    more than the limit."""
    found = []
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                count = parameter_count(node)
                if count > MAX_PARAMETERS:
                    found.append((where, node.lineno, node.name, count))
    return [
        (f"{where}:{name}", f"{where}:{line} {name}: {count} parameters")
        for where, line, name, count in sorted(found)
    ]


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


def test_no_function_takes_more_than_7_parameters() -> None:
    found = many_parameters(PACKAGE)
    over = [line for key, line in found if key not in MANY_PARAMETERS]
    assert not over, (
        f"functions over {MAX_PARAMETERS} parameters (give them a small frozen settings object, "
        "or split them):\n" + "\n".join(over)
    )
    stale = sorted(set(MANY_PARAMETERS) - {key for key, _ in found})
    assert not stale, "within the limit now: remove them from MANY_PARAMETERS:\n" + (
        "\n".join(stale)
    )


def test_the_parameter_check_counts_what_a_caller_passes(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "calls.py").write_text(
        "class C:\n"
        "    def method(self, a, b, c, d, e, f, g): ...\n"
        "    @classmethod\n"
        "    def build(cls, a, b, c, d, e, f, *, g): ...\n"
        "def wide(a, /, b, c, d, e, f, g, *, h): ...\n"
        "def spread(a, b, c, d, e, f, *args, **kwargs): ...\n"
        "def outer():\n"
        "    async def inner(a, b, c, d, e, f, g, h): ...\n"
    )
    assert [line for _, line in many_parameters(package)] == [
        "pkg/calls.py:5 wide: 8 parameters",
        "pkg/calls.py:6 spread: 8 parameters",
        "pkg/calls.py:8 inner: 8 parameters",
    ]


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
