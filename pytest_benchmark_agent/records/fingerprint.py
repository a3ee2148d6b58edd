"""Environment / code / accelerator fingerprints of a run, and which differences matter.

:func:`collect_fingerprint` is called once per session: it reads the interpreter, the OS and
``/proc``, runs a few ``git`` plumbing commands and asks NVML once; no network, no heavy
imports (pynvml loads only through :mod:`.nvml`, ~20 ms). Its sections:

- ``env``: Python version and implementation, OS, distribution, kernel, machine, CPU model,
  CPU count and CPUs available to the process, total memory, hostname; ``packages``: versions
  of the packages the benchmark named; ``tool_packages``: this plugin and its dependencies;
  ``counter_backend`` (only when a stage asks for ``counters:``): the backend and its version
  (engine/counters.py), so counts of different backends are never compared.
- ``code``: per declared code path (:func:`default_code`: the ``code:`` paths; else, in git,
  the benchmark's folder; else the stage files named in ``inputs:``; else nothing). In git, the
  commit, the tree hash of the path at that commit, whether its tracked files changed and a
  hash of that diff (untracked files never count); outside git, a hash of its content.
- ``code_identity``: what code the run measured, for comparisons and labels
  (:func:`code_label`): in the git work tree holding the benchmark, the commit, branch, and
  whether the tracked files differ from it with a hash of the diff; outside git, a hash of the
  declared code (None when nothing is declared).
- ``accelerator``: NVML's driver and CUDA versions and each device, or the reason it is absent.
- ``vars``: the declared environment variables (None when unset), secrets redacted.

Excluded paths (the data directory, the benchmark file) count nowhere in ``code`` or
``code_identity``; where one is committed, ``tree`` hashes the path's listing without it. Only
regular files are read (never past the size ``fstat`` gave, never blocking): a FIFO, socket,
device or link to one counts by name and type.

:func:`compare_fingerprints` splits the differences in three. **Code** (what a comparison of
code is about: neither blocking nor benign): every field of ``code`` and ``code_identity``.
**Blocking** (the two runs did not measure the same thing): Python major.minor and
implementation; OS, distribution, machine, kernel major.minor; CPU model and counts; total
memory by more than 10%; the benchmark's own packages; the accelerator's presence, device
models, memory, driver and CUDA versions (benign when the benchmark uses no GPU); every
declared variable; the counting backend; any field this module does not know. **Benign**
(listed in the report): hostname, Python patch, kernel patch, this tool's own packages (stages
are subprocesses; pytest or scipy do not time them), device UUIDs (another card of one model).
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import os
import platform
import re
import socket
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.errors import BenchError
from pytest_benchmark_agent.guards import gpu as nvml
from pytest_benchmark_agent.util.fsutil import NotRegularFile, regular_chunks

SCHEMA = 1
_TOOL = "pytest-benchmark-agent"
_SKIP_DIRS = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})


class FingerprintError(BenchError):
    """A fingerprint that cannot be taken as configured (a code path that does not exist)."""


def collect_fingerprint(
    code_paths: list[Path],
    env_vars: list[str],
    packages: list[str] | None = None,
    *,
    exclude: Iterable[Path] | None = None,
    origin: Path | None = None,
    counter_backend: Callable[[], str | None] | None = None,
) -> dict[str, Any]:
    """The fingerprint of this machine and of the code under test.

    ``code_paths`` is the declared code (see :func:`default_code`; none: an empty ``code``
    section). ``origin`` is the benchmark's folder (default: the current one): the git
    repository holding it names ``code_identity``. ``exclude`` lists folders and files that
    are not code even inside a code path or the repository; by default the data directory
    (``$BENCHMARK_HOME``, else ``./benchmark_data``), whose cache and runs change on every run.
    A code path named itself is never excluded. ``counter_backend``: where a stage counts
    (``counters:``), what names the counting backend (:func:`.engine.counters.fingerprint_label`).
    """
    if exclude is None:
        exclude = [Path(os.environ.get("BENCHMARK_HOME", "benchmark_data"))]
    skipped = [Path(folder).resolve() for folder in exclude]
    code = {str(path): _code(Path(path), skipped) for path in code_paths}
    env = _env(packages or [])
    if counter_backend is not None:
        env["counter_backend"] = counter_backend()
    return {
        "schema": SCHEMA,
        "env": env,
        "code": code,
        "code_identity": _identity(Path(origin or "."), skipped, code),
        "accelerator": _accelerator(),
        "vars": _vars(env_vars),
    }


def _vars(names: list[str]) -> dict[str, Any]:
    """The declared variables' values (None when unset), secrets redacted; the redaction
    patterns (~2 ms to import) load only for a benchmark that declares variables."""
    if not names:
        return {}
    from pytest_benchmark_agent.util.redact import redact_value

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
        "cpu_available": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
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
    names = [
        re.match(r"[A-Za-z0-9._\-]+", req).group(0) for req in requires if "extra ==" not in req
    ]
    return [_TOOL, *names]


def _header(dist: metadata.Distribution, name: str) -> list[str]:
    """The values of one field of a distribution's core metadata (the file ``dist.metadata``
    reads), from its header lines: the email parser ``dist.metadata`` runs costs ~0.7 ms a
    package, most of it on the long description below the header (scipy, numpy)."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    head = re.split(r"\r?\n\r?\n", text, maxsplit=1)[0]
    field = re.compile(
        rf"^{re.escape(name)}:[ \t]*(.*(?:\r?\n[ \t].*)*)", re.MULTILINE | re.IGNORECASE
    )
    return [re.sub(r"\r?\n[ \t]+", " ", value).strip() for value in field.findall(head)]


