"""Reading what a stage reports: metric values and point-of-use (effective) parameters.

Metrics come from stdout (``name=value``, ``name: value`` or one JSON object line) or from a
file (JSON object or the same lines). A declared metric that is missing, or not a finite
number, is an error, never a silent 0; so is one beyond ``MAX_MAGNITUDE`` (``1e150``: the
statistics square what they are given, and ``1e308`` overflowed them). A ``direction: equal``
metric (a checksum, a hash) is kept exactly as the stage wrote it: an integer of any size as an
``int``, any other token (hex, base64, text) as a ``str``, never rounded through a float.
``BENCH_EFFECTIVE name=value`` lines on stdout and ``{out}/effective.json`` report the
parameters a stage really used.

Output is read as a stream of lines (:func:`file_lines`), never whole: a stage may print
hundreds of megabytes, and the harness must not hold them (docs/benchmark/RELIABILITY.md). A
line longer than :data:`MAX_LINE_BYTES` cannot be a metric line and is skipped unread.
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.config.as_recorded import METRIC_NAME
from pytest_benchmark_agent.errors import MetricError
from pytest_benchmark_agent.records.bounded import MAX_STATE_BYTES, BadJson, read_json
from pytest_benchmark_agent.stats.describe import INTEGER, MAX_MAGNITUDE
from pytest_benchmark_agent.util import redact
from pytest_benchmark_agent.util.fsutil import NotRegularFile, outside, regular_chunks
from pytest_benchmark_agent.util.placeholders import as_text

_PAIR = re.compile(rf"^\s*({METRIC_NAME.pattern})\s*[=:]\s*(.*?)\s*$")
_EFFECTIVE = "BENCH_EFFECTIVE"
#: A stdout line ``BENCH_CODE_FROM <path>``: where the stage imported the code under test from.
CODE_FROM = "BENCH_CODE_FROM"

#: A metric's value in a trial record: a float, or an exact (``direction: equal``) int or str.
Value = float | int | str
#: Longest line read from a stage's output or metrics file; longer ones are skipped.
MAX_LINE_BYTES = 1 << 20
_TAIL_LINES = 5
#: Text or a stream of lines: what the readers below accept.
Lines = str | Iterable[str]
#: A failure reason quotes a stage's last lines up to this many characters in all, each line
#: cut to :data:`QUOTE_LINE_CHARS`: every record, export and terminal repeats the reason, and a
#: 300 KB line was printed whole.
QUOTE_CHARS = 4096
QUOTE_LINE_CHARS = 1024


def quoted(lines: Sequence[str], first_cut: bool = False) -> str:
    """The last of ``lines`` that fit :data:`QUOTE_CHARS` (the last one always), each longer
    than :data:`QUOTE_LINE_CHARS` cut, saying how long it was (``first_cut``: the first line
    was read from its middle, so its length is a lower bound)."""
    kept: list[str] = []
    size = 0
    for index in range(len(lines) - 1, -1, -1):
        line = _cut(lines[index], partial=first_cut and index == 0)
        size += len(line) + 1
        if kept and size > QUOTE_CHARS:
            break
        kept.append(line)
    return "\n".join(reversed(kept))


def _cut(line: str, partial: bool) -> str:
    if len(line) <= QUOTE_LINE_CHARS:
        return line
    length = f"over {len(line):,}" if partial else f"{len(line):,}"
    return f"{line[:QUOTE_LINE_CHARS]} [cut: the line is {length} characters long]"


def file_lines(path: Path, max_line: int = MAX_LINE_BYTES) -> Iterator[str]:
    """The lines of ``path`` (without their ends), read in chunks; a line over ``max_line``
    bytes is skipped, so memory stays bounded whatever the file holds. Only a regular file is
    read (:func:`~.util.fsutil.regular_chunks`): a FIFO or a device raises
    :class:`~.util.fsutil.NotRegularFile` instead of blocking or never ending."""
    pending = bytearray()
    skipping = False  # inside a line already over the limit, until its end
    for chunk in regular_chunks(path):
        *ended, rest = chunk.split(b"\n")
        for piece in ended:
            if not skipping and len(pending) + len(piece) <= max_line:
                pending += piece
                yield pending.decode(errors="replace")
            pending.clear()
            skipping = False
        if not skipping:
            pending += rest
            if len(pending) > max_line:
                pending.clear()
                skipping = True
    if pending and not skipping:  # a last line without its end
        yield pending.decode(errors="replace")


def _lines(source: Lines) -> Iterable[str]:
    return source.splitlines() if isinstance(source, str) else source


def read_pairs(text: Lines) -> dict[str, Any]:
    """Every ``name=value`` / ``name: value`` / JSON-object line of ``text``; the last one wins."""
    return _scan(text)[0]


def _scan(text: Lines) -> tuple[dict[str, Any], deque[str]]:
    """The pairs of ``text`` (see :func:`read_pairs`) and its last non-blank lines."""
    found: dict[str, Any] = {}
    tail: deque[str] = deque(maxlen=_TAIL_LINES)
    for line in _lines(text):
        stripped = line.strip()
        if stripped:
            tail.append(line)
        if not stripped or stripped.startswith(_EFFECTIVE):
            continue
        if stripped.startswith("{") and stripped.endswith("}"):
            try:
                obj = json.loads(stripped, parse_float=_JsonNumber)
            except (ValueError, RecursionError):  # not JSON, or nested past what Python reads
                continue
            if isinstance(obj, dict):
                found.update(obj)
            continue
        match = _PAIR.match(stripped)
        if match:
            found[match.group(1)] = _Token(match.group(2))
    return found, tail


def parse_metrics(
    text: Lines, fields: Iterable[str], source: str, exact: Collection[str] = ()
) -> dict[str, Value]:
    """The declared ``fields`` from a stage's output ``text`` (or its lines, read once);
    ``source`` names it in errors.

    The ``exact`` ones (``direction: equal``) are kept as written, the others are finite floats.
    """
    pairs, last = _scan(text)
    values: dict[str, Value] = {}
    for name in fields:
        if name not in pairs:
            tail = quoted(last) or "(nothing)"
            what = "<value>" if name in exact else "<number>"
            raise MetricError(
                f"metric '{name}' was not reported on {source}; it must print "
                f"'{name}={what}'. Last lines of {source}:\n{tail}"
            )
        raw = pairs[name]
        value = _exact(name, raw, source) if name in exact else _number(name, raw, source)
        values[name] = redact.stage_text(value) if isinstance(value, str) else value
    return values


def _number(name: str, raw: Any, source: str) -> float:
    hint = (
        " (a value compared exactly, such as a hash or a checksum, needs "
        f"`{name}: {{direction: equal}}`)"
    )
    if isinstance(raw, bool) or raw is None:
        raise MetricError(f"metric '{name}' on {source} is {raw!r}, not a number.")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise MetricError(
            f"metric '{name}' on {source} is {raw!r}, not a number"
            f"{hint if isinstance(raw, str) and raw else ''}."
        ) from None
    except OverflowError:  # a JSON integer beyond a float's range
        raise MetricError(
            f"metric '{name}' on {source} is {raw!r}, not a finite number{hint}."
        ) from None
    if not math.isfinite(value):
        raise MetricError(f"metric '{name}' on {source} is {raw!r}, not a finite number.")
    if abs(value) > MAX_MAGNITUDE:
        raise MetricError(
            f"metric '{name}' on {source} is {raw!r}, beyond ±{MAX_MAGNITUDE:g}, the largest "
            "magnitude a trial records (its statistics square it); the stage must report it "
            f"in a larger unit{hint}."
        )
    return value


def _exact(name: str, raw: Any, source: str) -> int | str:
    """A ``direction: equal`` value as written: a JSON integer or string as given (a JSON
    boolean as ``true``/``false``, a JSON float as its literal), a printed token as an int
    when it is one in canonical form (of any size), else as the text itself."""
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, int):
        return raw
    if isinstance(raw, _JsonNumber):
        return str(raw)
    if isinstance(raw, str) and not isinstance(raw, _Token):  # a JSON string
        return raw
    if not isinstance(raw, str):
        raise MetricError(
            f"metric '{name}' on {source} is {raw!r}: a metric compared exactly "
            "must be one value (an integer or a string), not a list, an object "
            "or null."
        )
    if not raw:
        raise MetricError(f"metric '{name}' on {source} is empty; it must print '{name}=<value>'.")
    if INTEGER.fullmatch(raw):
        try:
            return int(raw)
        except ValueError:  # beyond Python's digit limit for int(): kept as its text
            return str(raw)
    return str(raw)


class _Token(str):
    """The text of a ``name=value`` line, as opposed to a string of a JSON object."""


class _JsonNumber(str):
    """A JSON float's literal (``1.50`` stays ``1.50``); read as a float where one is wanted."""


