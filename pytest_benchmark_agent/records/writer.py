"""The run folder on disk, written by the engine's own implementations of its hooks.

``runs/<run_id>/`` holds ``config.yaml`` (frozen config, effective params, fingerprint),
``results.yaml`` (the whole record), ``trials.jsonl`` (a write-ahead journal: one line per
finished trial, appended at once, so a killed session keeps every sample it took) and
``index.json`` (the few fields ``results_index.md`` is regenerated from, so regenerating it
never re-reads every record). ``results.yaml`` is rewritten atomically at the start, at most
every 10 s while trials finish (less often as it grows: a snapshot waits at least 100 times its
own last cost, so rewriting it stays under ~1% of the run), and at the end; readers use
:func:`.record.load_run`, which merges the journal in, so a crashed run shows every trial. A run
written again whole (an import) goes through :func:`write_record`.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
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
from pytest_benchmark_agent.records.index import IndexEntry
from pytest_benchmark_agent.records.reader import (
    JOURNAL,
    UnreadableRecord,
    skip_unreadable,
)
from pytest_benchmark_agent.records.record import SCHEMA_VERSION, RunRecord
from pytest_benchmark_agent.records.schema import TrialRecord
from pytest_benchmark_agent.records.tally import status_counts
from pytest_benchmark_agent.records.yamlwrite import to_yaml, writable
from pytest_benchmark_agent.stats.comparability import Verdict
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
        _write_config(run)
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
        _write_config(run)
        self._snapshot(run, run.to_dict())
        entry = build_index_entry(run)
        atomic_write(_folder(run) / "index.json", json.dumps(entry.to_dict(), indent=1))
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


def write_record(run: RunRecord) -> dict[str, Any]:
    """A finished run's ``config.yaml`` and ``results.yaml``, written whole from ``run`` (an
    imported run; a run's end writes them from its hook); returns the ``results.yaml``
    document, what the run's ``index.json`` entry is built from."""
    _write_config(run)
    results = run.to_dict()
    atomic_write(_folder(run) / "results.yaml", dump_yaml(results))
    return results


def _write_config(run: RunRecord) -> None:
    """``config.yaml`` of ``run``, rewritten whole."""
    atomic_write(_folder(run) / "config.yaml", dump_yaml(config_document(run)))


def config_document(run: RunRecord) -> dict[str, Any]:
    """``config.yaml`` of ``run``: the frozen config, the planned trial ids, the effective
    params and the fingerprint (what the writer writes, and what ``export`` carries)."""
    effective: dict[str, dict[str, str]] = {}
    for trial in run.trials:
        effective.setdefault(trial.treatment, {}).update(trial.effective)
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run.run_id,
        "source": run.source,
        "config": thaw(run.config),
        "planned_trials": [planned.id for planned in run.planned],
        "effective_params": effective,
        "fingerprint": thaw(run.fingerprint),
    }


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


def build_index_entry(record: RunRecord) -> IndexEntry:
    """The ``index.json`` entry of a run, from its record: the few fields ``results_index.md``,
    ``history`` and baseline resolution read without opening the record. Built the same way at
    a run's end and when a run is imported."""
    control = record.control
    primaries = [m for m, spec in record.model.metrics.items() if spec.primary]
    cited = [record.baseline.run_id if record.baseline else None]
    cited.append(record.reproduces.run_id if record.reproduces else None)
    flags = record.extra.get("flags")
    identity = record.fingerprint.get("code_identity")
    return IndexEntry(
        schema_version=SCHEMA_VERSION,
        run_id=record.run_id,
        name=record.name,
        state=record.state,
        tag=record.tag,
        started=record.started,
        ended=record.ended,
        counts=status_counts(record.trials),
        treatment_variable=record.treatment_variable,
        one_configuration=record.treatment_variable is None,
        control=control,
        primary={  # gate 2's ratio, the report's figure; the medians' where none was judged
            m: {
                label: (record.verdicts.get(m, {}).get(label) or _UNJUDGED).ratio
                or row.get("ratio_to_control")
                for label, row in (record.summary.get(m) or {}).items()
                if label != control
            }
            for m in primaries
        },
        verdicts={
            m: {label: v.verdict for label, v in per.items()}
            for m, per in record.verdicts.items()
            if m in primaries
        },
        config_hash=record.config_hash,
        cites=tuple(sorted(c for c in cited if isinstance(c, str) and c)),
        flags=len(flags) if isinstance(flags, tuple | list) else 0,
        code=code_entry(identity) if isinstance(identity, Mapping) else None,
        ci_gate=ci_gate_outcome(record),
        comparison_key=comparison_key(record.model),
    )


#: The verdict of a label gate 2 did not judge: no ratio of its own.
_UNJUDGED = Verdict(verdict="unjudged")


