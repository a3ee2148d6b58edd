"""Values YAML 1.1's typing reads otherwise than typed (``3.10`` as 3.1, ``no`` as false):
warned about, or refused for treatments where the run would measure values nobody wrote.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from pytest_benchmark_agent.config.fields import FORMAT_DOC
from pytest_benchmark_agent.config.safe_yaml import SAFE_LOADER, read_input


class RetypedValueWarning(UserWarning):
    """A treatment or param YAML 1.1 reads as another value than typed (``3.10`` as 3.1)."""


def retyped_values(
    path: Path, raw: dict[str, Any], *, skip: set[str]
) -> Iterator[tuple[str, str, str]]:
    """Treatments and params (``skip``: those --bench-set replaced) that YAML 1.1's typing
    reads as other than typed, each a warning showing both (``3.10`` is 3.1, ``no`` false,
    ``on`` true, ``1.0e+3`` 1000.0, ``010`` 8, ``1_000`` 1000). Two treatments are refused: a
    word read as a boolean or null, and two spellings read as one value (``3.1``, ``3.10``),
    since the run would measure or merge values nobody wrote."""
    treatments, params = raw.get("treatments"), raw.get("params")
    if not isinstance(treatments, list) and not (isinstance(params, dict) and params):
        return
    root = yaml.compose(read_input(path), Loader=SAFE_LOADER)
    nodes = {getattr(k, "value", None): v for k, v in getattr(root, "value", [])}
    if isinstance(params, dict):
        for field, item, value in _plain_scalars(nodes.get("params"), params, "params", skip):
            typed = item.value.lower() if value is None or isinstance(value, bool) else item.value
            if item.value not in ("", "~") and _read_as(value) != typed:
                _warn_retyped(path, field, item.value, _read_as(value), "it runs as")
    node = nodes.get("treatments")
    if not isinstance(node, yaml.SequenceNode) or not isinstance(treatments, list):
        return
    if len(node.value) != len(treatments):
        return
    typed: dict[Any, str] = {}
    quote = "quote it to keep it as written"
    for number, (item, value) in enumerate(zip(node.value, treatments, strict=True)):
        if not isinstance(item, yaml.ScalarNode) or item.style not in (None, ""):
            continue  # quoted, or a list or mapping: read as written
        field = f"treatments[{number}]"
        if value is None or isinstance(value, bool):
            read = _read_as(value)
            if item.value.lower() != read:
                yield (
                    field,
                    f"is typed {item.value} but YAML reads it as {read}.",
                    f"{quote}: '{item.value}' (see {FORMAT_DOC}).",
                )
        elif isinstance(value, (int, float)) and str(value) != item.value:
            key = (type(value).__name__, value)
            if key in typed:
                yield (
                    field,
                    f"is typed {item.value} but YAML reads it as {value!r}, the same value as "
                    f"{typed[key]}: the two would be one treatment.",
                    f"{quote}: '{item.value}' (see {FORMAT_DOC}).",
                )
            else:
                _warn_retyped(path, field, item.value, repr(value), "it runs and is labelled")
        typed.setdefault((type(value).__name__, value), item.value)


def _read_as(value: Any) -> str:
    """A plain scalar's value as YAML read it, spelled as the warnings show it."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    return repr(value) if isinstance(value, (int, float)) else str(value)


def _plain_scalars(
    node: Any, value: Any, field: str, skip: set[str]
) -> Iterator[tuple[str, yaml.ScalarNode, Any]]:
    """The unquoted scalars under ``node`` (a params mapping, its lists and mappings) with the
    value each was read as and its field (``params.sizes[1]``); a name in ``skip`` is left out."""
    if isinstance(node, yaml.ScalarNode):
        if node.style in (None, "") and not isinstance(value, str):
            yield field, node, value
    elif isinstance(node, yaml.SequenceNode) and isinstance(value, list):
        if len(node.value) == len(value):
            for index, (item, read) in enumerate(zip(node.value, value, strict=True)):
                yield from _plain_scalars(item, read, f"{field}[{index}]", set())
    elif isinstance(node, yaml.MappingNode) and isinstance(value, dict):
        for key, item in node.value:
            name = getattr(key, "value", None)
            if isinstance(name, str) and name in value and name not in skip:
                yield from _plain_scalars(item, value[name], f"{field}.{name}", set())


def _warn_retyped(path: Path, field: str, typed: str, read: str, runs: str) -> None:
    """The gate-1 warning of a value YAML 1.1 read otherwise than typed: file, field, both
    spellings and the fix."""
    warnings.warn(
        RetypedValueWarning(
            f"{path}: {field} is typed {typed} and YAML reads it as {read}; {runs} {read} "
            f"(quote it to keep it as written: '{typed}'; see {FORMAT_DOC})"
        ),
        stacklevel=4,
    )
