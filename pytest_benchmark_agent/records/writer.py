"""The run folder on disk, written by the engine's own implementations of its hooks.

``runs/<run_id>/`` holds ``config.yaml`` (frozen config, effective params, fingerprint),
``results.yaml`` (the whole record), ``trials.jsonl`` (a write-ahead journal: one line per
finished trial, appended at once, so a killed session keeps every sample it took) and
``index.json`` (the few fields ``results_index.md`` is regenerated from, so regenerating it
never re-reads every record). ``results.yaml`` is rewritten atomically at the start, at most
every 10 s while trials finish (less often as it grows: a snapshot waits at least 100 times its
own last cost, so rewriting it stays under ~1% of the run), and at the end; readers use
:func:`.reader.load_results`, which merges the journal in, so a crashed run shows every trial.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_benchmark_agent.config.models import BenchmarkConfig, treatment_variable
from pytest_benchmark_agent.records.bounded import (
    MAX_STATE_BYTES,
    BadJson,
    decode_json,
)
from pytest_benchmark_agent.records.fingerprint import code_label
from pytest_benchmark_agent.records.frozen import thaw
from pytest_benchmark_agent.records.reader import (
    JOURNAL,
    UnreadableRecord,
    skip_unreadable,
)
from pytest_benchmark_agent.records.record import SCHEMA_VERSION, RunRecord
from pytest_benchmark_agent.records.schema import TrialRecord
from pytest_benchmark_agent.records.yamlwrite import to_yaml, writable
from pytest_benchmark_agent.stats.units import number
from pytest_benchmark_agent.util import redact
from pytest_benchmark_agent.util.fsutil import (
    NotRegularFile,
    atomic_write,
    file_kind,
    file_lock,
    open_appending,
    write_line,
)
from pytest_benchmark_agent.util.safetext import inert_markdown, md

#: Mid-run snapshots of results.yaml are for a reader that opens the file without the journal;
#: every reader in this package merges trials.jsonl in, so they can be this far apart.
SNAPSHOT_INTERVAL_S = 10.0
#: A mid-run snapshot waits at least this many times its own last cost, so rewriting a growing
#: results.yaml never takes more than ~1% of a run (the journal already holds every trial).
SNAPSHOT_COST_FACTOR = 100
TAG_ORDER = ("RELIABLE", "QUALIFIED", "UNRELIABLE", "EXPLORATORY")
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
#: ``json.dumps(value, default=str)`` without building an encoder for every journal line.
_journal_line = json.JSONEncoder(default=str).encode


def dump_yaml(data: Any) -> str:
    """A record as YAML, its secrets redacted (:func:`redact.scrub`): the fast writer for
    JSON-like data, PyYAML for anything else."""
    data = redact.scrub(data)
    text = to_yaml(data)
    if text is None:
        try:
            text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
        except UnicodeEncodeError:  # a lone surrogate: to_yaml's U+FFFD, for PyYAML too
            text = dump_yaml(_without_surrogates(data))
    return text


def _without_surrogates(data: Any) -> Any:
    if isinstance(data, str):
        return writable(data)
    if isinstance(data, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_without_surrogates(v) for v in data]
    return data


class RecordWriter:
    """Writes every run's folder and keeps ``results_index.md`` current."""

    def __init__(self) -> None:
        self._next_snapshot: dict[str, float] = {}
        #: Each run's trials.jsonl, open for appending from its first trial to the run's end.
        self._journals: dict[str, int] = {}

    @pytest.hookimpl
    def pytest_bench_run_started(self, run: RunRecord) -> None:
        _folder(run).mkdir(parents=True, exist_ok=True)
        self._write_config(run)
        self._snapshot(run)

    @pytest.hookimpl
    def pytest_bench_trial_finished(self, trial: TrialRecord, run: RunRecord) -> None:
        self._journal(thaw(trial), run)
        if time.monotonic() >= self._next_snapshot.get(run.run_id, 0.0):
            self._snapshot(run)

    @pytest.hookimpl
    def pytest_bench_warmup_finished(self, warmup: Mapping[str, Any], run: RunRecord) -> None:
        """A warm-up round goes to the journal as a trial does, marked ``kind: warmup``."""
        self._journal(thaw(warmup), run)
        if time.monotonic() >= self._next_snapshot.get(run.run_id, 0.0):
            self._snapshot(run)

    @pytest.hookimpl(tryfirst=True)
    def pytest_bench_run_finished(self, run: RunRecord) -> None:
        fd = self._journals.pop(run.run_id, None)
        if fd is not None:
            os.close(fd)
        self._write_config(run)
        results = run.to_dict()
        self._snapshot(run, results)
        entry = build_index_entry(results, run.model, run.fingerprint.get("code_identity"))
        atomic_write(_folder(run) / "index.json", json.dumps(entry, indent=1))
        regenerate_index(_folder(run).parent.parent)

    def _journal(self, line: dict[str, Any], run: RunRecord) -> None:
        """Append one line to the run's ``trials.jsonl``: on disk before the next trial."""
        fd = self._journals.get(run.run_id)
        if fd is None:
            fd = self._journals[run.run_id] = open_appending(_folder(run) / JOURNAL)
        try:
            write_line(fd, _journal_line(redact.scrub(line)))
        except OSError as exc:  # a write (ENOSPC) names no file: the reason names the journal
            exc.filename = exc.filename or str(_folder(run) / JOURNAL)
            raise

    def _snapshot(self, run: RunRecord, results: dict[str, Any] | None = None) -> None:
        start = time.monotonic()
        atomic_write(_folder(run) / "results.yaml", dump_yaml(results or run.to_dict()))
        end = time.monotonic()
        self._next_snapshot[run.run_id] = end + max(
            SNAPSHOT_INTERVAL_S, SNAPSHOT_COST_FACTOR * (end - start)
        )

    def _write_config(self, run: RunRecord) -> None:
        effective: dict[str, dict[str, str]] = {}
        for trial in run.trials:
            effective.setdefault(trial.treatment, {}).update(trial.effective)
        document = {
            "schema_version": SCHEMA_VERSION,
            "run_id": run.run_id,
            "source": run.source,
            "config": thaw(run.config),
            "planned_trials": [planned.id for planned in run.planned],
            "effective_params": effective,
            "fingerprint": thaw(run.fingerprint),
        }
        atomic_write(_folder(run) / "config.yaml", dump_yaml(document))


