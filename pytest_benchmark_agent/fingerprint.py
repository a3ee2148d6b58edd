"""Environment / code / accelerator fingerprints of a run, and which differences matter.

:func:`collect_fingerprint` is called once per session: it reads the interpreter, the OS and
``/proc``, runs a few ``git`` plumbing commands per code path and asks NVML once; no network,
no heavy imports (pynvml loads only through :mod:`.nvml`, ~20 ms). Its sections:

- ``env``: Python version and implementation, OS, distribution, kernel, machine, CPU model,
  CPU count and CPUs available to the process, total memory, hostname; ``packages``: versions
  of the packages the benchmark named; ``tool_packages``: this plugin and its dependencies.
- ``code``: per code path (as the config wrote it): in git, the commit, the tree hash of the
  path at that commit, whether it is dirty and a hash of its uncommitted changes (the diff
  against HEAD plus the untracked files' content); outside git, a hash of its content. Excluded
  files and folders inside a code path (the data directory, the benchmark file) count nowhere:
  where one is committed, ``tree`` is a hash of the path's listing at HEAD without them.
- ``accelerator``: NVML's driver and CUDA versions and each device, or the reason it is absent.
- ``vars``: the declared environment variables (None when unset), secrets redacted.

:func:`compare_fingerprints` splits the differences in two. **Blocking** (the two runs did not
measure the same thing): the code's tree, dirty flag and change hash; Python major.minor and
implementation; OS, distribution, machine, kernel major.minor; CPU model and counts; total
memory by more than 10%; the benchmark's own packages; the accelerator's presence, device
models, memory, driver and CUDA versions (benign when the benchmark uses no GPU); every
declared variable; any field this module does not know. **Benign** (listed in the report): the
commit when the tree is the same (a commit that did not touch the code under test), the
checkout's location, hostname, Python patch, kernel patch, this tool's own packages (stages are
subprocesses; pytest or scipy do not time them), device UUIDs (another card of one model).
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import os
import platform
import re
import socket
import subprocess
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import nvml
from .errors import BenchError

SCHEMA = 1
_TOOL = "pytest-benchmark-agent"
_SKIP_DIRS = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})


class FingerprintError(BenchError):
    """A fingerprint that cannot be taken as configured (a code path that does not exist)."""


def collect_fingerprint(code_paths: list[Path], env_vars: list[str],
                        packages: list[str] | None = None, *,
                        exclude: Iterable[Path] | None = None) -> dict[str, Any]:
    """The fingerprint of this machine and of the code under test (no code paths: ``.``).

    ``exclude`` lists folders and files that are not code even inside a code path; by default
    the data directory (``$BENCHMARK_HOME``, else ``./benchmark_data``), whose cache and runs
    change on every run and would otherwise make every run's code look different. A code path
    named itself is never excluded.
    """
    paths = list(code_paths) or [Path(".")]
    if exclude is None:
        exclude = [Path(os.environ.get("BENCHMARK_HOME", "benchmark_data"))]
    skipped = [Path(folder).resolve() for folder in exclude]
    return {
        "schema": SCHEMA,
        "env": _env(packages or []),
        "code": {str(path): _code(Path(path), skipped) for path in paths},
        "accelerator": _accelerator(),
        "vars": _vars(env_vars),
    }


def _vars(names: list[str]) -> dict[str, Any]:
    """The declared variables' values (None when unset), secrets redacted; the redaction
    patterns (~2 ms to import) load only for a benchmark that declares variables."""
    if not names:
        return {}
    from .redact import redact_value

    return {name: redact_value(name, os.environ.get(name)) for name in names}


# -- env ---------------------------------------------------------------------------------------

def _env(packages: list[str]) -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "os": platform.system(),
        "distro": _distro(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "memory_total_mb": _memory_total_mb(),
        "hostname": socket.gethostname(),
        "packages": {name: _version(name) for name in packages},
        "tool_packages": {name: _version(name) for name in _tool_packages()},
    }


def _distro() -> str:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        mac = platform.mac_ver()[0]
        return f"macos {mac}" if mac else platform.version()
    fields = dict(re.findall(r'^(\w+)="?([^"\n]*)"?$', text, re.MULTILINE))
    return f"{fields.get('ID', 'linux')} {fields.get('VERSION_ID', '')}".strip()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith(("model name", "Model", "Hardware")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_total_mb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20)
    except (ValueError, OSError, AttributeError):
        return None


def _version(name: str) -> str | None:
    """``importlib.metadata.version(name)``, or None where it is not installed."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    return next(iter(_header(dist, "Version")), None) or dist.version


def _tool_packages() -> list[str]:
    try:
        dist = metadata.distribution(_TOOL)
    except metadata.PackageNotFoundError:
        return []
    requires = _header(dist, "Requires-Dist") or dist.requires or []  # else egg-info's requires
    names = [re.match(r"[A-Za-z0-9._\-]+", req).group(0) for req in requires
             if "extra ==" not in req]
    return [_TOOL, *names]


