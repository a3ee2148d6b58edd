"""Crash-safe file writes, inter-process locks, and reads of user files that never block
(used by records, cache, the plan, config loading and workers)."""

from __future__ import annotations

import codecs
import contextlib
import errno
import fcntl
import functools
import os
import stat
import tempfile
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

#: The encoding error handler writing U+FFFD for what UTF-8 cannot encode (a lone surrogate).
_REPLACEMENT = "pytest-benchmark-agent-fffd"


def _replacement(error: UnicodeError) -> tuple[bytes, int]:
    """U+FFFD, as UTF-8 bytes (the encoder takes no other text), for each character refused."""
    start, end = error.start, error.end  # type: ignore[attr-defined]
    return "\ufffd".encode() * (end - start), end


codecs.register_error(_REPLACEMENT, _replacement)


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so readers see the old or the new file, never a torn one.

    The file keeps the mode it had (a user's bench.yaml stays 0644), and a new one gets the
    mode ``open()`` would give it (0666 less the umask), not mkstemp's 0600. The folder is
    fsynced after the rename, so the new name survives a power cut too. The file is UTF-8,
    a lone surrogate (text decoded with ``surrogateescape``: a file name or environment value
    that is not UTF-8) written as U+FFFD, so every reader can read it back.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "w", encoding="utf-8", errors=_REPLACEMENT) as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not exc.filename:  # a write (ENOSPC) names no file
            exc.filename = str(path)
        raise
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new file in ``folder`` durable (where the platform allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on a directory; the rename still stands
        pass
    finally:
        os.close(fd)


def _mode_for(path: Path) -> int:
    """The permission bits ``path`` has, else those a new file gets under the umask."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


@functools.cache
def _umask() -> int:
    """This process's umask, read without changing it where Linux tells it (os.umask can only
    be read by setting it, which races with threads creating files)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def open_creating(path: Path, flags: int) -> int:
    """``os.open``, making the parent folder only when it is missing (not on every call)."""
    try:
        return os.open(path, flags, 0o644)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, flags, 0o644)


def open_appending(path: Path) -> int:
    """A descriptor of ``path`` opened for appending (O_APPEND), created if missing."""
    return open_creating(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)


def write_line(fd: int, line: str) -> None:
    """Append one line in a single write, so appenders to the same O_APPEND file never
    interleave (and a crash after it returns leaves the whole line in the file).

    A disk that fills mid-line makes a short write: the rest is tried, and where it fails the
    part written is cut off again before the error is raised, so no torn line is left for the
    next one to be glued to.
    """
    data = (line.rstrip("\n") + "\n").encode()
    written = os.write(fd, data)
    try:
        while written < len(data):
            written += os.write(fd, data[written:])
    except OSError:
        os.ftruncate(fd, os.fstat(fd).st_size - written)
        raise


def append_line(path: Path, line: str) -> None:
    """Append one line to ``path`` (see :func:`write_line`), opening it for this line only."""
    fd = open_appending(path)
    try:
        write_line(fd, line)
    finally:
        os.close(fd)


def acquire_lock(path: Path, *, shared: bool = False, wait: bool = True) -> int | None:
    """Take an flock on ``path`` and return its descriptor (None: busy and ``wait`` is False).

    The kernel releases it when the holder exits, even on a crash, so a lock is never stale.
    """
    fd = open_creating(path, os.O_RDWR | os.O_CREAT)
    mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB)
    try:
        fcntl.flock(fd, mode)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def release_lock(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


@contextlib.contextmanager
def file_lock(path: Path, *, shared: bool = False) -> Iterator[None]:
    """Hold an flock on ``path`` for the ``with`` block (see :func:`acquire_lock`)."""
    fd = acquire_lock(path, shared=shared)
    assert fd is not None
    try:
        yield
    finally:
        release_lock(fd)


def utc_now() -> str:
    """An ISO-8601 UTC timestamp with milliseconds, as the records use (``...T14:05:11.120Z``)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")[:-6] + "Z"


#: What a path that is not a regular file is, as messages and fingerprints name it.
_KINDS = {
    stat.S_IFIFO: "fifo",
    stat.S_IFSOCK: "socket",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
    stat.S_IFDIR: "folder",
}


class NotRegularFile(OSError):
    """A path that is not a regular file (a FIFO, a device, a folder, or a link to one): it is
    never read, since reading one can block forever (a FIFO) or never end (``/dev/zero``)."""

    def __init__(self, path: Path | str, kind: str) -> None:
        super().__init__(errno.EINVAL, f"is a {kind}, not a regular file", str(path))
        self.kind = kind


def file_kind(mode: int, linked: bool = False) -> str:
    """``fifo``, ``character device``...; ``link to fifo`` when reached through a link."""
    kind = _KINDS.get(stat.S_IFMT(mode), "special file")
    return f"link to {kind}" if linked else kind


def regular_chunks(path: Path | str, limit: int | None = None) -> Iterator[bytes]:
    """The bytes of a regular file (a link to one followed), in chunks, read without blocking.

    Anything else raises :class:`NotRegularFile` before a byte is read: the path is stat'ed,
    opened with ``O_NONBLOCK`` (and ``O_NOFOLLOW`` unless it is a link) and checked again on
    the open descriptor, and at most the size ``fstat`` gave is read, so a file that keeps
    growing ends too. A file over ``limit`` bytes raises ``EFBIG`` before it is read.
    """
    linked = stat.S_ISLNK(os.lstat(path).st_mode)
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegularFile(path, file_kind(mode, linked))
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not linked:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # replaced between the stat and the open
            raise NotRegularFile(path, file_kind(info.st_mode, linked))
        if limit is not None and info.st_size > limit:
            raise OSError(
                errno.EFBIG,
                f"is {info.st_size} bytes, over the {limit} this file may be",
                str(path),
            )
        left = info.st_size
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            left -= len(chunk)
            yield chunk
    finally:
        os.close(fd)


def outside(path: Path, *folders: Path) -> Path | None:
    """Where ``path`` really is when that is outside every one of ``folders`` (a link a stage
    left to ``/etc/shadow``, ``/usr`` or ``/``), else None: such a path is never read or
    hashed as a stage's output."""
    resolved = path.resolve()
    for folder in folders:
        if resolved.is_relative_to(folder.resolve()):
            return None
    return resolved


def read_regular(path: Path | str, limit: int | None = None) -> bytes:
    """The whole content of a regular file, read as :func:`regular_chunks` does."""
    return b"".join(regular_chunks(path, limit))
