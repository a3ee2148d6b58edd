"""Which run a baseline is, and whether gate 1 lets it be one.

* **Which run is A?** :func:`resolve_ref` reads a REF (a run id or unique prefix, ``latest``, or
  a git revision: the newest finished run of the benchmark whose code identity is that commit,
  with a clean tree) from the ``index.json`` entries alone, so it never opens every record.
  A REF that names nothing is not an error but a :class:`Resolution` whose ``problem`` says
  what was searched and the fix: the run's CI gate is then *unjudged*.
* **May B be compared with A at all?** Gate 1 on the frozen configs (:func:`check_baseline`):
  they may differ in the treatment variable's values only (every other param, the variable
  itself, the stages and the seeds are equal); A must have finished and not be UNRELIABLE (an
  EXPLORATORY A is noted). Gate 2 on the fingerprints is :mod:`.across`'s, what B measures
  against A :mod:`.comparison`'s, whether B reproduces A :mod:`.reproduce`'s.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.config.gate1 import treatment_variable
from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.errors import ConfigError
from pytest_benchmark_agent.records.index import IndexEntry
from pytest_benchmark_agent.records.reader import UnreadableRecord
from pytest_benchmark_agent.records.record import load_run
from pytest_benchmark_agent.records.writer import comparison_key, load_index, load_index_entry
from pytest_benchmark_agent.util import redact
from pytest_benchmark_agent.util.placeholders import as_text

#: Tags a run needs to serve as a baseline: an UNRELIABLE run failed a gate. Each CI job is one
#: session, so an EXPLORATORY baseline (never reproduced) is accepted, and noted.
BASELINE_TAGS = ("RELIABLE", "QUALIFIED", "EXPLORATORY")
#: Tags of an earlier run that a new run of the same config may reproduce.
REPRODUCIBLE_TAGS = ("RELIABLE", "QUALIFIED", "EXPLORATORY")
#: States of a finished run (a budget that stopped it still finished it).
FINISHED = ("complete", "halted")
_MISSING = object()


def primary_metrics(specs: Mapping[str, Any]) -> list[str]:
    """The metrics a run is judged on: its primaries, else every lower/higher metric."""
    return [m for m, s in specs.items() if s.primary] or [
        m for m, s in specs.items() if s.direction != "equal"
    ]


# -- which run a REF names ------------------------------------------------------------------------


@dataclass(frozen=True)
class Resolution:
    """What a REF names: the run folder (None when nothing matched), how REF was read, and,
    when no run may serve, why (what was searched, and the fix)."""

    ref: str
    run_dir: Path | None
    how: str
    problem: str | None = None

    @property
    def run_id(self) -> str | None:
        return self.run_dir.name if self.run_dir is not None else None


def resolve_ref(
    home: Path,
    ref: str,
    name: str | None,
    repo: Path,
    *,
    exclude: str | None = None,
    key: str | None = None,
    strict: bool = True,
) -> Resolution:
    """The run ``ref`` names, from the ``index.json`` entries of ``home`` alone.

    In order: a run id or a unique prefix of one (only that run's entry is read); ``latest``
    (the newest finished run of benchmark ``name`` that may be a baseline); a git revision of
    the repository holding ``repo`` (``git rev-parse --verify REF^{commit}``): the newest
    finished run of ``name`` whose recorded code is that commit with a clean tree. Among
    several, a run sharing ``key``
    (:func:`.record.comparison_key`: gate 1 would pass) is preferred; ``exclude`` is the
    asking run. ``strict`` (a baseline) refuses a run named by id that did not finish or is
    UNRELIABLE; ``name`` None (``compare``) accepts any benchmark where one is not ambiguous.
    """
    runs = home / "runs"
    try:
        names = sorted(n for n in os.listdir(runs) if not n.startswith(".") and n != exclude)
    except OSError:
        names = []
    prefixed = [n for n in names if n == ref] or [n for n in names if n.startswith(ref)]
    if ref != "latest" and len(prefixed) == 1:
        return _named(
            ref, runs / prefixed[0], "run id" if prefixed[0] == ref else "run id prefix", strict
        )
    entries = [(d, e) for d, e in load_index(home) if exclude is None or d.name != exclude]
    if ref == "latest":
        pool = [(d, e) for d, e in entries if name is None or e.name == name]
        return _newest(
            ref,
            pool,
            "latest",
            key,
            f"no finished run of {_which(name)} that may be a baseline in {runs}",
            "run the benchmark once first (in CI: on the "
            "base branch, keeping or importing its data home)",
        )
    commit, why = git_commit(repo, ref)
    if commit is not None:
        return _at_commit(ref, commit, entries, name, key, runs, repo)
    return Resolution(ref, None, "not found", _not_found(ref, prefixed, names, runs, repo, why))


def _at_commit(
    ref: str,
    commit: str,
    entries: list[tuple[Path, IndexEntry]],
    name: str | None,
    key: str | None,
    runs: Path,
    repo: Path,
) -> Resolution:
    """The newest finished run of ``name`` whose recorded code is ``commit`` with a clean tree;
    else what was searched (the runs at other commits, dirty, without a commit) and the fix."""
    mine = [(d, e) for d, e in entries if name is None or e.name == name]
    pool = [(d, e) for d, e in mine if e.commit == commit]
    clean = [(d, e) for d, e in pool if not e.dirty]
    dirty = len(pool) - len(clean)
    unknown = sum(1 for _, e in mine if e.commit is None)
    searched = (
        f"`{ref}` is git commit {commit[:7]} (in {repo}), but no finished run of "
        f"{_which(name)} measured it with a clean tree in {runs} ({len(mine)} run(s) "
        f"of it recorded: {len(mine) - len(pool) - unknown} at other commits, "
        f"{dirty} at it with a dirty tree, {unknown} without a recorded commit)"
    )
    return _newest(
        ref,
        clean,
        f"git revision {commit[:7]}",
        key,
        searched,
        "run `pytest --bench` at that commit "
        "first (in CI: on the base branch, keeping or importing its data home), "
        "or name a run id (benchmark-agent history lists them)",
    )


def _not_found(
    ref: str, prefixed: list[str], names: list[str], runs: Path, repo: Path, why: str
) -> str:
    """Why ``ref`` names no run: an ambiguous prefix, or nothing it could be, with the fix."""
    if len(prefixed) > 1:
        shown = ", ".join(prefixed[:3])
        return (
            f"`{ref}` is a prefix of {len(prefixed)} run ids ({shown}, ...) in {runs}; "
            "fix: give more of the id"
        )
    return (
        f"`{ref}` is no run id or unique prefix of one among {len(names)} recorded "
        f"run(s) in {runs}, not `latest`, and no git revision of {repo} ({why}); fix: "
        "give a run id (benchmark-agent history lists them), `latest`, or a commit, "
        "branch or tag of that repository"
    )


def _which(name: str | None) -> str:
    return f"benchmark '{name}'" if name is not None else "any benchmark"


def _named(ref: str, run_dir: Path, how: str, strict: bool) -> Resolution:
    """A run named by its id (only its own index entry is read): as a baseline, refused when it
    did not finish or failed a gate."""
    entry = load_index_entry(run_dir)
    state, tag = (entry.state, entry.tag) if entry is not None else (None, None)
    problem = None
    if strict and (entry is None or state not in FINISHED):
        problem = (
            f"run {run_dir.name} is {state or 'unfinished (no index.json)'}, not "
            "finished, so it cannot be a baseline; fix: wait for it to end, or name a "
            "finished run"
        )
    elif strict and tag not in BASELINE_TAGS:
        problem = (
            f"run {run_dir.name} is {tag} (a gate failed in it) and cannot be a baseline; "
            "fix: name a RELIABLE, QUALIFIED or EXPLORATORY run (benchmark-agent history)"
        )
    return Resolution(ref, run_dir, how, problem)


def _newest(
    ref: str,
    pool: list[tuple[Path, IndexEntry]],
    how: str,
    key: str | None,
    searched: str,
    fix: str,
) -> Resolution:
    """The newest run of ``pool`` that may be a baseline, one sharing ``key`` first; else a
    Resolution saying what was searched (and what was found but refused) and the fix."""
    usable = [(d, e) for d, e in pool if e.state in FINISHED and e.tag in BASELINE_TAGS]
    if not usable:
        refused = len(pool)
        return Resolution(
            ref,
            None,
            how,
            f"{searched}"
            + (f"; {refused} matching run(s) unfinished or UNRELIABLE" if refused else "")
            + f"; fix: {fix}",
        )
    same = [(d, e) for d, e in usable if key is not None and e.comparison_key == key]

    def order(item: tuple[Path, IndexEntry]) -> tuple[str, str]:
        return item[1].ended or "", item[0].name

    return Resolution(ref, max(same or usable, key=order)[0], how)


def git_commit(repo: Path, ref: str) -> tuple[str | None, str]:
    """The commit ``ref`` names in the git repository holding ``repo``, or None and why not."""
    if ref.startswith("-"):
        return None, "a revision never starts with '-'"
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"git could not run: {exc}"
    if done.returncode == 0 and done.stdout.strip():
        return done.stdout.strip(), ""
    inside = (
        subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--git-dir"],
            capture_output=True,
            env=env,
            timeout=30,
        ).returncode
        == 0
    )
    return None, (
        "git rev-parse knows no such commit" if inside else "that folder is in no git repository"
    )


# -- gate 1 on frozen configs ---------------------------------------------------------------------


def config_differences(this: BenchmarkConfig, other: BenchmarkConfig) -> list[tuple[str, str, str]]:
    """``(field, this value, other value)`` for everything but the treatment values that differs."""
    out: list[tuple[str, str, str]] = []
    variable, other_variable = treatment_variable(this), treatment_variable(other)
    if variable != other_variable:
        out.append(("treatment_variable", str(variable), str(other_variable)))
    for name in sorted({*this.params, *other.params}):
        if name == variable:
            continue
        a, b = this.params.get(name, _MISSING), other.params.get(name, _MISSING)
        if a != b:
            out.append((f"params.{name}", _text(a), _text(b)))
    stages = {s.name: s.model_dump(mode="json", exclude_none=True) for s in this.stages}
    others = {s.name: s.model_dump(mode="json", exclude_none=True) for s in other.stages}
    for name in sorted({*stages, *others}):
        if stages.get(name) != others.get(name):
            out.append(
                (f"stages ({name})", _stage_text(stages.get(name)), _stage_text(others.get(name)))
            )
    if this.seeds != other.seeds:
        out.append(("seeds", str(this.seeds), str(other.seeds)))
    return out


def _text(value: Any) -> str:
    return "(not declared)" if value is _MISSING else repr(as_text(value))


def _stage_text(stage: dict[str, Any] | None) -> str:
    return "(no such stage)" if stage is None else repr(stage.get("cmd"))


def check_baseline(
    home: Path, ref: str, config: BenchmarkConfig, path: Path, exclude: str | None = None
) -> Resolution:
    """Gate 1 for ``--bench-baseline``: which run REF names (looked up in the repository of the
    benchmark file), and a collection error when that run's frozen config differs in more than
    the treatment variable's values. A REF naming nothing is returned with its problem: the
    run goes on and its CI gate is unjudged."""
    resolution = resolve_ref(
        home, ref, config.name, path.parent, exclude=exclude, key=comparison_key(config)
    )
    if resolution.run_dir is None or resolution.problem:
        return resolution
    try:
        view = load_run(resolution.run_dir)
    except UnreadableRecord as error:  # the run goes on, its CI gate unjudged
        return Resolution(ref, None, resolution.how, f"{error}")
    try:
        other = view.model
    except ValueError as exc:
        raise ConfigError(
            path,
            [
                (
                    "--bench-baseline",
                    f"the frozen config of {view.run_id} ({ref}) no longer validates ({exc}).",
                    "choose a baseline recorded by this version.",
                )
            ],
        ) from None
    variable = treatment_variable(config)
    may = f"the treatment variable ('{variable}') and the code" if variable else "the code"
    named = view.run_id if ref == view.run_id else f"{view.run_id} ({ref})"
    problems = [
        (
            name,
            f"is {mine} here but {theirs} in baseline {named}: a baseline may "
            f"differ in {may} only.",
            "use the baseline's value (e.g. --bench-set for a param) or choose a baseline "
            "recorded with this one.",
        )
        for name, mine, theirs in config_differences(redact.as_written(config), other)
    ]
    if problems:
        raise ConfigError(path, problems)
    return resolution