def _header(dist: metadata.Distribution, name: str) -> list[str]:
    """The values of one field of a distribution's core metadata (the file ``dist.metadata``
    reads), from its header lines: the email parser ``dist.metadata`` runs costs ~0.7 ms a
    package, most of it on the long description below the header (scipy, numpy)."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    head = re.split(r"\r?\n\r?\n", text, maxsplit=1)[0]
    field = re.compile(rf"^{re.escape(name)}:[ \t]*(.*(?:\r?\n[ \t].*)*)",
                       re.MULTILINE | re.IGNORECASE)
    return [re.sub(r"\r?\n[ \t]+", " ", value).strip() for value in field.findall(head)]


# -- code --------------------------------------------------------------------------------------

def _git(where: Path, *args: str) -> bytes | None:
    """A git command's stdout, or None when git is missing or fails (not a repo, no HEAD)."""
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")  # never take the index lock of a live repo
    try:
        done = subprocess.run(["git", "-C", str(where), *args], capture_output=True, env=env,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _code(path: Path, skipped: list[Path]) -> dict[str, Any]:
    if not path.exists():
        raise FingerprintError(
            f"code: {path} does not exist (resolved from {Path.cwd()}). Fix: list files or "
            f"folders of the code under test in the benchmark file's `code:` field.")
    path = path.resolve()
    where = path if path.is_dir() else path.parent
    top = _git(where, "rev-parse", "--show-toplevel")
    if top is None:
        return {"vcs": None, "content_hash": _hash_files(path, _walk(path, skipped))}
    root = Path(top.decode().strip())
    rel = path.relative_to(root).as_posix() if path != root else "."
    inside = [s.relative_to(root).as_posix() for s in skipped
              if s.is_relative_to(path) and s != path]
    pathspec = [rel, *(f":(exclude){s}" for s in inside)]
    commit = _git(root, "rev-parse", "--verify", "-q", "HEAD")
    listed = _git(root, "ls-files", "-z", "--others", "--exclude-standard", "--", *pathspec)
    untracked = sorted(root / name for name in (listed or b"").decode().split("\0") if name)
    if commit is None:  # a repository without commits: its content is all there is
        tracked = _git(root, "ls-files", "-z", "--", *pathspec) or b""
        files = sorted({*untracked, *(root / n for n in tracked.decode().split("\0") if n)})
        return {"vcs": "git", "root": str(root), "commit": None, "tree": None, "dirty": True,
                "diff_hash": _hash_files(root, iter(files))}
    spec = "HEAD:" if rel == "." else f"HEAD:{rel}"
    tree = _git(root, "rev-parse", "--verify", "-q", spec)
    if tree and inside:
        tree = _tree_without(root, rel, inside) or tree
    diff = _git(root, "diff", "HEAD", "--binary", "--no-ext-diff", "--", *pathspec) or b""
    dirty = bool(diff or untracked)
    entry = {
        "vcs": "git",
        "root": str(root),
        "commit": commit.decode().strip(),
        "tree": tree.decode().strip() if tree else None,
        "dirty": dirty,
        "diff_hash": _hash_files(root, iter(untracked), prefix=diff) if dirty else None,
    }
    if tree is None:  # not in HEAD (new, or git-ignored): git alone does not pin its content
        entry["content_hash"] = _hash_files(path, _walk(path, skipped))
    return entry


def _tree_without(root: Path, rel: str, inside: list[str]) -> bytes | None:
    """``ls-tree:`` and a hash of the path's listing at HEAD less the excluded paths, where one
    of them is committed (else None: the tree itself is the identity). ls-tree takes no
    ``:(exclude)`` pathspec, so the listing is filtered here."""
    listing = _git(root, "ls-tree", "-r", "-z", "--full-tree", "HEAD", "--", rel) or b""
    entries = [entry for entry in listing.split(b"\0") if entry]

    def excluded(entry: bytes) -> bool:
        name = os.fsdecode(entry.split(b"\t", 1)[-1])
        return any(name == s or name.startswith(s + "/") for s in inside)

    kept = [entry for entry in entries if not excluded(entry)]
    if len(kept) == len(entries):
        return None
    return b"ls-tree:" + hashlib.sha256(b"\0".join(kept)).hexdigest().encode()


def _walk(path: Path, skipped: list[Path]) -> Iterator[Path]:
    """Files under ``path`` in a stable order, without caches, bytecode and skipped paths."""
    if path.is_file():
        yield path
        return
    for folder, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs
                         if d not in _SKIP_DIRS and Path(folder, d) not in skipped)
        for name in sorted(files):
            if not name.endswith(".pyc") and Path(folder, name) not in skipped:
                yield Path(folder, name)


