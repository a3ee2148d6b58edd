"""Reading a run's record back: the one reader of ``results.yaml``, ``config.yaml`` and the
journal for every verb, the judge and the next session.

Every read is bounded (:mod:`.bounded`, :func:`.fsutil.read_regular`: regular files, size and
depth limits) and checked against the record types (:mod:`.schema`); what cannot be read raises
:class:`UnreadableRecord` naming the file, and a reader of many runs skips it with
:func:`skip_unreadable`. :func:`load_results` merges the journal in, so a crashed run shows
every trial it took.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import yaml

from pytest_benchmark_agent.config.safe_yaml import parse_yaml, yaml_problem
from pytest_benchmark_agent.errors import BenchError
from pytest_benchmark_agent.records.bounded import MAX_RECORD_BYTES, BadJson, decode_json
from pytest_benchmark_agent.records.schema import (
    PrepEvent,
    RecordShapeError,
    TrialRecord,
    check_verdict,
)
from pytest_benchmark_agent.util.fsutil import NotRegularFile, read_regular

JOURNAL = "trials.jsonl"


class UnreadableRecord(BenchError):
    """A record file of a run that cannot be read (torn, edited, not YAML or JSON, not a
    regular file): the message names the file and what is wrong with it."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(
            f"{path}: unreadable record ({problem}); fix: restore the file, or remove its "
            "run folder (docs/benchmark/FORMAT.md describes the record files)"
        )


class UnreadableRecordWarning(UserWarning):
    """An earlier record skipped by a reader of many (a later run, a list verb), named."""


def skip_unreadable(error: UnreadableRecord | str) -> None:
    """Warn that a reader of many records skipped one (``error`` names its file)."""
    warnings.warn(f"skipped: {error}", UnreadableRecordWarning, stacklevel=2)


def load_yaml(path: Path) -> Any:
    """A record file's YAML: a regular file (never blocking on a FIFO) of at most
    :data:`.bounded.MAX_RECORD_BYTES`, parsed at the record depth limit; UnreadableRecord
    names the file and the problem, whatever it is (RecursionError and MemoryError included)."""
    try:
        text = read_regular(path, MAX_RECORD_BYTES).decode("utf-8")
    except NotRegularFile as error:
        raise UnreadableRecord(path, f"a {error.kind}, not a file") from None
    except OSError as error:
        raise UnreadableRecord(path, error.strerror or str(error)) from None
    except UnicodeDecodeError as error:
        raise UnreadableRecord(path, f"not UTF-8 at byte offset {error.start}") from None
    except MemoryError:
        raise UnreadableRecord(path, "too large to read into memory") from None
    try:
        return parse_yaml(text)
    except yaml.YAMLError as error:
        where, problem = yaml_problem(error, text)
        raise UnreadableRecord(path, f"not valid YAML at {where or 'its end'}: {problem}") from None
    except RecursionError:
        raise UnreadableRecord(path, "nested deeper than a record can be") from None
    except MemoryError:
        raise UnreadableRecord(path, "too large to read into memory") from None


def read_journal(run_dir: Path) -> list[dict[str, Any]]:
    """Every trial in a run's journal, in the order they were appended (warm-up rounds, lines
    of ``kind: warmup``, are no trials: :func:`read_warmups` reads them)."""
    return _journal(run_dir)[0]


def read_warmups(run_dir: Path) -> list[dict[str, Any]]:
    """The warm-up rounds in a run's journal, in the order they ran."""
    return _journal(run_dir)[1]


def _journal(run_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(trials, warm-up rounds) of a run's journal, in the order they were appended.

    A torn last line (a crash mid-write) is left out silently; any other line that is no
    trial (an object with a text ``id``) is left out with a warning naming the file and line,
    and every other trial is kept.
    """
    journal = run_dir / JOURNAL
    try:
        data = read_regular(journal, MAX_RECORD_BYTES)
    except FileNotFoundError:
        return [], []
    except OSError as error:
        skip_unreadable(UnreadableRecord(journal, error.strerror or str(error)))
        return [], []
    lines = data.decode("utf-8", "replace").splitlines()
    trials: list[dict[str, Any]] = []
    warmups: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        try:
            trial = decode_json(line, journal)
            if isinstance(trial, dict) and trial.get("kind") == "warmup":
                warmups.append(trial)
                continue
            TrialRecord.from_dict(trial)
        except (BadJson, RecordShapeError) as problem:
            if number < len(lines) or data.endswith(b"\n"):  # not a torn last line
                why = problem if isinstance(problem, RecordShapeError) else problem.problem
                skip_unreadable(f"{journal}: line {number} is not a trial record ({why}); left out")
            continue
        trials.append(trial)
    return trials, warmups


def _check_verdicts(path: Path, verdicts: Any) -> None:
    """UnreadableRecord naming ``path`` and the metric and label of a verdict of the wrong shape."""
    if verdicts is None:
        return
    if not isinstance(verdicts, dict) or not all(isinstance(v, dict) for v in verdicts.values()):
        raise UnreadableRecord(path, "its verdicts are not a map of metric -> label -> verdict")
    for metric, per_label in verdicts.items():
        for label, verdict in per_label.items():
            try:
                check_verdict(verdict)
            except RecordShapeError as problem:
                raise UnreadableRecord(path, f"verdict of {metric} [{label}]: {problem}") from None


def load_results(run_dir: Path) -> dict[str, Any]:
    """A run's record, with trials from the journal that the last snapshot had not yet taken.

    Raises UnreadableRecord naming ``results.yaml`` when it is no record (not YAML, not a
    mapping, trials that are no list of mappings); a reader of many runs skips that run with
    :func:`skip_unreadable`.
    """
    path = run_dir / "results.yaml"
    results = (load_yaml(path) if os.path.lexists(path) else None) or {}
    if not isinstance(results, dict):
        raise UnreadableRecord(path, f"a YAML {type(results).__name__}, not a mapping of fields")
    trials = results.get("trials") or []
    if not isinstance(trials, list) or not all(isinstance(t, dict) for t in trials):
        raise UnreadableRecord(path, "its trials are not a list of trial mappings")
    for number, trial in enumerate(trials, 1):
        try:
            TrialRecord.from_dict(trial)
        except RecordShapeError as problem:
            where = f"trial {number} ({trial.get('id')!r})"
            raise UnreadableRecord(path, f"{where}: {problem}") from None
    preps = results.get("preps") or []
    if not isinstance(preps, list):
        raise UnreadableRecord(path, "its preps are not a list of prep events")
    for number, event in enumerate(preps, 1):
        try:
            PrepEvent.from_dict(event)
        except RecordShapeError as problem:
            raise UnreadableRecord(path, f"prep event {number}: {problem}") from None
    _check_verdicts(path, results.get("verdicts"))
    journal, warmups = _journal(run_dir)
    known = {(t.get("id"), t.get("started")) for t in trials}
    for trial in journal:
        if (trial["id"], trial.get("started")) not in known:
            results.setdefault("trials", []).append(trial)
    if warmups:
        results["warmups"] = _with_journalled(results.get("warmups"), warmups)
    return results


def _with_journalled(recorded: Any, journalled: list[dict[str, Any]]) -> list[Any]:
    """A snapshot's warm-up rounds and those only the journal holds (a snapshot not rewritten
    since, or an xdist worker's)."""
    kept = recorded if isinstance(recorded, list) else []
    seen = {(w.get("id"), w.get("started")) for w in kept if isinstance(w, dict)}
    return kept + [w for w in journalled if (w.get("id"), w.get("started")) not in seen]
