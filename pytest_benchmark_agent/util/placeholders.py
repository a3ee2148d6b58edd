"""``{placeholder}`` templates: finding names, and rendering with every value shell-quoted.

``{name}`` is a placeholder (names may hold letters, digits, ``_ . @ -``); ``{{`` and ``}}`` are
literal braces; ``${VAR}`` is left to the shell. Values substituted into a command are always
passed through :func:`shlex.quote`, so a value can never run as code.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from typing import Any

_TOKEN = re.compile(r"\{\{|\}\}|(?<!\$)\{([A-Za-z_][\w.@\-]*)\}")


def names_in(template: str) -> list[str]:
    """The placeholder names a template uses, in order of first appearance."""
    found: list[str] = []
    for match in _TOKEN.finditer(template):
        name = match.group(1)
        if name and name not in found:
            found.append(name)
    return found


def as_text(value: Any) -> str:
    """The text a param value stands for on a command line (YAML-style booleans, JSON lists)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def render(template: str, values: Mapping[str, Any], *, quote: bool = True) -> str:
    """Substitute every placeholder; ``quote`` shell-quotes each value (commands), else raw (paths).

    A name missing from ``values`` raises KeyError: gate 1 has already refused unknown names, so
    reaching it here is an engine bug, not a user error.
    """

    def substitute(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        text = as_text(values[match.group(1)])
        return shlex.quote(text) if quote else text

    return _TOKEN.sub(substitute, template)