def _hash_files(base: Path, files: Iterator[Path], prefix: bytes = b"") -> str:
    """sha256 over ``prefix`` and each file's path (relative to ``base``) and content."""
    digest = hashlib.sha256(prefix)
    for file in files:
        name = file.relative_to(base).as_posix() if file != base else file.name
        digest.update(b"\0file\0" + name.encode() + b"\0")
        try:
            with open(file, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
        except OSError as error:  # a dangling link or unreadable file still counts, by name
            digest.update(f"<unreadable: {error.strerror}>".encode())
    return digest.hexdigest()


# -- accelerator -------------------------------------------------------------------------------

def _accelerator() -> dict[str, Any]:
    probe = nvml.gpu_probe()
    devices = probe.devices or []
    return {
        "available": probe.devices is not None,
        "reason": probe.reason,
        "driver_version": devices[0].driver_version if devices else None,
        "cuda_driver_version": devices[0].cuda_driver_version if devices else None,
        "devices": [{"index": d.index, "uuid": d.uuid, "name": d.name,
                     "memory_total_mb": d.memory_total_mb} for d in devices],
    }


# -- comparison --------------------------------------------------------------------------------

@dataclass
class FingerprintDiff:
    """Differences between two fingerprints, each as ``"field: a -> b"``."""

    blocking: list[str] = field(default_factory=list)
    benign: list[str] = field(default_factory=list)

    @property
    def comparable(self) -> bool:
        """Whether the runs may be compared (no blocking difference)."""
        return not self.blocking


_ABSENT = object()
_NAMED = {("code",), ("vars",), ("env", "packages"), ("env", "tool_packages")}
Rule = Callable[[Any, Any], bool]


def _always(a: Any, b: Any) -> bool:
    return True


def _never(a: Any, b: Any) -> bool:
    return False


def _leading(n: int) -> Rule:
    """Blocking when the first ``n`` numeric components differ (3.11.7 vs 3.12.0 at n=2)."""
    def rule(a: Any, b: Any) -> bool:
        return re.findall(r"\d+", str(a))[:n] != re.findall(r"\d+", str(b))[:n]
    return rule


def _relative(tolerance: float) -> Rule:
    def rule(a: Any, b: Any) -> bool:
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
            return True
        return abs(a - b) > tolerance * max(abs(a), abs(b))
    return rule


# First match wins; "*" matches one path element, "**" the rest of the path.
_RULES: list[tuple[tuple[str, ...], Rule]] = [
    (("schema",), _never),
    (("env", "python"), _leading(2)),
    (("env", "kernel"), _leading(2)),
    (("env", "memory_total_mb"), _relative(0.10)),
    (("env", "hostname"), _never),
    (("env", "tool_packages", "*"), _never),
    (("code", "*", "commit"), _never),
    (("code", "*", "root"), _never),
    (("accelerator", "reason"), _never),
    (("accelerator", "devices", "*", "uuid"), _never),
    (("accelerator", "devices", "*", "index"), _never),
]


def _matches(pattern: tuple[str, ...], path: tuple[Any, ...]) -> bool:
    if pattern and pattern[-1] == "**":
        return len(path) >= len(pattern) - 1 and _matches(pattern[:-1], path[:len(pattern) - 1])
    if len(pattern) != len(path):
        return False
    return all(p in ("*", x) for p, x in zip(pattern, path, strict=True))


def _flatten(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Leaves of nested dicts and lists by path; an empty container has no leaves."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _flatten(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _flatten(item, (*path, index))
    else:
        yield path, value


def _label(path: tuple[Any, ...]) -> str:
    text = str(path[0])
    for depth, part in enumerate(path[1:], start=1):
        named = path[:depth] in _NAMED or isinstance(part, int)
        text += f"[{part}]" if named else f".{part}"
    return text


def _show(value: Any) -> str:
    return "<absent>" if value is _ABSENT else "null" if value is None else str(value)


def compare_fingerprints(a: dict[str, Any], b: dict[str, Any], *,
                         uses_gpu: bool = True) -> FingerprintDiff:
    """Every field where ``a`` and ``b`` differ, split into blocking and benign (module doc).

    ``uses_gpu=False`` (no stage pins a GPU) makes accelerator differences benign.
    """
    left, right = dict(_flatten(a)), dict(_flatten(b))
    rules = list(_RULES)
    if not uses_gpu:
        rules.insert(0, (("accelerator", "**"), _never))
    diff = FingerprintDiff()
    for path in sorted({*left, *right}, key=lambda p: tuple(map(str, p))):
        x, y = left.get(path, _ABSENT), right.get(path, _ABSENT)
        if x == y:
            continue
        rule = next((r for pattern, r in rules if _matches(pattern, path)), _always)
        blocking = rule is not _never and (x is _ABSENT or y is _ABSENT or rule(x, y))
        (diff.blocking if blocking else diff.benign).append(
            f"{_label(path)}: {_show(x)} -> {_show(y)}")
    return diff