def _folder(run: RunRecord) -> Path:
    """The run's folder (a record the engine publishes always has one)."""
    if run.dir is None:
        raise ValueError(f"run {run.run_id} has no folder to write to")
    return run.dir


def code_entry(identity: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The code a run measured, as its index entry keeps it: a baseline named by a git revision
    is found from these entries alone."""
    if identity is None:
        return None
    return {
        "commit": identity.get("commit"),
        "short": identity.get("short"),
        "branch": identity.get("branch"),
        "dirty": identity.get("dirty"),
        "label": code_label(identity),
    }


def comparison_key(config: BenchmarkConfig) -> str:
    """A hash of what a baseline must share with a run (what gate 1 across runs compares: the
    treatment variable, every other param, the stages, the seeds), so ``latest`` and a git
    revision prefer a run that may serve without opening its record."""
    config = redact.as_written(config)  # a secret is not part of what a baseline shares
    variable = treatment_variable(config)
    identity = {
        "variable": variable,
        "params": {k: v for k, v in config.params.items() if k != variable},
        "stages": sorted(
            (s.model_dump(mode="json", exclude_none=True) for s in config.stages),
            key=lambda s: str(s.get("name")),
        ),
        "seeds": config.seeds,
    }
    text = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def build_index_entry(
    results: Mapping[str, Any], config: BenchmarkConfig, code_identity: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The ``index.json`` entry of a run, from its ``results.yaml`` document: the few fields
    ``results_index.md``, ``history`` and baseline resolution read without opening the record.
    Built the same way at a run's end and when a run is imported (whose record is input, so
    every nested value is read defensively)."""
    control = str(results.get("control"))
    primaries = [m for m, spec in config.metrics.items() if spec.primary]
    summary, verdicts = _mapping(results.get("summary")), _mapping(results.get("verdicts"))
    cited = {_mapping(results.get(key)).get("run_id") for key in ("baseline", "reproduces")}
    flags = results.get("flags")
    trials = results.get("trials") if isinstance(results.get("trials"), list) else []
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": results.get("run_id"),
        "name": results.get("name"),
        "state": results.get("state"),
        "tag": results.get("tag"),
        "started": results.get("started"),
        "ended": results.get("ended"),
        "counts": dict(Counter(str(_mapping(t).get("status")) for t in trials)),
        "treatment_variable": results.get("treatment_variable"),
        "control": control,
        "primary": {  # gate 2's ratio, the report's figure; the medians' where none was judged
            m: {
                label: _mapping(_mapping(verdicts.get(m)).get(label)).get("ratio")
                or _mapping(row).get("ratio_to_control")
                for label, row in _mapping(summary.get(m)).items()
                if label != control
            }
            for m in primaries
        },
        "verdicts": {
            m: {label: _mapping(v).get("verdict") for label, v in _mapping(per).items()}
            for m, per in verdicts.items()
            if m in primaries
        },
        "config_hash": results.get("config_hash"),
        "cites": sorted(c for c in cited if isinstance(c, str) and c),
        "flags": len(flags) if isinstance(flags, list) else 0,
        "code": code_entry(code_identity) if isinstance(code_identity, Mapping) else None,
        "ci_gate": ci_gate_outcome(results),
        "comparison_key": comparison_key(config),
    }


