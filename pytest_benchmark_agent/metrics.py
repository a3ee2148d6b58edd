"""Reading what a stage reports: metric values and point-of-use (effective) parameters.

Metrics come from stdout (``name=value``, ``name: value`` or one JSON object line) or from a
file (JSON object or the same lines). A declared metric that is missing, or not a finite
number, is an error, never a silent 0. ``BENCH_EFFECTIVE name=value`` lines on stdout and
``{out}/effective.json`` report the parameters a stage really used.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .errors import MetricError
from .placeholders import as_text

_PAIR = re.compile(r"^\s*([A-Za-z_][\w.@\-/]*)\s*[=:]\s*(.*?)\s*$")
_EFFECTIVE = "BENCH_EFFECTIVE"


def read_pairs(text: str) -> dict[str, Any]:
    """Every ``name=value`` / ``name: value`` / JSON-object line of ``text``; the last one wins."""
    found: dict[str, Any] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(_EFFECTIVE):
            continue
        if stripped.startswith("{") and stripped.endswith("}"):
            try:
                obj = json.loads(stripped)
            except ValueError:
                continue
            if isinstance(obj, dict):
                found.update(obj)
            continue
        match = _PAIR.match(stripped)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def parse_metrics(text: str, fields: Iterable[str], source: str) -> dict[str, float]:
    """The declared ``fields`` from a stage's output ``text``; ``source`` names it in errors."""
    pairs = read_pairs(text)
    values: dict[str, float] = {}
    for name in fields:
        if name not in pairs:
            tail = "\n".join(text.strip().splitlines()[-5:]) or "(nothing)"
            raise MetricError(f"metric '{name}' was not reported on {source}; it must print "
                              f"'{name}=<number>'. Last lines of {source}:\n{tail}")
        values[name] = _number(name, pairs[name], source)
    return values


def _number(name: str, raw: Any, source: str) -> float:
    if isinstance(raw, bool) or raw is None:
        raise MetricError(f"metric '{name}' on {source} is {raw!r}, not a number.")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise MetricError(f"metric '{name}' on {source} is {raw!r}, not a number.") from None
    if not math.isfinite(value):
        raise MetricError(f"metric '{name}' on {source} is {raw!r}, not a finite number.")
    return value


def read_metrics_file(path: Path, fields: Iterable[str]) -> dict[str, float]:
    """Metrics from a file a stage wrote (a JSON object, or ``name=value`` lines)."""
    if not path.is_file():
        raise MetricError(f"metrics file {path} was not written by the stage.")
    return parse_metrics(path.read_text(), fields, f"metrics file {path}")


def parse_effective(stdout: str, out_dir: Path | None) -> dict[str, str]:
    """Parameters the stage says it really used, as text (stdout lines win over the file)."""
    effective: dict[str, str] = {}
    if out_dir is not None and (out_dir / "effective.json").is_file():
        try:
            data = json.loads((out_dir / "effective.json").read_text())
        except ValueError as exc:
            raise MetricError(f"{out_dir / 'effective.json'} is not valid JSON ({exc}).") from None
        if not isinstance(data, dict):
            raise MetricError(f"{out_dir / 'effective.json'} must hold a JSON object.")
        effective.update({str(k): as_text(v) for k, v in data.items()})
    for line in stdout.splitlines():
        stripped = line.strip()
        if stripped.startswith(_EFFECTIVE):
            match = _PAIR.match(stripped[len(_EFFECTIVE):])
            if match:
                effective[match.group(1)] = match.group(2)
    return effective


def effective_mismatches(declared: Mapping[str, Any], effective: Mapping[str, str]) -> list[str]:
    """``name: declared X, effective Y`` for every reported param that differs from its value."""
    mismatches = []
    for name, used in effective.items():
        if name in declared and not _same(declared[name], used):
            mismatches.append(f"{name}: declared {as_text(declared[name])!r}, effective {used!r}")
    return mismatches


def _same(declared: Any, used: str) -> bool:
    text = as_text(declared)
    if text == used:
        return True
    try:
        return float(text) == float(used)
    except ValueError:
        return False
