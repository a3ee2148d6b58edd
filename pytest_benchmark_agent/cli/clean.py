"""``benchmark-agent clean``: remove finished runs' trial scratch folders and old prep cache
entries, like ``dvc gc``.

Every trial keeps a folder under ``runs/RUN_ID/trials/`` (its stdout, stderr and outputs);
they are what a person reads while a run is fresh and dead weight after (76 MB for one
10-trial run). ``clean`` removes them by age (``--older-than DAYS``) and keeps the newest
``--keep N`` runs of each benchmark name. The record (``results.yaml``, ``trials.jsonl``,
``config.yaml``, the reports and plots) is never touched, nor the folders of a RELIABLE run
(its evidence), of a run that has not finished (no ``index.json``, or one saying it is
running), or anything reached through a symbolic link.

With ``--older-than DAYS`` or ``--max-size SIZE`` it also removes prep cache entries
(``cache/<signature>/``) last used at least DAYS ago, and then the least recently used until
the cache fits in SIZE; a removed entry is rebuilt when next needed. An entry's last use is its
manifest's modification time, which every reuse touches (``engine/cache.py``). An entry is kept
while a session holds its lock (building or checking it) or when it was used since a run still
in progress began (that session may be reading its artifacts). No record reads the cache, so
every record stays readable. ``--dry-run`` only lists what would go.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from pytest_benchmark_agent.cli.common import home_of
from pytest_benchmark_agent.engine.cache import MANIFEST
from pytest_benchmark_agent.records.bounded import MAX_STATE_BYTES, BadJson, read_json
from pytest_benchmark_agent.records.recover import OWNERS, owner_state
from pytest_benchmark_agent.records.store import runs_in
from pytest_benchmark_agent.records.writer import load_index_entry
from pytest_benchmark_agent.stats.units import human
from pytest_benchmark_agent.util.fsutil import acquire_lock, release_lock

#: States of a run whose sessions are over: its scratch folders are no longer written.
ENDED = frozenset({"complete", "halted", "failed", "interrupted", "died"})
#: An entry used this long before a run in progress claimed its folder counts as that run's
#: (an xdist controller claims its run when the first worker reports, after workers began).
IN_USE_SLACK_S = 60.0
#: ``--max-size``'s units: binary for K/M/G/T and KiB..., decimal for KB, MB, GB, TB.
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_UNITS |= {f"{u}ib": f for u, f in _UNITS.items() if u not in ("", "b")}
_UNITS |= {f"{u}b": 1000 ** (i + 1) for i, u in enumerate("kmgt")}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([a-z]*)\s*")


@dataclass
class _Entry:
    """One cache entry: its folder, last use (a Unix time) and bytes."""

    folder: Path
    last_used: float
    size: int


def cmd_clean(args: argparse.Namespace) -> int:
    """Remove the trial scratch folders (runs/RUN_ID/trials/) of finished runs, never their
    records and never a RELIABLE run's, and with --older-than or --max-size old prep cache
    entries, never one in use; --dry-run lists them."""
    home = home_of(args)
    _clean_scratch(home, args)
    _clean_cache(home, args)
    return 0


def _clean_scratch(home: Path, args: argparse.Namespace) -> None:
    """The trial folders of finished runs past ``--keep`` and ``--older-than``."""
    now = time.time()
    min_age = (args.older_than or 0.0) * 86400
    seen: dict[str, int] = {}
    total, chosen = 0, 0
    for run_dir in reversed(runs_in(home)):  # newest first, so --keep counts the newest
        entry = load_index_entry(run_dir)
        if entry is None or entry.state not in ENDED:
            continue  # unfinished (or unreadable, said by the loader): its session may write
        name = str(entry.name)
        seen[name] = seen.get(name, 0) + 1
        scratch = run_dir / "trials"
        if (
            entry.tag == "RELIABLE"
            or seen[name] <= args.keep
            or not scratch.is_dir()
            or scratch.is_symlink()
            or now - (run_dir / "index.json").stat().st_mtime < min_age
        ):
            continue
        size = _size(scratch)
        total += size
        chosen += 1
        _remove(scratch, home, size, args.dry_run)
    verb = "would free" if args.dry_run else "freed"
    print(f"{chosen} run(s)' trial folders: {verb} {human(total, 'size_b')}")


def _clean_cache(home: Path, args: argparse.Namespace) -> None:
    """The cache entries last used before ``--older-than``, then the least recently used
    past ``--max-size``; an entry in use stays (said, with why)."""
    root = home / "cache"
    entries = _cache_entries(root)
    total = sum(entry.size for entry in entries)
    if args.older_than is None and args.max_size is None:
        print(
            f"cache: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, "
            f"{human(total, 'size_b')} (--older-than DAYS or --max-size SIZE trims it)"
        )
        return
    if root.is_symlink():
        print(f"cache: {root} is a symbolic link; left alone")
        return
    now = time.time()
    live = _runs_in_progress(home)
    chosen, freed = 0, 0
    for entry in sorted(entries, key=lambda e: e.last_used):  # least recently used first
        old = args.older_than is not None and now - entry.last_used >= args.older_than * 86400
        if not (old or (args.max_size is not None and total > args.max_size)):
            continue
        where = entry.folder.relative_to(home)
        since = [run for run, start in live if entry.last_used >= start - IN_USE_SLACK_S]
        if since:
            print(f"kept {where}: used since run {since[0]} began, which is still in progress")
            continue
        lock = acquire_lock(root / f".{entry.folder.name}.lock", wait=False)
        if lock is None:
            print(f"kept {where}: a session holds its lock (building or checking it)")
            continue
        try:
            if _last_used(entry.folder) != entry.last_used:
                print(f"kept {where}: used while clean ran")
                continue
            _remove(entry.folder, home, entry.size, args.dry_run, _ago(now - entry.last_used))
        finally:
            release_lock(lock)
        total -= entry.size
        chosen += 1
        freed += entry.size
    verb = "would free" if args.dry_run else "freed"
    tail = (
        f"; still over --max-size {human(args.max_size, 'size_b')}"
        if (args.max_size is not None and total > args.max_size)
        else ""
    )
    print(
        f"{chosen} cache entr{'y' if chosen == 1 else 'ies'}: {verb} {human(freed, 'size_b')}, "
        f"{human(total, 'size_b')} left{tail}"
    )


def _cache_entries(root: Path) -> list[_Entry]:
    """Every entry folder under the cache root (not its lock files, not a symbolic link)."""
    try:
        children = sorted(root.iterdir())
    except OSError:
        return []
    return [
        _Entry(child, _last_used(child), _size(child))
        for child in children
        if not child.name.startswith(".") and child.is_dir() and not child.is_symlink()
    ]


def _last_used(folder: Path) -> float:
    """The entry's last use: its manifest's modification time (every reuse touches it), else
    the folder's own (an entry never completed)."""
    manifest = folder / MANIFEST
    try:
        return manifest.lstat().st_mtime if manifest.is_file() else folder.lstat().st_mtime
    except OSError:
        return 0.0