# -- code --------------------------------------------------------------------------------------


def _git(where: Path, *args: str) -> bytes | None:
    """A git command's stdout, or None when git is missing or fails (not a repo, no HEAD)."""
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")  # never take the index lock of a live repo
    try:
        done = subprocess.run(
            ["git", "-C", str(where), *args], capture_output=True, env=env, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def git_root(where: Path) -> Path | None:
    """The top of the git work tree holding ``where`` (a folder), or None outside git."""
    top = _git(where, "rev-parse", "--show-toplevel")
    return Path(os.fsdecode(top.strip())) if top else None


def default_code(folder: Path, declared: list[Path], inputs: Iterable[Path]) -> list[Path]:
    """The code of a benchmark in ``folder``: its ``code:`` paths; else, in git, the folder
    (its tracked files); else the stage inputs named in ``inputs:`` (maybe none: nothing but
    what the benchmark declares is code outside git)."""
    if declared:
        return declared
    if git_root(folder) is not None:
        return [folder]
    return sorted(
        {Path(os.path.abspath(path)) for path in inputs if path.exists() or path.is_symlink()}
    )


def _diff(root: Path, base: str, pathspec: list[str]) -> bytes:
    """``git diff`` of the tracked files in ``pathspec`` against ``base`` (a commit, or the
    empty tree of a repository without one), independent of the user's diff settings."""
    return (
        _git(
            root,
            "diff",
            base,
            "--binary",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-renames",
            "--",
            *pathspec,
        )
        or b""
    )


def _base(root: Path, commit: str | None) -> str | None:
    """What the work tree is compared with: HEAD, else the empty tree (everything tracked)."""
    if commit is not None:
        return commit
    empty = _git(root, "hash-object", "-t", "tree", os.devnull)
    return empty.decode().strip() if empty else None


def _excludes(root: Path, skipped: list[Path], under: Path) -> list[str]:
    """``:(exclude)`` pathspecs (relative to ``root``) of the skipped paths strictly below
    ``under``."""
    top = root.resolve()
    return [
        f":(exclude){s.relative_to(top).as_posix()}"
        for s in skipped
        if s.is_relative_to(under) and s != under and s.is_relative_to(top)
    ]


def _identity(origin: Path, skipped: list[Path], code: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What code a run measured (module doc): the commit of the repository holding ``origin``
    and its tracked changes, else a hash of the declared code's fingerprints."""
    origin = origin.resolve()
    root = git_root(origin if origin.is_dir() else origin.parent)
    if root is None:
        if not code:
            return {"vcs": None, "content_hash": None}
        digest = hashlib.sha256()
        for path, entry in sorted(code.items()):
            name = os.path.relpath(path, origin)
            stable = {k: v for k, v in sorted(entry.items()) if k != "root"}
            digest.update(f"{name}\0{stable}\0".encode())
        return {"vcs": None, "content_hash": digest.hexdigest()}
    head = _git(root, "rev-parse", "--verify", "-q", "HEAD")
    commit = head.decode().strip() if head else None
    branch = _git(root, "symbolic-ref", "-q", "--short", "HEAD")
    base = _base(root, commit)
    diff = _diff(root, base, [".", *_excludes(root, skipped, root.resolve())]) if base else b""
    return {
        "vcs": "git",
        "commit": commit,
        "short": commit[:7] if commit else None,
        "branch": (branch.decode().strip() or None) if branch else None,
        "dirty": bool(diff),
        "diff_hash": hashlib.sha256(diff).hexdigest() if diff else None,
    }


def code_label(identity: Mapping[str, Any] | None) -> str:
    """A code identity in a few characters: ``a1b2c3d``, ``a1b2c3d+dirty:1f2e3d4``,
    ``content:1f2e3d4``, or ``unknown`` (no identity, no commit, nothing declared)."""
    if not identity:
        return "unknown"
    if identity.get("vcs") == "git":
        commit = identity.get("commit")
        if not commit:
            return "unknown"
        short = identity.get("short") or str(commit)[:7]
        if not identity.get("dirty"):
            return short
        change = identity.get("diff_hash")
        return f"{short}+dirty:{str(change)[:7]}" if change else f"{short}+dirty"
    content = identity.get("content_hash")
    return f"content:{str(content)[:7]}" if content else "unknown"


def _code(path: Path, skipped: list[Path]) -> dict[str, Any]:
    if not (path.exists() or path.is_symlink()):
        raise FingerprintError(
            f"code: {path} does not exist (resolved from {Path.cwd()}). Fix: list files or "
            f"folders of the code under test in the benchmark file's `code:` field."
        )
    path = path.resolve()
    where = path if path.is_dir() else path.parent
    root = git_root(where)
    if root is None:
        return {"vcs": None, "content_hash": _hash_files(path, _walk(path, skipped))}
    top = root.resolve()
    rel = path.relative_to(top).as_posix() if path != top else "."
    inside = [spec.removeprefix(":(exclude)") for spec in _excludes(root, skipped, path)]
    pathspec = [rel, *(f":(exclude){s}" for s in inside)]
    head = _git(root, "rev-parse", "--verify", "-q", "HEAD")
    commit = head.decode().strip() if head else None
    tree = None
    if commit is not None:
        tree = _git(root, "rev-parse", "--verify", "-q", "HEAD:" if rel == "." else f"HEAD:{rel}")
    if tree and inside:
        tree = _tree_without(root, rel, inside) or tree
    base = _base(root, commit)
    diff = _diff(root, base, pathspec) if base else b""
    entry = {
        "vcs": "git",
        "root": str(root),
        "commit": commit,
        "tree": tree.decode().strip() if tree else None,
        "dirty": bool(diff),
        "diff_hash": hashlib.sha256(diff).hexdigest() if diff else None,
    }
    if commit is not None and tree is None:
        # Not in HEAD (new, or git-ignored, named in `code:`): git alone does not pin its content.
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
    """Entries under ``path`` in a stable order, without caches, bytecode and skipped paths
    (links to folders are not followed)."""
    if not path.is_dir():
        yield path
        return
    for folder, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and Path(folder, d) not in skipped)
        for name in sorted(files):
            if not name.endswith(".pyc") and Path(folder, name) not in skipped:
                yield Path(folder, name)


def _hash_files(base: Path, files: Iterator[Path]) -> str:
    """sha256 over each file's path (relative to ``base``) and content."""
    digest = hashlib.sha256()
    for file in files:
        name = file.relative_to(base).as_posix() if file != base else file.name
        digest.update(b"\0file\0" + name.encode() + b"\0")
        _hash_file(digest, file)
    return digest.hexdigest()


def _hash_file(digest: Any, file: Path) -> None:
    """Add a regular file's content to ``digest``; anything else counts by its type.

    Never blocks: a FIFO, socket or device (or a link to one, such as ``/dev/zero``) is never
    read (:func:`~pytest_benchmark_agent.util.fsutil.regular_chunks`).
    """
    try:
        for chunk in regular_chunks(file):
            digest.update(chunk)
    except NotRegularFile as error:
        digest.update(f"<{error.kind}>".encode())
    except OSError as error:  # a dangling link or unreadable file still counts, by name
        digest.update(f"<unreadable: {error.strerror}>".encode())


# -- accelerator -------------------------------------------------------------------------------


def _accelerator() -> dict[str, Any]:
    probe = nvml.gpu_probe()
    devices = probe.devices or []
    return {
        "available": probe.devices is not None,
        "reason": probe.reason,
        "driver_version": devices[0].driver_version if devices else None,
        "cuda_driver_version": devices[0].cuda_driver_version if devices else None,
        "devices": [
            {"index": d.index, "uuid": d.uuid, "name": d.name, "memory_total_mb": d.memory_total_mb}
            for d in devices
        ],
    }


# -- comparison --------------------------------------------------------------------------------


@dataclass
class FingerprintDiff:
    """Differences between two fingerprints, each as ``"field: a -> b"``: those that make the
    runs not comparable, those that do not, and the code's (what a comparison of code is about:
    neither)."""

    blocking: list[str] = field(default_factory=list)
    benign: list[str] = field(default_factory=list)
    code: list[str] = field(default_factory=list)

    @property
    def comparable(self) -> bool:
        """Whether the runs may be compared (no blocking difference)."""
        return not self.blocking


_ABSENT = object()
_CODE = frozenset({"code", "code_identity"})
#: Sections describing the moment a session started (load, settings: records/hostcheck.py),
#: not the machine: warned about and recorded, never compared.
_MOMENT = frozenset({"host_check"})
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
    (("accelerator", "reason"), _never),
    (("accelerator", "devices", "*", "uuid"), _never),
    (("accelerator", "devices", "*", "index"), _never),
]


