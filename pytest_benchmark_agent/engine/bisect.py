"""The first commit between GOOD and BAD where a benchmark's primary metric regressed against
GOOD (asv's ``find``), driven by ``git bisect run``.

The user's work tree, index and HEAD are never touched. ``git bisect`` runs in a worktree of
its own that checks nothing out (``--no-checkout``: it only moves that worktree's
``BISECT_HEAD``); each commit it asks about is checked out in a fresh detached worktree under
the data home and measured there with ``pytest --bench FILE --bench-against GOOD
--bench-fail-on=regression``: GOOD and the commit interleaved in one session, so a machine that
differs between steps cancels, and the step is judged by :mod:`.bisect_step` (bad beyond the
fail_threshold, good only with an interval that excludes that, else skipped). Each outcome is
written to ``<home>/bisect/<id>/state.json`` as soon as it is decided (and a run's id before it
starts), so a rerun after an interruption, or after the end, replays the recorded outcomes and
finished runs instead of measuring again.

``git bisect run`` calls ``python -m pytest_benchmark_agent.engine.bisect step STATE`` for each
commit; its exit code is the outcome (0 good, 1 bad, 125 skip, 255 stops the bisection).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.config.models import BenchmarkConfig, load_config
from pytest_benchmark_agent.engine.bisect_step import evidence, judged
from pytest_benchmark_agent.errors import BenchError
from pytest_benchmark_agent.judge.baseline import FINISHED
from pytest_benchmark_agent.records.bounded import MAX_STATE_BYTES, BadJson, read_json
from pytest_benchmark_agent.records.fsutil import acquire_lock, atomic_write, release_lock
from pytest_benchmark_agent.records.record import load_run
from pytest_benchmark_agent.records.run import new_run_id

EXIT_FOUND, EXIT_NOT_FOUND, EXIT_BAD_INPUT, EXIT_UNDECIDED = 0, 1, 2, 3
STATE = "state.json"
#: The worktree ``git bisect`` keeps its state in (it never checks anything out there).
DRIVER = "driver"
#: What ``git bisect run`` reads from a step's exit code; above 127 stops the bisection.
_CODES = {"good": 0, "bad": 1, "skip": 125}
_ABORT = 255
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


def prepare(
    repo: Path, good: str, bad: str, file: str, home: Path, pytest_args: Sequence[str]
) -> Bisection:
    """Check the input and return the bisection's state: the recorded one when this GOOD, BAD,
    FILE and pytest arguments were bisected before on this data home (resumed), else a new one.
    Raises :class:`BisectError` naming the fix."""
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
    for label, rev, sha in (("GOOD", good, good_sha), ("BAD", bad, bad_sha)):
        if not has_file(top, sha, rel):
            raise BisectError(
                f"`{rel}` is not in {label} `{rev}` ({sha[:7]}); fix: give FILE as "
                f"its path from the repository root ({top}) as committed there, "
                f"or a {label} commit that has it"
            )
    ident = hashlib.sha256(
        json.dumps([good_sha, bad_sha, rel, list(pytest_args)]).encode()
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
        name=_config_at(top, good_sha, rel).name,
        pytest_args=list(pytest_args),
    )
    state.save()
    return state


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


def _short(sha: str) -> str:
    return sha[:7]


def _config_at(top: Path, sha: str, rel: str) -> BenchmarkConfig:
    """The benchmark file as commit ``sha`` has it (read from git, no checkout), validated."""
    text = git(top, "show", f"{sha}:{rel}").stdout
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / Path(rel).name  # load_config names a nameless file after it
        path.write_text(text)
        try:
            return load_config(path)
        except BenchError as exc:
            raise BisectError(
                f"`{rel}` at GOOD ({sha[:7]}) is no valid benchmark file: {exc}; "
                "fix: give a GOOD whose benchmark file is valid"
            ) from None


# -- measuring one commit -------------------------------------------------------------------------


def remove_worktree(repo: Path, tree: Path) -> None:
    """Remove a worktree of ours (a leftover of an interrupted bisection too): its folder and
    git's record of it, even with the folder gone. No ``git worktree prune``: it would also drop
    the records of the user's own worktrees whose folders are absent (an unmounted disk).
    ``--force`` twice: a worktree whose ``add`` was killed is left locked."""
    git(repo, "worktree", "remove", "--force", "--force", str(tree), check=False)
    shutil.rmtree(tree, ignore_errors=True)


def run_pytest(state: Bisection, sha: str, run_id: str, extra: Sequence[str]) -> tuple[int, Path]:
    """``pytest --bench`` on FILE as commit ``sha`` has it, in a worktree of its own; returns
    pytest's exit code and the log of its output."""
    repo = Path(state.repo)
    tree = state.folder / "worktrees" / sha
    remove_worktree(repo, tree)
    tree.parent.mkdir(parents=True, exist_ok=True)
    git(repo, "worktree", "add", "--force", "--detach", "--quiet", str(tree), sha)
    log = state.folder / "logs" / f"{run_id}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    # rootdir and confcutdir at the worktree: a conftest.py of the checkout around the data
    # home (the user's, at another commit) is never loaded
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--bench",
        str(tree / state.file),
        "--bench-home",
        state.home,
        "--bench-run-id",
        run_id,
        "--rootdir",
        str(tree),
        "--confcutdir",
        str(tree),
        *extra,
        *state.pytest_args,
    ]
    try:
        with (
            log.open("w") as out,
            subprocess.Popen(
                command, cwd=tree, stdout=out, stderr=subprocess.STDOUT, env=clean_env()
            ) as child,
        ):
            try:
                code = child.wait()
            except KeyboardInterrupt:  # pytest got the same SIGINT: let it record what it took
                try:
                    child.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    child.kill()
                raise
    finally:
        remove_worktree(repo, tree)
    return code, log


