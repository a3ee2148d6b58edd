"""Writing the records' YAML: block style, for the JSON-like data they hold, fast.

``results.yaml`` carries every trial, and PyYAML's representer walks each value in Python (its C
emitter does not help there): a 400-trial record took ~0.15 ms per trial to write, a cost paid
at the end of every run and at each mid-run snapshot. :func:`to_yaml` writes the same data as a
direct walk over dicts, lists, strings, numbers, booleans and ``None``; anything else (a
``Path``, a numpy scalar, a non-string key) returns ``None``, and the caller uses PyYAML.

What comes back loads (``yaml.safe_load``, YAML 1.1) to data equal to the input: a string is
written plain only when PyYAML would read it back as that string (letters first, no ``:`` or
``#``, not a YAML 1.1 boolean or null word); every other string is double-quoted with the
escapes YAML shares with JSON, plus escapes for the characters a YAML reader refuses or folds.
A key longer than YAML's 1,024-character limit on a plain ``key:`` is written as an explicit
``? key`` / ``: value`` pair (a 1,100-character treatment value once made every record of its
benchmark unreadable). Floats follow PyYAML's own spelling (``1.0e-05``, ``.inf``, ``.nan``):
YAML 1.1 reads ``1e-05`` as a string. The one value no YAML can hold, a lone surrogate (text
decoded with ``surrogateescape``: a file name or environment value that is not UTF-8), is
written as U+FFFD, the replacement character.
"""

from __future__ import annotations

import math
import re
from json.encoder import encode_basestring  # json.dumps(text, ensure_ascii=False), in C
from typing import Any

#: Strings YAML 1.1 reads as booleans or null when written plain (``y`` and ``n`` too: PyYAML
#: reads them as strings, other YAML 1.1 readers of the records as booleans).
_WORDS = frozenset(
    "y Y n N yes Yes YES no No NO true True TRUE false False FALSE on On ON off "
    "Off OFF null Null NULL".split()
)
_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./+\-\[\]=@()]*(?: [A-Za-z0-9_./+\-\[\]=@()]+)*")
#: Characters JSON leaves raw that a YAML reader refuses (outside its printable set) or reads
#: as line breaks inside a quoted scalar.
_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufffe\uffff]")
#: A lone surrogate (a string decoded with ``surrogateescape``) has no YAML spelling at all.
_SURROGATE = re.compile("[\ud800-\udfff]")
#: The longest key written as a plain ``key:`` (YAML allows an implicit key 1,024 characters).
_IMPLICIT_KEY_MAX = 1000


class _Unsupported(Exception):
    """A value this writer does not spell; the caller falls back to PyYAML."""


def to_yaml(data: Any) -> str | None:
    """``data`` as a YAML document, or None if it holds a type this writer does not spell."""
    lines: list[str] = []
    try:
        if isinstance(data, dict) and data:
            _mapping(data, "", lines)
        elif isinstance(data, list) and data:
            _sequence(data, "", lines)
        else:
            lines.append(_scalar(data))
    except _Unsupported:
        return None
    lines.append("")
    return "\n".join(lines)


def _mapping(data: dict[Any, Any], indent: str, lines: list[str]) -> None:
    for key, value in data.items():
        head = _head(indent, key)
        if isinstance(value, dict) and value:
            lines.append(head)
            _mapping(value, indent + "  ", lines)
        elif isinstance(value, list) and value:
            lines.append(head)
            # PyYAML's style: "- " under the key; indented under an explicit key's ":"
            _sequence(value, indent + "  " if head[len(indent)] == "?" else indent, lines)
        else:
            lines.append(f"{head} {_scalar(value)}")


#: ``indent + key + ":"`` per (indent, key): a record's keys repeat in every trial.
_HEADS: dict[tuple[str, str], str] = {}
_HEADS_MAX = 4096


def _head(indent: str, key: Any) -> str:
    head = _HEADS.get((indent, key))
    if head is None:
        if type(key) is not str:
            raise _Unsupported
        spelled = _string(key)
        if len(spelled) > _IMPLICIT_KEY_MAX:
            head = f"{indent}? {spelled}\n{indent}:"
        else:
            head = f"{indent}{spelled}:"
        if len(_HEADS) < _HEADS_MAX:
            _HEADS[indent, key] = head
    return head


def _sequence(data: list[Any], indent: str, lines: list[str]) -> None:
    for value in data:
        if isinstance(value, dict) and value:
            first = len(lines)
            _mapping(value, indent + "  ", lines)
            lines[first] = f"{indent}- {lines[first][len(indent) + 2 :]}"
        elif isinstance(value, list) and value:
            first = len(lines)
            _sequence(value, indent + "  ", lines)
            lines[first] = f"{indent}- {lines[first][len(indent) + 2 :]}"
        else:
            lines.append(f"{indent}- {_scalar(value)}")


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    kind = type(value)
    if kind is str:
        return _string(value)
    if kind is int:
        return str(value)
    if kind is float:
        return _float(value)
    if kind is dict:
        return "{}"  # non-empty ones are block mappings
    if kind is list:
        return "[]"
    raise _Unsupported


def _float(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    if "." not in text and "e" in text:
        text = text.replace("e", ".0e", 1)
    return text


def writable(text: str) -> str:
    """``text`` with each lone surrogate (no YAML can hold one) replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _string(text: str) -> str:
    if _PLAIN.fullmatch(text) and text not in _WORDS:
        return text
    quoted = encode_basestring(writable(text))
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)
