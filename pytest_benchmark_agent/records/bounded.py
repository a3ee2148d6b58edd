"""The one reader of JSON the tool did not just write (records, journal lines, ``index.json``,
exports, heartbeats, owner files, a tune's round points, cache manifests).

A file read back may have been edited, damaged or planted: a FIFO that never ends a read, a
link to ``/dev/zero``, a gigabyte, or ``[[[...`` 100,000 levels deep, which makes Python's
decoder raise RecursionError (not ValueError) and so crashed every verb that met it. Here a
file is read only when it is a regular file (:func:`.fsutil.read_regular`) of at most a given
size, and every way decoding can fail (not UTF-8, not JSON, nested past the interpreter's
recursion limit, out of memory) is one :class:`BadJson` naming the file and the problem, which
each caller turns into the skip-with-warning or exit 2 that docs/benchmark/RELIABILITY.md
promises. YAML records go through :func:`.reader.load_yaml`, which uses the same size limit.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.util.fsutil import NotRegularFile, read_regular

#: The largest record file read back (results.yaml, an export, a journal): a run of 100,000
#: trials writes about 100 MiB of journal.
MAX_RECORD_BYTES = 512 << 20
#: The largest small state file read back (index.json, heartbeat.json, an owner file).
MAX_STATE_BYTES = 4 << 20


class BadJson(ValueError):
    """A JSON file (or line) that cannot be read: ``problem`` says why, ``kind`` is the file's
    type when it is not a regular file."""

    def __init__(
        self, path: Path | str, problem: str, kind: str | None = None, position: int | None = None
    ) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        self.problem = problem
        self.kind = kind
        #: Where a JSON syntax error is, in characters from the start (None otherwise).
        self.position = position


def decode_json(data: bytes | str, where: Path | str = "<text>") -> Any:
    """``data`` parsed as JSON; :class:`BadJson` for anything that is not (including nesting
    the decoder cannot follow and a document too large to build)."""
    try:
        return json.loads(data)
    except json.JSONDecodeError as error:
        problem = f"not valid JSON at line {error.lineno}, column {error.colno}: {error.msg}"
        raise BadJson(where, problem, position=error.pos) from None
    except UnicodeDecodeError as error:
        raise BadJson(where, f"not UTF-8 at byte offset {error.start}") from None
    except RecursionError:
        raise BadJson(where, "nested deeper than a JSON record can be") from None
    except MemoryError:
        raise BadJson(where, "too large to read into memory") from None
    except ValueError as error:  # e.g. an integer of more digits than Python converts
        raise BadJson(where, f"cannot read a value ({error})") from None


def read_json(path: Path | str, limit: int = MAX_RECORD_BYTES) -> Any:
    """The JSON document in the regular file ``path`` of at most ``limit`` bytes.

    FileNotFoundError passes through (a caller tells "not written yet" from "damaged");
    everything else that makes the file unreadable is :class:`BadJson`.
    """
    try:
        data = read_regular(path, limit)
    except FileNotFoundError:
        raise
    except NotRegularFile as error:
        raise BadJson(path, f"a {error.kind}, not a file", error.kind) from None
    except OSError as error:
        if error.errno == errno.EFBIG:
            raise BadJson(path, f"over the {limit} bytes this file may be") from None
        raise BadJson(path, error.strerror or str(error)) from None
    except MemoryError:
        raise BadJson(path, "too large to read into memory") from None
    return decode_json(data, path)