def decide(state: Bisection, sha: str, say: Callable[[str], None]) -> dict[str, Any]:
    """Commit ``sha``'s outcome against GOOD's run: the recorded one, one recovered from a run
    that finished before an interruption, or a new measurement. Saved before it is returned."""
    recorded = state.commits.get(sha) or {}
    if recorded.get("outcome") in _CODES:
        say(progress_line(sha, recorded, "recorded"))
        return recorded
    if recorded.get("run_id"):
        run_dir = Path(state.home) / "runs" / recorded["run_id"]
        if _finished(run_dir):
            outcome, reason = judged(run_dir, None)
            return _store(
                state,
                sha,
                {**recorded, "outcome": outcome, "reason": reason},
                "recovered from its finished run",
                say,
            )
    if not has_file(Path(state.repo), sha, state.file):
        return _store(
            state,
            sha,
            {"outcome": "skip", "run_id": None, "reason": f"{state.file} is not in this commit"},
            "not measured",
            say,
        )
    run_id = new_run_id(state.name)
    state.commits[sha] = {"outcome": "pending", "run_id": run_id}
    state.save()
    say(f"  {_short(sha)} measuring: run {run_id}")
    code, log = run_pytest(
        state, sha, run_id, [f"--bench-against={state.good}", "--bench-fail-on=regression"]
    )
    outcome, reason = judged(Path(state.home) / "runs" / run_id, code)
    return _store(
        state,
        sha,
        {
            "outcome": outcome,
            "run_id": run_id,
            "reason": reason,
            "exit_code": code,
            "log": str(log),
        },
        "measured",
        say,
    )


def _store(
    state: Bisection, sha: str, record: dict[str, Any], how: str, say: Callable[[str], None]
) -> dict[str, Any]:
    state.commits[sha] = record
    state.save()
    say(progress_line(sha, record, how))
    return record


def _finished(run_dir: Path) -> bool:
    return (run_dir / "results.yaml").is_file() and load_run(run_dir).state in FINISHED


def progress_line(sha: str, record: dict[str, Any], how: str) -> str:
    """``1a2b3c4 bad (measured, run R): loop_ms x1.10 [1.07, 1.13] MDE 5% ...``: the outcome
    with its evidence (ratio, interval, MDE against GOOD)."""
    run = f", run {record['run_id']}" if record.get("run_id") else ""
    reason = f": {record['reason']}" if record.get("reason") else ""
    return f"  {_short(sha)} {record['outcome']} ({how}{run}){reason}"


# -- the bisection --------------------------------------------------------------------------------


@dataclass
class Result:
    """How a bisection ended: ``found`` (``commit`` is the first bad one), ``not_found`` (BAD is
    not bad against GOOD), or ``undecided`` (skipped commits hide it, or it stopped)."""

    state: Bisection
    status: str
    commit: str | None = None
    candidates: list[str] = field(default_factory=list)
    why: str = ""

    @property
    def exit_code(self) -> int:
        return {"found": EXIT_FOUND, "not_found": EXIT_NOT_FOUND}.get(self.status, EXIT_UNDECIDED)


def bisect(state: Bisection, say: Callable[[str], None]) -> Result:
    """GOOD's baseline, BAD's outcome, then ``git bisect run`` over the commits between, in a
    driver worktree; every worktree is removed on the way out, interrupted or not."""
    lock = acquire_lock(state.folder / ".lock", wait=False)
    if lock is None:
        raise BisectError(
            f"another benchmark-agent bisect of these GOOD, BAD and FILE is running "
            f"on {state.home} ({state.folder}); fix: wait for it to end"
        )
    repo, driver = Path(state.repo), state.folder / DRIVER
    try:
        state.error = None
        return _bad_not_regressed(state, say) or _bisect_between(state, repo, driver)
    finally:
        remove_worktree(repo, driver)
        with contextlib.suppress(OSError):  # the commits' worktrees went as each was measured
            (state.folder / "worktrees").rmdir()
        release_lock(lock)