def _matches(pattern: tuple[str, ...], path: tuple[Any, ...]) -> bool:
    if pattern and pattern[-1] == "**":
        return len(path) >= len(pattern) - 1 and _matches(pattern[:-1], path[: len(pattern) - 1])
    if len(pattern) != len(path):
        return False
    return all(p in ("*", x) for p, x in zip(pattern, path, strict=True))


def _flatten(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Leaves of nested mappings and sequences by path (a record's, frozen: FrozenDict and
    tuples, or as written); an empty container has no leaves."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _flatten(item, (*path, key))
    elif isinstance(value, (list, tuple)):
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


def compare_fingerprints(
    a: Mapping[str, Any], b: Mapping[str, Any], *, uses_gpu: bool = True
) -> FingerprintDiff:
    """Every field where ``a`` and ``b`` differ, split into blocking, benign and code (module
    doc).

    ``uses_gpu=False`` (no stage pins a GPU) makes accelerator differences benign.
    """
    left = {path: value for path, value in _flatten(a) if path[0] not in _MOMENT}
    right = {path: value for path, value in _flatten(b) if path[0] not in _MOMENT}
    rules = list(_RULES)
    if not uses_gpu:
        rules.insert(0, (("accelerator", "**"), _never))
    diff = FingerprintDiff()
    for path in sorted({*left, *right}, key=lambda p: tuple(map(str, p))):
        x, y = left.get(path, _ABSENT), right.get(path, _ABSENT)
        if x == y:
            continue
        line = f"{_label(path)}: {_show(x)} -> {_show(y)}"
        if path[0] in _CODE:
            diff.code.append(line)
            continue
        rule = next((r for pattern, r in rules if _matches(pattern, path)), _always)
        blocking = rule is not _never and (x is _ABSENT or y is _ABSENT or rule(x, y))
        (diff.blocking if blocking else diff.benign).append(line)
    return diff