def ci_gate_outcome(results: Mapping[str, Any]) -> str | None:
    """The CI gate's outcome a record holds (``passed``, ``regressed``, ``unjudged``): its own
    ``ci_gate``, else (a record from before it was kept) its baseline comparison's gate."""
    gate = _mapping(results.get("ci_gate")) or _mapping(
        _mapping(results.get("baseline")).get("gate")
    )
    outcome = gate.get("outcome")
    return outcome if isinstance(outcome, str) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` where it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


#: The index entries this process read, per data directory: run folder name -> (file identity,
#: entry).
_index_cache: dict[Path, dict[str, tuple[tuple[int, int, int], dict[str, Any]]]] = {}


def index_entries(home: Path) -> list[tuple[Path, dict[str, Any]]]:
    """(run folder, its ``index.json`` entry) for every run in ``home``, by folder name.

    A session's end reads them all twice (the reproduction search, then the results index);
    a file this process already read is parsed again only when it changed (its inode, mtime or
    size: every write is an atomic replace, so a new inode). The entries are shared: read only.
    The folder is listed with ``os.listdir`` and each file opened once: ``Path.glob`` (an lstat
    per run) and ``read_text`` made a scan about twice as slow; a file not cached yet is not
    stat'ed first but read by :func:`_read_entry`.
    """
    runs = home / "runs"
    try:
        names = sorted(name for name in os.listdir(runs) if not name.startswith("."))
    except OSError:
        names = []
    known = _index_cache.get(home, {})
    seen: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}
    for name in names:
        path = os.path.join(runs, name, "index.json")
        cached = known.get(name)
        try:
            if cached is not None:
                info = os.stat(path)
                if cached[0] == (info.st_ino, info.st_mtime_ns, info.st_size):
                    seen[name] = cached
                    continue
            seen[name] = _read_entry(path)
        except FileNotFoundError:  # a run not finished yet
            continue
        except (OSError, ValueError) as error:
            skip_unreadable(UnreadableRecord(path, _entry_problem(error)))
            continue
    _index_cache[home] = seen
    return [(runs / name, entry) for name, (_, entry) in seen.items()]


def _read_entry(path: str) -> tuple[tuple[int, int, int], dict[str, Any]]:
    """An index file's identity (inode, mtime, size) and entry from one open descriptor:
    ``os.open``, ``fstat`` and ``read`` cost about two thirds of ``open()`` with its buffered
    reader, which is most of resolving a baseline among 1,000 runs."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the scan
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(path, file_kind(info.st_mode))
        if info.st_size > MAX_STATE_BYTES:
            raise BadJson(path, f"over the {MAX_STATE_BYTES} bytes an index entry may be")
        data = os.read(fd, info.st_size)
    finally:
        os.close(fd)
    entry = _checked_entry(decode_json(data, path))
    return (info.st_ino, info.st_mtime_ns, info.st_size), entry


#: The fields of an index entry its readers index into, and the types they take.
_ENTRY_TYPES: dict[str, tuple[type, ...]] = {
    "run_id": (str,),
    "name": (str, type(None)),
    "state": (str, type(None)),
    "tag": (str, type(None)),
    "started": (str, type(None)),
    "ended": (str, type(None)),
    "counts": (dict,),
    "primary": (dict, type(None)),
    "verdicts": (dict, type(None)),
    "code": (dict, type(None)),
    "ci_gate": (str, type(None)),
    "config_hash": (str, type(None)),
    "comparison_key": (str, type(None)),
}


def _checked_entry(entry: Any) -> dict[str, Any]:
    """``entry`` if it has the shape of an index entry (its readers index into it), else a
    ValueError saying what is wrong."""
    if not isinstance(entry, dict):
        raise ValueError(f"a JSON {type(entry).__name__}, not an object")
    for key, types in _ENTRY_TYPES.items():
        if key in entry and not isinstance(entry[key], types):
            raise ValueError(f"its {key!r} is a JSON {type(entry[key]).__name__}")
    if "run_id" not in entry:
        raise ValueError("it has no run_id")
    nested = [entry.get("counts") or {}, *(entry.get("primary") or {}).values()]
    nested += (entry.get("verdicts") or {}).values()
    if not all(isinstance(part, dict) for part in nested[1:]) or not all(
        isinstance(n, int) for n in nested[0].values()
    ):
        raise ValueError("its counts, primary or verdicts are not objects of the expected kind")
    return entry


def _entry_problem(error: Exception) -> str:
    if isinstance(error, NotRegularFile):
        return f"a {error.kind}, not a file"
    if isinstance(error, OSError):
        return error.strerror or str(error)
    if isinstance(error, BadJson):
        return error.problem
    return str(error)  # a JSON value of the wrong shape, or not UTF-8


def index_entry(run_dir: Path) -> dict[str, Any] | None:
    """One run's ``index.json`` entry (written when it finished), or None; an unreadable one
    is None with a warning naming it."""
    path = run_dir / "index.json"
    try:
        return _read_entry(str(path))[1]
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        skip_unreadable(UnreadableRecord(path, _entry_problem(error)))
        return None


def regenerate_index(home: Path) -> None:
    """Rewrite ``results_index.md`` from every run's ``index.json``, grouped by tag (what a
    record holds is escaped: a name cannot forge a line or a section)."""
    entries = [entry for _, entry in index_entries(home)]
    lines = [
        "# Benchmark results",
        "",
        "Regenerated from the run records after every run; do not edit by hand.",
        "",
    ]
    for tag in TAG_ORDER:
        group = [e for e in entries if e.get("tag") == tag]
        lines += [f"## {tag} ({len(group)})", ""]
        if not group:
            lines += ["(none)", ""]
            continue
        lines += [
            "| run | name | commit | CI gate | state | trials "
            "| primary (ratio to control, verdict) |",
            "|---|---|---|---|---|---|---|",
        ]
        for entry in sorted(group, key=lambda e: e["run_id"], reverse=True):
            counts = entry.get("counts") or {}
            passed, total = counts.get("passed", 0), sum(counts.values())
            verdicts = entry.get("verdicts") or {}
            primary = "; ".join(
                f"{md(metric)}: "
                + ", ".join(
                    f"{md(t)}={number(r)}"
                    + (f" {verdicts[metric][t]}" if t in verdicts.get(metric, {}) else "")
                    for t, r in ratios.items()
                )
                for metric, ratios in (entry.get("primary") or {}).items()
                if ratios
            ) or (
                "one configuration: no in-run ratio"
                if "treatment_variable" in entry and entry["treatment_variable"] is None
                else "-"
            )
            state = md(str(entry.get("state"))) + (
                f", flagged x{entry['flags']}" if entry.get("flags") else ""
            )
            run_id = md(entry["run_id"])
            code = (entry.get("code") or {}).get("label") or "-"
            lines.append(
                f"| [{run_id}](runs/{run_id}/report.md) | {md(str(entry.get('name')))} | "
                f"{md(code)} | {md(entry.get('ci_gate') or '-')} | {state} | {passed}/{total} | "
                f"{primary} |"
            )
        lines.append("")
    with file_lock(home / ".index.lock"):
        atomic_write(home / "results_index.md", inert_markdown("\n".join(lines)))
