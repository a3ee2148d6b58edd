"""Revisions as treatments (``--bench-against REV``): REV's code and the working tree's code
measured in one session, REV checked out into a git worktree of its own.

:func:`check_out` checks the input (a git repository, a clean tree, a REV that names a commit
other than HEAD, no editable install of the code under test), adds a detached worktree of REV
under the data home and returns the two :class:`Revision` sides; :func:`remove` takes the
worktree away again (the session's cleanup). The user's tree, index and HEAD are never touched.

Each revision's stages run in that revision's checkout (the benchmark file's own folder inside
it). A prep's signature holds its working folder relative to the checkout, never the checkout's
path: a prep that declares ``inputs:`` is identified by their content, so one whose inputs are
equal in both revisions is built once; a prep without ``inputs:``, or whose command names
``{checkout}``, may read anything in the checkout, so its signature holds the commit's root
tree and it is built per revision.
Every problem is a gate-1 style :class:`.ConfigError` naming the option and the fix (a
collection error, pytest exit code 2).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.engine import worktrees
from pytest_benchmark_agent.errors import ConfigError

OPTION = "--bench-against"
#: The treatment variable of a revision comparison; its values are the commits' short ids.
CODE = "code"
#: The environment variable every stage gets: the root of the checkout its code comes from.
CHECKOUT_ENV = "BENCH_CHECKOUT"
SHORT = 12
#: A prep that installs the revision's code (at its checkout's root) into an environment of its
#: own. It installs a copy of the commit (``git archive``): pip builds a setuptools project in
#: its source folder, and would leave ``build/`` and ``*.egg-info`` in the user's working tree
#: (and reuse a stale ``build/`` found there); untracked files never reach the environment.
INSTALL_RECIPE = (
    "(cmd: mkdir {out}/src && git -C {checkout} archive HEAD | tar -x -C {out}/src && "
    "python -m venv {env} && {env}/bin/python -m pip install --quiet {out}/src; "
    "produces: [env])"
)


@dataclass(frozen=True)
class Revision:
    """One side of the comparison: the commit, where its checkout lies, and its label."""

    ref: str
    sha: str
    root: Path
    #: The benchmark file's folder relative to the repository root (the same in both sides).
    rel: str
    #: The commit's root tree id: what a prep without ``inputs:`` is identified by.
    tree: str

    @property
    def label(self) -> str:
        return self.sha[:SHORT]

    @property
    def folder(self) -> Path:
        return (self.root / self.rel).resolve()

    def as_record(self) -> dict[str, str]:
        return {"ref": self.ref, "sha": self.sha, "checkout": str(self.root), "tree": self.tree}


@dataclass(frozen=True)
class Revisions:
    """The control (REV, checked out) and the working tree, and where the file came from."""

    against: Revision
    this: Revision
    file_from: str

    def as_record(self) -> dict[str, object]:
        return {
            "against": self.against.as_record(),
            "this": self.this.as_record(),
            "file_from": self.file_from,
        }

    @property
    def both(self) -> str:
        """``1a2b3c4d5e6f (origin/main) -> 9f8e7d6c5b4a (HEAD)``: the two commits, for reasons."""
        return f"{self.against.label} ({self.against.ref}) -> {self.this.label} ({self.this.ref})"


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    from pytest_benchmark_agent.engine.bisect_state import clean_env

    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, env=clean_env()
    )


def _refuse(path: Path, problem: str, fix: str) -> ConfigError:
    return ConfigError(path, [(OPTION, problem, fix)])


def check_design(config: BenchmarkConfig, path: Path, *, with_baseline: bool) -> None:
    """Refuse what a revision comparison cannot run, before anything is checked out."""
    problems: list[tuple[str, str, str]] = []
    if config.search_space is not None:
        problems.append((OPTION, "a tuning file cannot compare revisions.", "leave one out."))
    if with_baseline:
        problems.append(
            (
                OPTION,
                "is given with --bench-baseline: the gate reads one comparison.",
                "give --bench-against REV (both measured here) or --bench-baseline REF (a "
                "recorded run), not both.",
            )
        )
    if problems:
        raise ConfigError(path, problems)


def check_out(bench_file: Path, ref: str, home: Path, token: str, file_from: str) -> Revisions:
    """Check the input and add REV's worktree; returns both sides. Raises :class:`ConfigError`."""
    folder = bench_file.parent.resolve()
    top = _git(folder, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise _refuse(
            bench_file,
            f"the benchmark file's folder {folder} is in no git repository, so there is no "
            f"revision `{ref}` to check out.",
            "run it inside the repository whose commits you compare (git init, commit), or "
            "compare with a recorded run instead (--bench-baseline REF).",
        )
    root = Path(top.stdout.strip()).resolve()
    rel = folder.relative_to(root).as_posix()
    dirty = _git(root, "status", "--porcelain", "--untracked-files=no").stdout.strip()
    if dirty:
        first = dirty.splitlines()[0].strip()
        raise _refuse(
            bench_file,
            f"the working tree of {root} has uncommitted changes ({first}, ...): its code has "
            "no commit that the verdict could name.",
            "commit the change (or git stash it) and run again; the working tree's side is HEAD.",
        )
    sha = _commit(root, ref, bench_file)
    head = _commit(root, "HEAD", bench_file)
    if sha == head:
        raise _refuse(
            bench_file,
            f"`{ref}` is HEAD's own commit {sha[:SHORT]}: both sides would run the same code.",
            "give the revision to compare with, e.g. --bench-against main or HEAD~1.",
        )
    refuse_editable_install(bench_file, root)
    which = hashlib.sha256(str(bench_file.resolve()).encode()).hexdigest()[:8]
    tree = home / worktrees.AGAINST / token / f"{sha[:SHORT]}-{which}"
    worktrees.own(tree.parent, root, home)  # a session killed from here on is swept up later
    added = _git(root, "worktree", "add", "--force", "--detach", "--quiet", str(tree), sha)
    if added.returncode != 0:
        remove(root, tree)
        raise _refuse(
            bench_file,
            f"could not check `{ref}` out into {tree}: {added.stderr.strip()}",
            "make the data home writable (--bench-home DIR) and retry.",
        )
    own = posixpath.normpath(posixpath.join(rel, bench_file.name))
    if file_from == "revision" and _git(root, "cat-file", "-e", f"{sha}:{own}").returncode:
        remove(root, tree)
        raise _refuse(
            bench_file,
            f"`{ref}` ({sha[:SHORT]}) has no {own}: it has no benchmark file of its own.",
            "use the working tree's file (leave out --bench-against-file=revision).",
        )
    return Revisions(
        against=Revision(ref, sha, tree.resolve(), rel, _tree(root, sha)),
        this=Revision("HEAD", head, root, rel, _tree(root, head)),
        file_from=file_from,
    )


def _commit(root: Path, ref: str, bench_file: Path) -> str:
    """The commit ``ref`` names; the ref is passed after ``--end-of-options``, never to a shell."""
    done = _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if done.returncode != 0 or not done.stdout.strip():
        raise _refuse(
            bench_file,
            f"`{ref}` names no commit of {root} (unknown revision).",
            "give a commit sha, branch or tag of that repository (git log --oneline lists "
            "them); in CI fetch enough history for it (actions/checkout with fetch-depth: 0).",
        )
    return done.stdout.strip()


def _tree(root: Path, sha: str) -> str:
    return _git(root, "rev-parse", f"{sha}^{{tree}}").stdout.strip()


def remove(root: Path, tree: Path) -> None:
    """Remove REV's worktree: its folder and git's record of it (see :func:`.bisect
    .remove_worktree`, which this reuses), then the session's claim on it."""
    from pytest_benchmark_agent.engine.bisect import remove_worktree

    remove_worktree(root, tree)
    worktrees.release(tree.parent)  # the session's folder, its claim with it


def editable_sources() -> dict[str, Path]:
    """Distributions installed in editable mode, by name: the folder their source is in
    (``direct_url.json`` with ``dir_info.editable``, PEP 610)."""
    found: dict[str, Path] = {}
    for dist in metadata.distributions():
        text = dist.read_text("direct_url.json")
        if not text:
            continue
        try:
            data = json.loads(text)
        except ValueError:
            continue
        if not isinstance(data, dict) or not (data.get("dir_info") or {}).get("editable"):
            continue
        url = urlparse(str(data.get("url", "")))
        if url.scheme == "file":
            found[dist.metadata["Name"] or "?"] = Path(unquote(url.path)).resolve()
    return found


def refuse_editable_install(bench_file: Path, root: Path) -> None:
    """An editable install whose source is inside the working tree makes REV's stages import the
    working tree's code: both arms would measure the same code. Refuse it with the fix."""
    inside = sorted(
        f"{name} ({source})"
        for name, source in editable_sources().items()
        if source == root or root in source.parents
    )
    if inside:
        raise _refuse(
            bench_file,
            f"{', '.join(inside)} is installed in editable mode from the working tree {root}: "
            "REV's stages would import the working tree's code, and both sides measure the same "
            "code.",
            f"install the code under test per revision: a prep stage {INSTALL_RECIPE} and "
            "measure stages that run {env}/bin/python (README 'Comparing two revisions'); or "
            "pip uninstall the editable package.",
        )


def foreign_code(
    paths: list[str], checkout: Path | None, revisions: Revisions, cache: Path
) -> list[str]:
    """The paths (from ``BENCH_CODE_FROM``) of a trial that ran in ``checkout`` but imported
    its code from the other revision's checkout: that trial did not measure its own revision.
    A path in the prep cache (a per-revision environment) is the trial's own."""
    if checkout is None:
        return []
    roots = {revisions.against.root, revisions.this.root}
    others = [root for root in roots if root != checkout]
    bad = []
    for text in paths:
        path = Path(text).resolve()
        if _under(path, checkout) or _under(path, cache):
            continue
        if any(_under(path, other) for other in others):
            bad.append(text)
    return bad


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents
