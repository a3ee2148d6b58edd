"""The first commit between GOOD and BAD where a benchmark's primary metric regressed against
GOOD (asv's ``find``), driven by ``git bisect run``.

The user's work tree, index and HEAD are never touched. ``git bisect`` runs in a worktree of
its own that checks nothing out (``--no-checkout``: it only moves that worktree's
``BISECT_HEAD``); each commit it asks about is checked out in a fresh detached worktree under
the data home and measured there with ``pytest --bench FILE --bench-against GOOD``: GOOD and
the commit interleaved in one session, so a machine that differs between steps cancels. The
benchmark file is the working tree's for every commit (the benchmark is fixed, the code varies;
``file_from="revision"`` runs each commit's own). BAD is measured first; its ratio to GOOD sets
the midpoint every later step hunts (:mod:`.bisect_step`). Each outcome is
written to ``<home>/bisect/<id>/state.json`` as soon as it is decided (and a run's id before it
starts), so a rerun after an interruption, or after the end, replays the recorded outcomes and
finished runs instead of measuring again.

``git bisect run`` calls ``python -m pytest_benchmark_agent.engine.bisect step STATE`` for each
commit; its exit code is the outcome (0 good, 1 bad, 125 skip, 255 stops the bisection).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.engine.bisect_state import (
    BisectError,
    Bisection,
    clean_env,
    git,
    has_file,
)
from pytest_benchmark_agent.engine.bisect_step import evidence, judged, midpoints_of
from pytest_benchmark_agent.judge.baseline import FINISHED
from pytest_benchmark_agent.records.record import load_run
from pytest_benchmark_agent.records.run import new_run_id
from pytest_benchmark_agent.stats.units import interval, ratio
from pytest_benchmark_agent.util.fsutil import acquire_lock, release_lock
from pytest_benchmark_agent.util.safetext import one_line

EXIT_FOUND, EXIT_NOT_FOUND, EXIT_BAD_INPUT, EXIT_UNDECIDED = 0, 1, 2, 3
#: The worktree ``git bisect`` keeps its state in (it never checks anything out there).
DRIVER = "driver"
#: What ``git bisect run`` reads from a step's exit code; above 127 stops the bisection.
_CODES = {"good": 0, "bad": 1, "skip": 125}
#: A step pytest refused before measuring (bad input): the bisection stops with exit 2.
REFUSED = "refused"
#: The interpreter command of a step's session: ``pytest`` with the current folder (the
#: commit's worktree) left off ``sys.path``, so the harness that measures every step is the
#: installed one running the bisection, never a copy in the checkout (bisecting this project:
#: ``python -m pytest`` there would import the commit's own plugin, options and all).
SESSION = (
    sys.executable,
    "-c",
    "import sys\n"
    "if not getattr(sys.flags, 'safe_path', False): del sys.path[0]\n"  # '' (-c), as -P does
    "import pytest\n"
    "raise SystemExit(pytest.console_main())",
)
_ABORT = 255


def _short(sha: str) -> str:
    return sha[:7]


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
    bench = tree / state.file
    if state.bench_text is not None:  # the working tree's file, untracked beside the commit's
        bench = bench.with_name(f".bisect-{bench.name}")
        bench.parent.mkdir(parents=True, exist_ok=True)
        bench.write_text(state.bench_text)
    log = state.folder / "logs" / f"{run_id}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    # rootdir and confcutdir at the worktree: a conftest.py of the checkout around the data
    # home (the user's, at another commit) is never loaded
    command = [
        *SESSION,
        "--bench",
        str(bench),
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
    if recorded.get("outcome") in (*_CODES, REFUSED):
        say(progress_line(sha, recorded, "recorded"))
        return recorded
    if recorded.get("run_id"):
        run_dir = Path(state.home) / "runs" / recorded["run_id"]
        if _finished(run_dir):
            outcome, reason = _judged(state, sha, run_dir, None)
            return _store(
                state,
                sha,
                {**recorded, "outcome": outcome, "reason": reason},
                "recovered from its finished run",
                say,
            )
    if state.bench_text is None and not has_file(Path(state.repo), sha, state.file):
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
        state, sha, run_id, [f"--bench-against={state.good}", *_rule(state, sha)]
    )
    run_dir = Path(state.home) / "runs" / run_id
    if code in (2, 4) and not (run_dir / "results.yaml").is_file():  # refused before measuring
        outcome, reason = REFUSED, refusal_of(log)
    else:
        outcome, reason = _judged(state, sha, run_dir, code)
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


def _rule(state: Bisection, sha: str) -> list[str]:
    """How a step's session is judged: BAD (and every step with ``--threshold``) by the gate's
    rule; every other step hunts BAD's midpoints."""
    if state.threshold is not None:
        return [f"--bench-fail-threshold={state.threshold}"]
    if sha == state.bad or not state.midpoints:
        return []
    return [f"--bench-bisect-midpoint={m}={ratio!r}" for m, ratio in state.midpoints.items()]


def _judged(state: Bisection, sha: str, run_dir: Path, code: int | None) -> tuple[str, str]:
    """:func:`.bisect_step.judged` by this step's rule (:func:`_rule`)."""
    return judged(run_dir, code, *_judged_by(state, sha))


def _judged_by(state: Bisection, sha: str) -> tuple[dict[str, float] | None, float | None]:
    """What judges commit ``sha``'s step: BAD's midpoints when it hunts, and ``--threshold``."""
    hunting = sha != state.bad and state.threshold is None
    return (state.midpoints if hunting else None), state.threshold


def refusal_of(log: Path) -> str:
    """What a refused step's pytest said: its collection error (the file, the field, the fix),
    else its usage error, else the log's last lines; with the log's path."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return f"pytest refused the step (its log {log} is unreadable)"
    starts = [k for k, line in enumerate(lines) if "ERROR collecting" in line]
    said: list[str] = []
    for line in lines[starts[0] + 1 :] if starts else []:
        if line.startswith("="):
            break
        said.append(line.strip())
    said = said or [line for line in lines if line.startswith(("ERROR:", "E "))] or lines[-5:]
    return one_line(" ".join(said))[:2000] + f" (log: {log})"


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
        codes = {"found": EXIT_FOUND, "not_found": EXIT_NOT_FOUND, "refused": EXIT_BAD_INPUT}
        return codes.get(self.status, EXIT_UNDECIDED)


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
    if bad["outcome"] == REFUSED:
        return Result(state, "refused", why=f"BAD {_short(state.bad)}: {bad.get('reason')}")
    if bad["outcome"] == "bad" and not state.midpoints and state.threshold is None:
        state.midpoints = midpoints_of(Path(state.home) / "runs" / bad["run_id"])
        state.save()
        say(
            "  hunting: a commit is bad when its interval lies wholly beyond "
            + ", ".join(f"{m} x{r:.4g}" for m, r in state.midpoints.items())
            + " (halfway from GOOD to BAD), good when wholly before"
        )
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
    fresh = _reloaded(state)
    if fresh.refused:
        return Result(fresh, "refused", why=fresh.refused)
    bad = git(driver, "rev-parse", "refs/bisect/bad").stdout.strip()

    def refs(kind: str) -> list[str]:
        return git(
            driver, "for-each-ref", "--format=%(objectname)", f"refs/bisect/{kind}-*"
        ).stdout.split()

    remaining = git(driver, "rev-list", bad, "--not", *refs("good")).stdout.split()
    skipped = set(refs("skip"))
    if remaining == [bad]:
        return Result(fresh, "found", commit=bad)
    if all(sha == bad or sha in skipped for sha in remaining):
        return Result(
            fresh,
            "undecided",
            candidates=list(reversed(remaining)),
            why="the commits before the first bad one tested were skipped",
        )
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
    found = evidence(load_run(run_dir), *_judged_by(state, sha))
    return [
        f"{e.line()} ({_short(state.good)} -> {_short(sha)}, interleaved in one session)"
        for e in found
    ]


def staircase_step(state: Bisection, sha: str) -> str:
    """``cost x1.21 [1.17, 1.25]``: commit ``sha``'s primary metrics against GOOD (``-`` when
    its step measured nothing)."""
    run_id = (state.commits.get(sha) or {}).get("run_id")
    run_dir = Path(state.home) / "runs" / str(run_id)
    if not run_id or not _finished(run_dir):
        return "-"
    shown = [
        f"{e.metric} {ratio(e.verdict.ratio)} {interval(e.verdict.ci) if e.verdict.ci else '[-]'}"
        for e in evidence(load_run(run_dir))
    ]
    return "; ".join(shown) or "-"


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
        if record["outcome"] == REFUSED:
            state.refused = f"{_short(sha)}: {record.get('reason')}"
            state.save()
            return _ABORT
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
