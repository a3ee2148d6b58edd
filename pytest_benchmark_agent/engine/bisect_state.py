"""A bisection's inputs and state on disk: checking GOOD, BAD and FILE, the benchmark file every
step runs (the working tree's, or each commit's own), and ``<home>/bisect/<id>/state.json``,
saved as each outcome is decided so that a rerun resumes (:mod:`.bisect` drives it).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.config.models import BenchmarkConfig, load_config
from pytest_benchmark_agent.errors import BenchError
from pytest_benchmark_agent.records.bounded import MAX_STATE_BYTES, BadJson, read_json
from pytest_benchmark_agent.util.fsutil import atomic_write

STATE = "state.json"
#: Variables that point git at a repository: ``git bisect run`` exports GIT_DIR (the driver's),
#: which would make git, and the fingerprint inside a commit's pytest, read the wrong tree.
_GIT_LOCATORS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_PREFIX",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
)


class BisectError(BenchError):
    """Bad input: an unknown revision, GOOD not an ancestor of BAD, FILE missing, a GOOD that
    gives no baseline. The message names the fix."""


class GitFailed(BenchError):
    """A git command that should not fail did (a worktree that cannot be added, say)."""


def clean_env() -> dict[str, str]:
    """This process's environment without the variables that locate a git repository."""
    return {k: v for k, v in os.environ.items() if k not in _GIT_LOCATORS}


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=clean_env()
    )
    if check and done.returncode != 0:
        raise GitFailed(
            f"git {' '.join(args)} failed in {repo}: {done.stderr.strip() or done.stdout.strip()}"
        )
    return done


# -- the state on disk ----------------------------------------------------------------------------


