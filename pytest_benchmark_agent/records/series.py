"""A benchmark's recorded runs as a series over commits: what ``history --changes`` and
``publish`` read.

Each finished run becomes a :class:`RunPoint`: its identity, tag, CI gate outcome, the commit it
measured, and per metric the values of its control's passed trials (the control is what a run
of one configuration measures, and what every run of a benchmark shares); beside it each other
treatment's values and gate 2's verdicts, so an A/B run's result is charted too. The series is
ordered by commit when the runs' repository is known (the order of ``git log --topo-order`` of
a revision: the branch's history), else by time. A run whose commit is not on that history (another
branch, uncommitted changes) is left out of a commit-ordered series and counted.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.records.frozen import thaw
from pytest_benchmark_agent.records.reader import UnreadableRecord, skip_unreadable
from pytest_benchmark_agent.records.record import RunRecord, load_run
from pytest_benchmark_agent.records.store import runs_in
from pytest_benchmark_agent.stats.comparability import Verdict

#: Run states whose figures are whole (a killed run's are not).
FINISHED_STATES = frozenset({"complete", "halted"})
#: The git variables that would point ``git -C`` at another repository than the one named.
_GIT_LOCATORS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")


@dataclass(frozen=True)
class Commit:
    """A commit of the history a series is ordered by."""

    sha: str
    position: int
    date: str
    subject: str


@dataclass
class RunPoint:
    """One finished run, as a point of its benchmark's series."""

    run_id: str
    name: str
    tag: str
    state: str
    started: str
    ci_gate: str | None
    commit: str | None
    dirty: bool
    code_label: str
    source: str | None
    metrics: dict[str, dict[str, Any]]
    values: dict[str, list[float]]
    guard_values: dict[str, list[Any]] = field(default_factory=dict)
    git: Commit | None = None
    #: The control's label, and each other treatment's charted values (label -> metric ->
    #: its passed trials' values): what an A/B run found, beside the control's series.
    control: str = ""
    treatment_values: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    #: Gate 2's verdicts of the charted metrics (metric -> treatment -> verdict).
    verdicts: dict[str, dict[str, Verdict]] = field(default_factory=dict)


@dataclass
class Series:
    """A benchmark's points in order, and the runs left out of it (with why)."""

    name: str
    points: list[RunPoint]
    left_out: list[str]
    by_commit: bool


def load_points(home: Path) -> list[RunPoint]:
    """Every finished run of ``home`` as a point, oldest first; an unreadable record is skipped
    with a warning naming it."""
    points = []
    for run_dir in runs_in(home):
        try:
            point = _point(run_dir)
        except UnreadableRecord as error:
            skip_unreadable(error)
            continue
        if point is not None:
            points.append(point)
    return points


def _point(run_dir: Path) -> RunPoint | None:
    """The run in ``run_dir`` as a point, or None when it did not finish."""
    record = load_run(run_dir)
    if record.state not in FINISHED_STATES:
        return None
    specs = _mapping(record.config.get("metrics"))
    identity = _mapping(record.fingerprint.get("code_identity"))
    values: dict[str, list[Any]] = {}
    others: dict[str, dict[str, list[float]]] = {}
    guarded = {m for m, spec in specs.items() if _is_guard(_mapping(spec))}
    charted = {m for m in specs if m not in guarded}
    for trial in record.passed():
        for metric, value in trial.metrics.items():
            if trial.treatment == record.control:
                values.setdefault(str(metric), []).append(value)
            elif metric in charted and _is_number(value):
                others.setdefault(trial.treatment, {}).setdefault(metric, []).append(float(value))
    numeric = {m: [float(v) for v in vs if _is_number(v)] for m, vs in values.items()}
    return RunPoint(
        run_id=run_dir.name,
        name=record.name,
        tag=record.tag,
        state=record.state,
        started=record.started or "",
        ci_gate=_gate_outcome(record),
        commit=identity.get("commit") if isinstance(identity.get("commit"), str) else None,
        dirty=bool(identity.get("dirty")),
        code_label=record.code,
        source=record.source if isinstance(record.source, str) else None,
        metrics={str(m): thaw(s) for m, s in specs.items()},
        values={m: v for m, v in numeric.items() if v and m in specs and m not in guarded},
        guard_values={m: v for m, v in values.items() if m in guarded},
        control=record.control,
        treatment_values=others,
        verdicts={m: dict(per) for m, per in record.verdicts.items() if m in charted},
    )


def _gate_outcome(record: RunRecord) -> str | None:
    """The CI gate's outcome (``passed``, ``regressed``, ``unjudged``): the run's own gate,
    else (a record from before it was kept) its baseline comparison's."""
    gate = record.ci_gate or (record.baseline.gate if record.baseline is not None else None)
    return gate.outcome if gate is not None else None


def _is_guard(spec: Mapping[str, Any]) -> bool:
    """A guard (``guard: true``, a floor or a ceiling) or an exact metric: shown as a table of
    values, never charted."""
    bounded = spec.get("floor") is not None or spec.get("ceiling") is not None
    return bool(spec.get("guard")) or bounded or spec.get("direction") == "equal"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _git(repo: Path, *args: str) -> str | None:
    """``git -C repo ARGS``'s output, or None when git is missing or fails."""
    env = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATORS}
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, env=env, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None


def git_toplevel(repo: Path) -> Path | None:
    """The root of the git work tree holding ``repo``, or None."""
    top = _git(repo, "rev-parse", "--show-toplevel")
    return Path(top.strip()) if top else None


def git_history(repo: Path, rev: str = "HEAD") -> dict[str, Commit] | None:
    """The commits of ``rev``'s history in ``repo``, oldest first, by sha; None when ``repo``
    is no git work tree or ``rev`` names no commit there."""
    out = _git(
        repo, "log", "--topo-order", "--reverse", "-z", "--format=%H%x1f%cI%x1f%s", rev, "--"
    )
    if out is None:
        return None
    commits = {}
    for position, item in enumerate(out.split("\0")):
        parts = item.strip("\n").split("\x1f", 2)
        if len(parts) == 3:
            commits[parts[0]] = Commit(parts[0], position, parts[1], parts[2])
    return commits


def series_of(
    points: Iterable[RunPoint], name: str, history: Mapping[str, Commit] | None
) -> Series:
    """``name``'s points in commit order along ``history`` (then by start time), or by start
    time alone without a history."""
    mine = [p for p in points if p.name == name]
    if history is None:
        return Series(name, sorted(mine, key=lambda p: p.started), [], by_commit=False)
    kept, left_out = [], []
    for point in mine:
        known = history.get(point.commit or "")
        if known is None or point.dirty:
            why = "uncommitted changes" if point.dirty else "a commit not on this history"
            left_out.append(f"{point.run_id} ({point.code_label}: {why})")
            continue
        point.git = known
        kept.append(point)
    kept.sort(key=lambda p: (p.git.position if p.git else 0, p.started))
    return Series(name, kept, left_out, by_commit=True)