def read_metrics_file(
    path: Path, fields: Iterable[str], exact: Collection[str] = (), inside: Sequence[Path] = ()
) -> dict[str, Value]:
    """Metrics from a file a stage wrote (a JSON object, or ``name=value`` lines); one that
    is missing, is not a regular file (a FIFO, a device: never read) or resolves outside the
    stage's own folders ``inside`` (a link to ``/etc/shadow``: never read) is an error saying
    which."""
    if not path.exists():
        raise MetricError(f"metrics file {path} was not written by the stage.")
    where = outside(path, *inside) if inside else None
    if where is not None:
        raise MetricError(
            f"metrics file {path} resolves to {where}, outside the stage's folders, so it is "
            "not read; the stage must write its metrics inside its working folder or {out}."
        )
    try:
        return parse_metrics(file_lines(path), fields, f"metrics file {path}", exact)
    except NotRegularFile as error:
        raise MetricError(
            f"metrics file {path} {error.strerror}, so it is not read; the stage must write "
            "its metrics to a regular file there."
        ) from None
    except OSError as error:
        raise MetricError(f"metrics file {path} cannot be read: {error.strerror}.") from None


def parse_effective(stdout: Lines, out_dir: Path | None) -> dict[str, str]:
    """Parameters the stage says it really used, as text (stdout lines win over the file)."""
    effective: dict[str, str] = {}
    if out_dir is not None and (out_dir / "effective.json").is_file():
        try:
            data = read_json(out_dir / "effective.json", MAX_STATE_BYTES)
        except (OSError, BadJson) as exc:
            raise MetricError(f"{out_dir / 'effective.json'} cannot be read ({exc}).") from None
        if not isinstance(data, dict):
            raise MetricError(f"{out_dir / 'effective.json'} must hold a JSON object.")
        effective.update({str(k): as_text(v) for k, v in data.items()})
    for line in _lines(stdout):
        stripped = line.strip()
        if stripped.startswith(_EFFECTIVE):
            match = _PAIR.match(stripped[len(_EFFECTIVE) :])
            if match:
                effective[match.group(1)] = match.group(2)
    return effective


