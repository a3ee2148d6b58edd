"""Worktrees have owners: REV's checkout of a ``--bench-against`` session whose process is gone
is removed by whoever comes next, as a run it left ``running`` is finalized (:mod:`.recovery`).

A session adds its worktree under ``against/<token>/`` in the data home. Before it adds one it
names the repository the worktree belongs to (``repository.json``) and claims the folder
(``owners/``, :func:`.records.recover.claim`). SIGINT and SIGTERM reach the session's cleanup,
which removes both; SIGKILL (or the OOM killer) does not, so every later session and every verb
(:func:`.recovery.recover_orphans`) sweeps a folder whose every owner is gone: ``git worktree
remove --force --force`` in its repository (which drops git's record even when the folder is
gone, and a worktree a kill left locked mid-``add``), then the folder. No ``git worktree prune``:
it would also drop the records of the user's own worktrees whose folders are absent. A folder
made before claims existed is swept once every run of its session has finished.

The data home also gets a ``conftest.py`` that makes pytest ignore everything under it, so a
plain ``pytest`` of the project (no ``testpaths``) never collects a worktree's copy of the
project's tests (pytest stopped with "import file mismatch").
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from pytest_benchmark_agent.records.bounded import MAX_STATE_BYTES, BadJson, read_json
from pytest_benchmark_agent.records.recover import OWNERS, abandoned, claim
from pytest_benchmark_agent.util.fsutil import acquire_lock, atomic_write, release_lock

#: Where ``--bench-against`` sessions add their worktrees, one folder per session.
AGAINST = "against"
#: Names the repository a session folder's worktrees belong to.
REPOSITORY = "repository.json"
_LOCK = ".sweep.lock"
#: The data home's ``conftest.py``: pytest ignores every path below the folder holding it.
GUARD = "conftest.py"
GUARD_TEXT = (
    '"""Written by pytest-benchmark-agent: this is its data home, which holds git worktrees of\n'
    "other revisions (--bench-against, bisect); a plain `pytest` of the project would collect\n"
    'their copies of its tests. pytest ignores everything below this folder."""\n\n'
    'collect_ignore_glob = ["*"]\n'
)


def guard(home: Path) -> None:
    """Write the data home's ``conftest.py`` (once; it is rewritten only when it differs)."""
    path = home / GUARD
    with contextlib.suppress(OSError, UnicodeDecodeError):
        if path.read_text(encoding="utf-8") == GUARD_TEXT:
            return
    home.mkdir(parents=True, exist_ok=True)
    atomic_write(path, GUARD_TEXT)


def own(folder: Path, repo: Path, home: Path) -> None:
    """Before a worktree of ``repo`` is added under ``folder``: the repository named, this
    process claimed as the folder's owner, the data home guarded against collection."""
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / REPOSITORY, json.dumps({"repository": str(repo)}))
    claim(folder)
    guard(home)


def release(folder: Path) -> None:
    """After the session removed its worktree: its claim and the folder go too (a folder
    still holding anything else is left)."""
    shutil.rmtree(folder / OWNERS, ignore_errors=True)
    for name in (REPOSITORY, _LOCK):
        with contextlib.suppress(OSError):
            (folder / name).unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()


def sweep(home: Path) -> list[Path]:
    """Remove the worktrees of every session folder whose session is gone (:func:`_gone`);
    returns the folders removed. A data home holding worktrees gets its guard (one written
    before the guard existed too)."""
    try:
        folders = sorted((home / AGAINST).iterdir())
    except OSError:
        return []
    with contextlib.suppress(OSError):
        guard(home)
    swept = []
    for folder in folders:
        if folder.name.startswith(".") or folder.is_symlink() or not _gone(folder, home):
            continue
        lock = acquire_lock(folder / _LOCK, wait=False)
        if lock is None:
            continue  # another process is sweeping it
        try:
            if _gone(folder, home):
                _remove_folder(folder)
                swept.append(folder)
        finally:
            release_lock(lock)
    return swept


def _gone(folder: Path, home: Path) -> bool:
    """Whether the session that made ``folder`` is gone: every owner of its claim gone, or for
    a folder with no claim (made before claims existed, named by its session's token
    ``<stamp>-<suffix>``) its session's runs (``runs/<stamp>-<name>-<suffix>``) all finished
    (``index.json``: ended, or finalized since its session died). No run: left alone."""
    if os.path.lexists(folder / OWNERS):
        return abandoned(folder)
    stamp, _, suffix = folder.name.rpartition("-")
    try:
        names = os.listdir(home / "runs") if stamp and suffix else []
    except OSError:
        return False
    runs = [name for name in names if name.startswith(f"{stamp}-") and name.endswith(f"-{suffix}")]
    return bool(runs) and all((home / "runs" / name / "index.json").exists() for name in runs)


def _remove_folder(folder: Path) -> None:
    """Every worktree of the folder's repository under ``folder`` (git's record too), then the
    folder; said on stderr."""
    from pytest_benchmark_agent.engine.bisect import remove_worktree

    repo = _repository(folder)
    trees = set(_worktrees_under(repo, folder)) if repo is not None else set()
    trees |= {
        path.resolve()
        for path in folder.iterdir()
        if path.is_dir() and not path.is_symlink() and path.name != OWNERS
    }
    for tree in sorted(trees):
        owner = repo or _common_dir(tree)
        if owner is not None:
            remove_worktree(owner, tree)
        shutil.rmtree(tree, ignore_errors=True)
    shutil.rmtree(folder, ignore_errors=True)
    where = f" of {repo}" if repo is not None else ""
    print(
        f"benchmark-agent: removed {folder}, the worktree folder{where} of a --bench-against "
        "session that is gone (killed or crashed)",
        file=sys.stderr,
    )


def _repository(folder: Path) -> Path | None:
    """The repository ``folder``'s worktrees belong to, as its session named it."""
    try:
        named = read_json(folder / REPOSITORY, MAX_STATE_BYTES)
    except (OSError, BadJson):
        return None
    text = named.get("repository") if isinstance(named, dict) else None
    return Path(text) if isinstance(text, str) and os.path.isdir(text) else None


def _common_dir(tree: Path) -> Path | None:
    """The git folder of the repository ``tree`` is a worktree of, as its ``.git`` file names
    it (a folder with no ``repository.json``: made before it was written)."""
    from pytest_benchmark_agent.engine.bisect import clean_env

    if not (tree / ".git").is_file():
        return None
    asked = ["rev-parse", "--path-format=absolute", "--git-common-dir"]
    done = subprocess.run(
        ["git", "-C", str(tree), *asked], capture_output=True, text=True, env=clean_env()
    )
    common = Path(done.stdout.strip())
    return common if done.returncode == 0 and common.is_absolute() and common.is_dir() else None


def _worktrees_under(repo: Path, folder: Path) -> list[Path]:
    """The worktrees git records for ``repo`` whose path lies under ``folder`` (their folders
    may be gone)."""
    from pytest_benchmark_agent.engine.bisect import clean_env

    listed = subprocess.run(
        ["git", "-C", str(repo), "worktree", "list", "--porcelain", "-z"],
        capture_output=True,
        text=True,
        env=clean_env(),
    )
    if listed.returncode != 0:
        return []
    root = folder.resolve()
    fields = listed.stdout.split("\0")
    paths = [Path(field.removeprefix("worktree ")) for field in fields if field[:9] == "worktree "]
    return [path for path in paths if root in path.parents]