def ci_gate_outcome(record: RunRecord) -> str | None:
    """The CI gate's outcome a record holds (``passed``, ``regressed``, ``unjudged``): its own
    ``ci_gate``, else (a record from before it was kept) its baseline comparison's gate."""
    gate = record.ci_gate or (record.baseline.gate if record.baseline else None)
    return gate.outcome if gate else None


#: An index file read: its identity (inode, mtime, size) and the entry it holds.
_Cached = tuple[tuple[int, int, int], IndexEntry]
#: The index entries this process read, per data directory, by run folder name.
_index_cache: dict[Path, dict[str, _Cached]] = {}


def load_index(home: Path) -> list[tuple[Path, IndexEntry]]:
    """(run folder, its ``index.json`` entry) for every run in ``home``, by folder name; a
    malformed entry is skipped with a warning naming it. The entries are shared: read only."""
    return [(runs, cached[1]) for runs, cached in _scan(home)]


def _scan(home: Path) -> list[tuple[Path, _Cached]]:
    """Every run's entry in ``home``, by folder name.

    A session's end reads them all twice (the reproduction search, then the results index);
    a file this process already read is parsed again only when it changed (its inode, mtime or
    size: every write is an atomic replace, so a new inode). The folder is listed with
    ``os.listdir`` and each file opened once: ``Path.glob`` (an lstat per run) and
    ``read_text`` made a scan about twice as slow; a file not cached yet is not stat'ed first
    but read by :func:`_read_entry`.
    """
    runs = home / "runs"
    try:
        names = sorted(name for name in os.listdir(runs) if not name.startswith("."))
    except OSError:
        names = []
    known = _index_cache.get(home, {})
    seen: dict[str, _Cached] = {}
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
    return [(runs / name, cached) for name, cached in seen.items()]


def _read_entry(path: str) -> _Cached:
    """An index file's identity (inode, mtime, size) and entry from one open
    descriptor: ``os.open``, ``fstat`` and ``read`` cost about two thirds of ``open()`` with
    its buffered reader, which is most of resolving a baseline among 1,000 runs."""
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
    return (info.st_ino, info.st_mtime_ns, info.st_size), IndexEntry.from_dict(
        decode_json(data, path)
    )


def _entry_problem(error: Exception) -> str:
    if isinstance(error, NotRegularFile):
        return f"a {error.kind}, not a file"
    if isinstance(error, OSError):
        return error.strerror or str(error)
    if isinstance(error, BadJson):
        return error.problem
    return str(error)  # a JSON value of the wrong shape, or not UTF-8


def load_index_entry(run_dir: Path) -> IndexEntry | None:
    """One run's ``index.json`` entry (written when it finished), or None; an unreadable one
    is None with a warning naming it."""
    cached = _read_one(run_dir)
    return None if cached is None else cached[1]


def _read_one(run_dir: Path) -> _Cached | None:
    path = run_dir / "index.json"
    try:
        return _read_entry(str(path))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        skip_unreadable(UnreadableRecord(path, _entry_problem(error)))
        return None


def regenerate_index(home: Path) -> None:
    """Rewrite ``results_index.md`` from every run's ``index.json``, grouped by tag (what a
    record holds is escaped: a name cannot forge a line or a section)."""
    entries = [entry for _, entry in load_index(home)]
    lines = [
        "# Benchmark results",
        "",
        "Regenerated from the run records after every run; do not edit by hand.",
        "",
    ]
    for tag in TAG_ORDER:
        group = [e for e in entries if e.tag == tag]
        lines += [f"## {tag} ({len(group)})", ""]
        if not group:
            lines += ["(none)", ""]
            continue
        lines += [
            "| run | name | commit | CI gate | state | trials "
            "| primary (ratio to control, verdict) |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [_index_line(e) for e in sorted(group, key=lambda e: e.run_id, reverse=True)]
        lines.append("")
    with file_lock(home / ".index.lock"):
        atomic_write(home / "results_index.md", inert_markdown("\n".join(lines)))


def _index_line(entry: IndexEntry) -> str:
    """One run's row of ``results_index.md``."""
    passed, total = entry.counts.get("passed", 0), sum(entry.counts.values())
    verdicts = entry.verdicts or {}
    primary = "; ".join(
        f"{md(metric)}: "
        + ", ".join(
            f"{md(t)}={number(r)}"
            + (f" {verdicts[metric][t]}" if t in verdicts.get(metric, {}) else "")
            for t, r in ratios.items()
        )
        for metric, ratios in entry.primary.items()
        if ratios
    ) or ("one configuration: no in-run ratio" if entry.one_configuration else "-")
    state = md(str(entry.state)) + (f", flagged x{entry.flags}" if entry.flags else "")
    run_id = md(entry.run_id)
    return (
        f"| [{run_id}](runs/{run_id}/report.md) | {md(str(entry.name))} | "
        f"{md(entry.code_label or '-')} | {md(entry.ci_gate or '-')} | {state} | "
        f"{passed}/{total} | {primary} |"
    )
