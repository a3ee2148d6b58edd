"""A stage's captured stream: redacted as it is read, kept in memory while small, streamed to
its file past :data:`SPILL_BYTES` or once the stage runs long, and read back as text, lines or
a tail without ever holding a chatty stage's whole output (engine/stages.py reads the pipes).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.engine.metrics import file_lines
from pytest_benchmark_agent.util.fsutil import open_creating
from pytest_benchmark_agent.util.redact import stage_text

#: Output kept in memory up to this many bytes per stream; beyond, it streams to its file.
SPILL_BYTES = 1 << 20
#: How much of a stream's end its tail reads (the last lines of stderr, not all of it).
_TAIL_BYTES = 1 << 16
#: A line longer than this is redacted in parts, cut after its last blank, else this far from
#: its end: a secret without blanks longer than the part kept back could be cut in two.
_LONG_LINE_BYTES = 1 << 16
_KEPT_BACK_BYTES = 1 << 12


class StreamRedactor:
    """A byte stream redacted line by line (:func:`.redact.stage_text`), so that a secret the
    stage prints never reaches its log file, and one split between two reads is still found:
    an incomplete line is held back until its end (or until it is long). Bytes that are not
    UTF-8 pass through unchanged."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        """The redacted complete lines of what was held back and ``chunk``."""
        data = self._pending + chunk
        cut = data.rfind(b"\n") + 1
        if not cut and len(data) > _LONG_LINE_BYTES:
            blank = max(data.rfind(b" "), data.rfind(b"\t"))
            cut = blank + 1 if blank >= 0 else len(data) - _KEPT_BACK_BYTES
        self._pending = data[cut:]
        return _redacted(data[:cut])

    def flush(self) -> bytes:
        """What was held back, redacted (the stream ended)."""
        data, self._pending = self._pending, b""
        return _redacted(data)


def _redacted(data: bytes) -> bytes:
    text = data.decode("utf-8", "surrogateescape")
    clean = stage_text(text)
    return data if clean == text else clean.encode("utf-8", "surrogateescape")


class StageOutput:
    """One captured stream, redacted (:class:`StreamRedactor`): in memory while small, streamed
    to ``path`` once past the spill size.

    The file (and its folder) is created only when the stage wrote something. A write that
    fails, or writes only part of its chunk and then fails (a full disk), is kept as
    :attr:`error`, the part written is emptied (room for the run's records, which matter more
    than a log cut short) and the rest of the output is discarded, so the stage is
    still read to its end (it never blocks on a full pipe).
    """

    def __init__(
        self,
        path: Path,
        spill_bytes: int = SPILL_BYTES,
        echo: Callable[[str, bytes], None] | None = None,
    ):
        self.path = path
        self._spill = spill_bytes
        self._buffer = bytearray()
        self._file: Any = None
        self.error: OSError | None = None
        self._redactor = StreamRedactor()
        #: Called with (stream name, redacted chunk) for every chunk the redactor lets
        #: through, and (name, b"") at the end: ``-s`` shows what the log file holds.
        self._echo = echo

    def write(self, chunk: bytes) -> None:
        redacted = self._redactor.feed(chunk)
        if self._echo is not None and redacted:
            self._echo(self.path.stem, redacted)
        if self.error is None:
            self._keep(redacted)

    def _keep(self, chunk: bytes) -> None:
        if not chunk:
            return
        if self._file is None:
            self._buffer += chunk
            if len(self._buffer) > self._spill:
                self._guarded(self._spill_buffer)
        else:
            self._guarded(lambda: self._write_all(chunk))

    def go_live(self) -> None:
        """From now on every chunk goes to the file as it is read (the stage runs long)."""
        self._spill = 0
        if self._buffer and self._file is None and self.error is None:
            self._guarded(self._spill_buffer)

    def close(self) -> None:
        """Write what is in memory (if anything) and close the file."""
        rest = self._redactor.flush()
        if self._echo is not None:
            if rest:
                self._echo(self.path.stem, rest)
            self._echo(self.path.stem, b"")
        if self.error is None:
            self._keep(rest)
        if self._file is None and self._buffer and self.error is None:
            self._guarded(self._spill_buffer)
        if self._file is not None:
            self._guarded(self._file.close)

    def _spill_buffer(self) -> None:
        self._file = self._open()
        self._write_all(self._buffer)
        self._buffer = bytearray()

    def _write_all(self, data: bytes | bytearray) -> None:
        """Write all of ``data``: an unbuffered write may write part of it and say so (a disk
        with less room than the chunk), and the part left was lost without an error; written
        again, the rest raises the disk's error (ENOSPC) instead."""
        view = memoryview(data)
        while view:
            written = self._file.write(view)
            if not written:
                raise OSError(errno.EIO, "the write wrote nothing", str(self.path))
            view = view[written:]

    def _guarded(self, action: Callable[[], object]) -> None:
        try:
            action()
        except OSError as exc:
            exc.filename = exc.filename or str(self.path)
            self.error = self.error or exc
            self._buffer = bytearray()
            if self._file is not None:
                with contextlib.suppress(OSError):
                    self._file.close()
                with contextlib.suppress(OSError):
                    os.truncate(self.path, 0)

    @property
    def written(self) -> bool:
        return self._file is not None

    def text(self) -> str:
        if self._file is None:
            return self._buffer.decode(errors="replace")
        return self.path.read_text(errors="replace")

    def lines(self) -> Iterable[str]:
        """The output's lines, streamed from its file once it spilled (never read whole)."""
        if self._file is None:
            return self._buffer.decode(errors="replace").splitlines()
        return file_lines(self.path)

    def last_lines(self, count: int, limit: int = _TAIL_BYTES) -> tuple[list[str], bool]:
        """The last ``count`` lines of the output's last ``limit`` bytes, and whether the first
        of them was read from its middle (the output is longer and they are all its lines)."""
        if self._file is None:
            data, size = bytes(self._buffer[-limit:]), len(self._buffer)
        else:
            with open(self.path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                handle.seek(max(0, size - limit))
                data = handle.read(limit)
        lines = data.decode(errors="replace").rstrip().splitlines()
        return lines[-count:], size > len(data) and len(lines) <= count

    def _open(self) -> Any:
        fd = open_creating(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        return open(fd, "wb", buffering=0)  # each read's chunk is on disk at once