def parse_code_from(stdout: Lines) -> list[str]:
    """The paths a stage said it imported the code under test from (``BENCH_CODE_FROM <path>``
    or ``BENCH_CODE_FROM=<path>`` lines, e.g. ``print("BENCH_CODE_FROM", mypkg.__file__)``)."""
    found: list[str] = []
    for line in _lines(stdout):
        stripped = line.strip()
        if stripped.startswith(CODE_FROM):
            path = stripped[len(CODE_FROM) :].lstrip(" =:\t").strip()
            if path and path not in found:
                found.append(path)
    return found


def effective_mismatches(declared: Mapping[str, Any], effective: Mapping[str, str]) -> list[str]:
    """``name: declared X, effective Y`` for every reported param that differs from its value."""
    mismatches = []
    for name, used in effective.items():
        if name in declared and not _same(declared[name], used):
            mismatches.append(f"{name}: declared {as_text(declared[name])!r}, effective {used!r}")
    return mismatches


def _same(declared: Any, used: str) -> bool:
    """Whether the value a stage reported is the declared one. A stage's output is redacted as
    it is read (engine/stage_output), so a declared secret reported as used reads
    ``<redacted>``: that matches it, as a cache entry's redacted effective value does."""
    text = as_text(declared)
    if text == used or (used == redact.REDACTED and redact.stage_text(text) == used):
        return True
    try:
        return float(text) == float(used)
    except ValueError:
        return False