def _bad_not_regressed(state: Bisection, say: Callable[[str], None]) -> Result | None:
    """BAD measured against GOOD first: the result when it did not regress (nothing to find)
    or could not be judged (nothing to bisect on); None when it regressed."""
    bad = decide(state, state.bad, say)
    if bad["outcome"] == "good":
        return Result(
            state,
            "not_found",
            why=f"BAD {_short(state.bad)} did not regress against GOOD "
            f"{_short(state.good)}: {bad.get('reason')}",
        )
    if bad["outcome"] == "skip":
        return Result(
            state,
            "undecided",
            why=f"BAD {_short(state.bad)} could not be judged against GOOD "
            f"{_short(state.good)}: {bad.get('reason')} (log: {bad.get('log') or '-'})",
        )
    return None


def _bisect_between(state: Bisection, repo: Path, driver: Path) -> Result:
    """``git bisect run`` over the commits between GOOD and BAD in the driver worktree, each
    step this module's ``step``; what the refs already say when earlier steps decided."""
    remove_worktree(repo, driver)
    add = ["worktree", "add", "--force", "--detach", "--no-checkout", "--quiet"]
    git(repo, *add, str(driver), state.bad)
    git(driver, "bisect", "start", "--no-checkout", state.bad, state.good)
    result = _conclusion(state, driver)
    if result.status != "undecided" or result.candidates:
        return result
    with (state.folder / "bisect.log").open("w") as log:
        step = [sys.executable, "-m", __name__, "step", str(state.state_path)]
        subprocess.run(
            ["git", "-C", str(driver), "bisect", "run", *step],
            stdout=log,
            env=clean_env(),
            check=False,
        )
    return _conclusion(state, driver)


def _conclusion(state: Bisection, driver: Path) -> Result:
    """What git bisect's refs say: one commit left (found), only skipped ones left besides the
    bad one (undecided, with the candidates), or untested ones left (it stopped)."""
    bad = git(driver, "rev-parse", "refs/bisect/bad").stdout.strip()

    def refs(kind: str) -> list[str]:
        return git(
            driver, "for-each-ref", "--format=%(objectname)", f"refs/bisect/{kind}-*"
        ).stdout.split()

    remaining = git(driver, "rev-list", bad, "--not", *refs("good")).stdout.split()
    skipped = set(refs("skip"))
    if remaining == [bad]:
        return Result(_reloaded(state), "found", commit=bad)
    if all(sha == bad or sha in skipped for sha in remaining):
        return Result(
            _reloaded(state),
            "undecided",
            candidates=list(reversed(remaining)),
            why="the commits before the first bad one tested were skipped",
        )
    fresh = _reloaded(state)
    return Result(
        fresh,
        "undecided",
        why=fresh.error
        or f"git bisect stopped with "
        f"{len(remaining)} commits left (its output: {state.folder / 'bisect.log'})",
    )


def _reloaded(state: Bisection) -> Bisection:
    """The state as the steps left it (they ran in other processes)."""
    return Bisection.load(state.state_path)


def verdict_lines(state: Bisection, sha: str) -> list[str]:
    """The primary metrics' verdicts of commit ``sha`` against GOOD, from its step's run."""
    run_id = (state.commits.get(sha) or {}).get("run_id")
    run_dir = Path(state.home) / "runs" / str(run_id)
    if not run_id or not (run_dir / "results.yaml").is_file():
        return []
    return [
        f"{e.line()} ({_short(state.good)} -> {_short(sha)}, interleaved in one session)"
        for e in evidence(load_run(run_dir))
    ]


def subject(state: Bisection, sha: str) -> str:
    return git(Path(state.repo), "log", "-1", "--format=%s", sha).stdout.strip()


def tested_in_order(state: Bisection) -> list[str]:
    """The recorded commits between GOOD and BAD, oldest first."""
    order = git(
        Path(state.repo), "rev-list", "--reverse", f"{state.good}..{state.bad}"
    ).stdout.split()
    return [sha for sha in order if sha in state.commits]


# -- the step git bisect run calls ----------------------------------------------------------------


def interrupt_on_sigterm() -> None:
    """SIGTERM (a CI job cancelled, ``timeout``) ends a bisection like Ctrl-C: the running
    pytest records what it measured, and every worktree is removed."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


def step(state_path: Path) -> int:
    """Decide the commit at the driver's BISECT_HEAD. Any failure or interruption stops the
    bisection (exit 255; any other code would be read as good or bad); a failure is kept in
    the state when it can be."""
    interrupt_on_sigterm()
    state: Bisection | None = None
    try:
        state = Bisection.load(state_path)
        sha = git(state.folder / DRIVER, "rev-parse", "BISECT_HEAD").stdout.strip()
        record = decide(state, sha, lambda line: print(line, file=sys.stderr, flush=True))
    except KeyboardInterrupt:
        return _ABORT
    except Exception as exc:  # every failure must reach git as "stop", never as "bad"
        traceback.print_exc()
        if state is not None:
            state.error = f"a step of the bisection failed: {exc}"
            state.save()
        return _ABORT
    return _CODES[record["outcome"]]


if __name__ == "__main__":  # pragma: no cover: run by git bisect run, in a subprocess
    if sys.argv[1:2] != ["step"] or len(sys.argv) != 3:
        sys.exit(f"usage: python -m {__spec__.name if __spec__ else 'bisect'} step STATE_JSON")
    sys.exit(step(Path(sys.argv[2])))