def _runs_in_progress(home: Path) -> list[tuple[str, float]]:
    """Runs a session may still be writing, each with when it began: those with an owner not
    known to be gone (records/recover.py) that claimed it after its ``index.json`` was last
    written (none: unfinished; older: resumed), at that claim's time; an unfinished run with
    no claim at all (written before claims existed) since ever, as nothing says when it ran."""
    live: list[tuple[str, float]] = []
    try:
        run_dirs = sorted(p for p in (home / "runs").iterdir() if not p.name.startswith("."))
    except OSError:
        return live
    for run_dir in run_dirs:
        try:
            claims = list((run_dir / OWNERS).iterdir())
        except OSError:
            if not (run_dir / "index.json").exists():
                live.append((run_dir.name, 0.0))
            continue
        try:
            finished = (run_dir / "index.json").stat().st_mtime
        except OSError:
            finished = 0.0
        starts = []
        for path in claims:
            with contextlib.suppress(OSError, BadJson):
                owner, claimed = read_json(path, MAX_STATE_BYTES), path.stat().st_mtime
                if claimed >= finished and (
                    not isinstance(owner, dict) or owner_state(owner) != "gone"
                ):
                    starts.append(claimed)
        if starts:
            live.append((run_dir.name, min(starts)))
    return live


def _remove(folder: Path, home: Path, size: int, dry_run: bool, used: str = "") -> None:
    """Remove ``folder`` (a cache entry's manifest first, so no reader takes it as whole), or
    on a dry run only say it would."""
    where = folder.relative_to(home)
    said = f"{where} ({human(size, 'size_b')}{f', last used {used}' if used else ''})"
    if dry_run:
        print(f"would remove {said}")
        return
    with contextlib.suppress(FileNotFoundError):
        os.unlink(folder / MANIFEST)
    shutil.rmtree(folder)
    print(f"removed {said}")


def _ago(seconds: float) -> str:
    """``3.2 days ago``, ``5 h ago``, ``40 min ago``."""
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} days ago"
    if seconds >= 3600:
        return f"{seconds / 3600:.0f} h ago"
    return f"{max(seconds, 0) / 60:.0f} min ago"


def _size(folder: Path) -> int:
    """Bytes of the regular files under ``folder`` (links are not followed)."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def size_arg(text: str) -> int:
    """``--max-size``'s value in bytes: ``2GiB``, ``500M``, ``1.5GB``, ``1000000``."""
    match = _SIZE.fullmatch(text.lower())
    if not match or match.group(2) not in _UNITS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size; give a number of bytes with an optional unit, "
            "such as 2GiB, 500MiB, 1.5GB or 1000000"
        )
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def register(verbs: argparse._SubParsersAction) -> None:
    clean = verbs.add_parser("clean", help=cmd_clean.__doc__, description=__doc__)
    clean.add_argument(
        "--older-than",
        type=float,
        default=None,
        metavar="DAYS",
        help="only runs that finished, and cache entries last used, at least DAYS days ago "
        "(default: runs of any age; the cache is left alone without this or --max-size)",
    )
    clean.add_argument(
        "--max-size",
        type=size_arg,
        default=None,
        metavar="SIZE",
        help="then remove the least recently used cache entries until the cache fits in SIZE "
        "(2GiB, 500MiB, 1.5GB, bytes)",
    )
    clean.add_argument(
        "--keep",
        type=int,
        default=1,
        metavar="N",
        help="the newest N finished runs of each benchmark name keep their folders (default 1)",
    )
    clean.add_argument("--dry-run", action="store_true", help="list what would go; remove nothing")
    clean.add_argument(
        "--home",
        default=argparse.SUPPRESS,
        help="data directory (default $BENCHMARK_HOME or ./benchmark_data)",
    )
    clean.set_defaults(func=cmd_clean)
