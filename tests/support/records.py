"""Run records for the tests of pure logic (issue 46): a :class:`.RunRecord` from a few keyword
arguments, built by ``RunRecord.from_dict`` from ``results.yaml``'s own keys, judged by gate 2 as
a session's end judges it, and written to a data home by the engine's own writers, so a verb
that reads a home reads what a session would have left there, in milliseconds instead of a
session's seconds."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.engine.finish import standalone_hooks
from pytest_benchmark_agent.judge.baseline import check_baseline
from pytest_benchmark_agent.judge.gate2 import judge_run
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.report.wrong import what_went_wrong
from pytest_benchmark_agent.stats.describe import describe, median_ratio

#: Every record gets the next start time, so the runs of a test are ordered as they were built
#: (a reproduction is searched for among runs that ended before this one started).
_CLOCK = itertools.count()
_EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)


def scored_config(**overrides: Any) -> dict[str, Any]:
    """The frozen config of gate2helpers.scored: ``score`` of treatments ``a`` and ``b``, six
    replicates, higher is better; ``overrides`` replace its fields."""
    config: dict[str, Any] = {
        "name": "scored",
        "hypothesis": "b scores higher than a",
        "params": {"mode": "a", "size": 3},
        "treatment_variable": "mode",
        "treatments": ["a", "b"],
        "replicates": 6,
        "code": ["code"],
        "stages": [
            {
                "name": "measure",
                "kind": "measure",
                "cmd": "sh code/measure.sh {mode} {size}",
                "metrics_from": {"stdout": True, "fields": ["score"]},
            }
        ],
        "metrics": {"score": {"direction": "higher", "primary": True}},
    }
    config.update(overrides)
    return config


def constant(values: Mapping[str, float], replicates: int = 6) -> dict[str, list[float]]:
    """Treatment -> ``replicates`` copies of its value: a deterministic measurement."""
    return {label: [value] * replicates for label, value in values.items()}


def run_record(
    run_id: str,
    *,
    home: Path | None = None,
    samples: Mapping[str, Mapping[str, Sequence[Any]]] | None = None,
    config: Mapping[str, Any] | None = None,
    fingerprint: Mapping[str, Any] | None = None,
    code: str = "v1",
    **results: Any,
) -> RunRecord:
    """The record of a finished run: ``samples`` (metric -> treatment -> values) become passed
    trials, in replicate order, with their counts and summary; ``results`` are any other
    ``results.yaml`` fields (``tag``, ``verdicts``, ``reproduces``, ``caveats``, ...). The
    fingerprint holds the code identity of ``code`` (a content hash of that text: equal texts,
    the same code) and ``fingerprint``'s fields. With a ``home``, its folder is
    ``<home>/runs/<run_id>`` (where :func:`write_run` writes it)."""
    config = dict(config or scored_config())
    control = str(config["params"][config["treatment_variable"]])
    trials = _trials(samples or {}, config)
    tick = next(_CLOCK)
    document: dict[str, Any] = {
        "run_id": run_id,
        "name": config["name"],
        "state": "complete",
        "treatment_variable": config["treatment_variable"],
        "control": control,
        "trials": trials,
        "summary": _summary(samples or {}, control),
        "treatments": [str(t) for t in config["treatments"]],
        "started": _time(2 * tick),
        "ended": _time(2 * tick + 1),
        "counts": {"passed": len(trials)} if trials else {},
        "config_hash": _config_hash(config),
    }
    document.update(results)
    return RunRecord.from_dict(
        document,
        run_dir=home / "runs" / run_id if home is not None else None,
        config=config,
        fingerprint={"code_identity": _content(code), **(fingerprint or {})},
    )


def judged(record: RunRecord, against: str | None = None) -> RunRecord:
    """``record`` as gate 2 judges it at a session's end (``judge_run``): its verdicts, the run
    it reproduces in its home, its tag and the reasons for it; with ``against``, compared with
    the baseline that REF names, found and checked as ``--bench-baseline REF`` does."""
    baseline = None
    if against is not None and record.home is not None:
        bench = record.home.parent / "bench.yaml"
        baseline = check_baseline(record.home, against, record.model, bench, record.run_id)
    judgement = judge_run(record, None, baseline)
    return record.replace(
        verdicts=judgement.verdicts,
        refusals=judgement.refusals,
        caveats=[*record.caveats, *(c for c in judgement.caveats if c not in record.caveats)],
        baseline=judgement.baseline,
        reproduces=judgement.reproduces,
        tag=judgement.tag,
        tag_reasons=judgement.tag_reasons,
        ci_gate=judgement.ci_gate,
    )


def write_run(record: RunRecord) -> RunRecord:
    """Publish ``record`` as a session's end does (``pytest_bench_run_finished`` to the
    engine's record and report writers), with its What Went Wrong list as a session's end
    words it: its folder, ``index.json``, ``report.md`` and the home's ``results_index.md``."""
    record = record.replace(what_went_wrong=record.what_went_wrong or what_went_wrong(record))
    standalone_hooks().pytest_bench_run_finished(run=record)
    return record


def recorded(
    home: Path,
    run_id: str,
    samples: Mapping[str, Mapping[str, Sequence[Any]]],
    against: str | None = None,
    **fields: Any,
) -> RunRecord:
    """A run measuring ``samples`` (``fields``: :func:`run_record`'s others), judged against the
    runs already in ``home`` (and the baseline ``against`` names) and written there: what a
    session's run leaves."""
    record = run_record(run_id, home=home, samples=samples, **fields)
    return write_run(judged(record, against))


def _trials(
    samples: Mapping[str, Mapping[str, Sequence[Any]]], config: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Passed trials, one per treatment and replicate, each carrying every metric's value, in
    the session's balanced order: block ``k`` runs the treatments rotated by ``k`` (``a, b`` then
    ``b, a``), and ``position`` is a trial's place in its block."""
    stage = next(s["name"] for s in config["stages"] if s.get("kind", "measure") == "measure")
    labels = [str(t) for t in config["treatments"]]
    count = max((len(v) for per in samples.values() for v in per.values()), default=0)
    trials = []
    for replicate in range(count):
        shift = replicate % len(labels)
        for position, label in enumerate(labels[shift:] + labels[:shift]):
            trials.append(
                {
                    "id": f"{label}-r{replicate}",
                    "treatment": label,
                    "replicate": replicate,
                    "seed": None,
                    "position": position,
                    "status": "passed",
                    "metrics": {m: per[label][replicate] for m, per in samples.items()},
                    "started": None,
                    "ended": None,
                    "peak_rss_mb": None,
                    "stage": stage,
                }
            )
    return trials


def _summary(samples: Mapping[str, Mapping[str, Sequence[Any]]], control: str) -> dict[str, Any]:
    """Descriptive statistics per metric and treatment, with the ratio to the control, as
    ``BenchRun.summarize`` computes them."""
    out: dict[str, Any] = {}
    for metric, per in samples.items():
        rows = {label: describe(list(values)) for label, values in per.items()}
        for label, row in rows.items():
            if label != control:
                row["ratio_to_control"] = median_ratio(row, rows[control])
        out[metric] = rows
    return out


def _time(seconds: int) -> str:
    return (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _content(code: str) -> dict[str, Any]:
    """The code identity of a tree outside git whose files hash as ``code`` does."""
    return {"vcs": None, "content_hash": hashlib.sha256(code.encode()).hexdigest()}


def _config_hash(config: Mapping[str, Any]) -> str:
    """The identity of a frozen config: equal configs, equal hashes (a reproduction needs it)."""
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()