@dataclass
class Bisection:
    """One bisection's inputs and every outcome decided so far, as ``state.json`` keeps them.

    ``commits`` maps a sha to ``{"outcome": good|bad|skip|pending, "run_id", "reason",
    "exit_code", "log"}``; ``pending`` is a run that had started when the state was saved."""

    id: str
    repo: str
    home: str
    good: str
    bad: str
    file: str
    name: str
    pytest_args: list[str]
    commits: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None
    #: ``worktree``: the working tree's benchmark file (``bench_text``) for every commit;
    #: ``revision``: each commit's own.
    file_from: str = "revision"
    bench_text: str | None = None
    #: ``--threshold``: every step judged by the gate's rule at this fraction (no hunting).
    threshold: float | None = None
    #: Per primary metric that BAD regressed, the ratio to GOOD halfway to BAD.
    midpoints: dict[str, float] = field(default_factory=dict)
    #: A step's refusal (bad input: pytest exit 2 or 4), with its message.
    refused: str | None = None

    @property
    def folder(self) -> Path:
        return Path(self.home) / "bisect" / self.id

    @property
    def state_path(self) -> Path:
        return self.folder / STATE

    def save(self) -> None:
        atomic_write(self.state_path, json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> Bisection:
        """A bisection's state read back (:func:`.bounded.read_json`); keys of other versions
        (an earlier ``baseline_run``) are left out; BisectError naming the file when it cannot be
        read."""
        known = {f.name for f in fields(cls)}
        try:
            state = read_json(path, MAX_STATE_BYTES)
            return cls(**{k: v for k, v in state.items() if k in known})
        except (OSError, BadJson, TypeError, AttributeError) as exc:
            raise BisectError(
                f"{path}: cannot read the bisection's state ({exc}); fix: remove "
                f"{path.parent} and start the bisection again"
            ) from None


@dataclass(frozen=True)
class BisectRequest:
    """What a bisection is asked: GOOD, BAD and FILE as given, where FILE's text comes from
    (``worktree`` or each ``revision``'s own), and ``--threshold``'s rule, if any."""

    good: str
    bad: str
    file: str
    file_from: str = "worktree"
    threshold: float | None = None


def prepare(repo: Path, asked: BisectRequest, home: Path, pytest_args: Sequence[str]) -> Bisection:
    """Check the input and return the bisection's state: the recorded one when this GOOD, BAD,
    FILE (and its text, from the working tree), rule and pytest arguments were bisected before
    on this data home (resumed), else a new one. Raises :class:`BisectError` naming the fix."""
    good, bad, file, file_from, threshold = (
        asked.good,
        asked.bad,
        asked.file,
        asked.file_from,
        asked.threshold,
    )
    top = _toplevel(repo)
    good_sha, bad_sha = _commit(top, good, "GOOD"), _commit(top, bad, "BAD")
    if good_sha == bad_sha:
        raise BisectError(
            f"GOOD `{good}` and BAD `{bad}` are the same commit {good_sha[:7]}; "
            "fix: give a GOOD older than BAD"
        )
    if git(top, "merge-base", "--is-ancestor", good_sha, bad_sha, check=False).returncode:
        raise BisectError(
            f"GOOD `{good}` ({good_sha[:7]}) is not an ancestor of BAD `{bad}` "
            f"({bad_sha[:7]}), so no commit between them can be searched; fix: "
            f"give a GOOD in BAD's history (git merge-base {bad} {good} names "
            "their common ancestor)"
        )
    rel = _relative_file(top, file)
    text = _working_file(top, rel) if file_from == "worktree" else None
    for label, rev, sha in (("GOOD", good, good_sha), ("BAD", bad, bad_sha)):
        if text is None and not has_file(top, sha, rel):
            raise BisectError(
                f"`{rel}` is not in {label} `{rev}` ({sha[:7]}); fix: give FILE as "
                f"its path from the repository root ({top}) as committed there, "
                f"or a {label} commit that has it"
            )
    ident = hashlib.sha256(
        json.dumps([good_sha, bad_sha, rel, list(pytest_args), text, threshold]).encode()
    ).hexdigest()[:12]
    path = home / "bisect" / ident / STATE
    if path.is_file():
        state = Bisection.load(path)
        state.repo = str(top)  # the checkout may have moved since
        return state
    state = Bisection(
        id=ident,
        repo=str(top),
        home=str(home),
        good=good_sha,
        bad=bad_sha,
        file=rel,
        name=_config_at(top, good_sha, rel, text).name,
        pytest_args=list(pytest_args),
        file_from=file_from,
        bench_text=text,
        threshold=threshold,
    )
    state.save()
    return state


def _working_file(top: Path, rel: str) -> str:
    """The benchmark file as the working tree has it: every commit runs this text."""
    path = top / rel
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise BisectError(
            f"cannot read the benchmark file {path} ({exc}); fix: give FILE as its path from "
            f"the repository root ({top}), or --file-from revision to run each commit's own"
        ) from None


def _toplevel(repo: Path) -> Path:
    done = git(repo, "rev-parse", "--show-toplevel", check=False)
    if done.returncode != 0:
        raise BisectError(
            f"{repo.resolve()} is in no git repository; fix: run benchmark-agent "
            "bisect inside the repository whose commits you search"
        )
    return Path(done.stdout.strip())


def _commit(top: Path, rev: str, label: str) -> str:
    done = git(
        top,
        "rev-parse",
        "--verify",
        "--quiet",
        "--end-of-options",
        f"{rev}^{{commit}}",
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise BisectError(
            f"{label} `{rev}` is no commit of {top} (unknown revision); fix: give "
            "a commit sha, branch or tag of that repository (git log --oneline "
            "lists them)"
        )
    return done.stdout.strip()


def _relative_file(top: Path, file: str) -> str:
    """FILE as a path from the repository root: a path that exists from here is converted."""
    path = Path(file)
    if path.is_absolute() or path.exists():
        try:
            return path.resolve().relative_to(top.resolve()).as_posix()
        except ValueError:
            raise BisectError(
                f"`{file}` is outside the repository {top}; fix: give the "
                "benchmark file's path from that repository's root"
            ) from None
    return path.as_posix()


def has_file(top: Path, sha: str, rel: str) -> bool:
    return git(top, "cat-file", "-e", f"{sha}:{rel}", check=False).returncode == 0


def _config_at(top: Path, sha: str, rel: str, text: str | None) -> BenchmarkConfig:
    """The benchmark file (``text``, else as commit ``sha`` has it, read from git), validated."""
    text = git(top, "show", f"{sha}:{rel}").stdout if text is None else text
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / Path(rel).name  # load_config names a nameless file after it
        path.write_text(text)
        try:
            return load_config(path)
        except BenchError as exc:
            raise BisectError(
                f"`{rel}` ({'the working tree' if text else f'at GOOD {sha[:7]}'}) is no valid "
                f"benchmark file: {exc}"
            ) from None
