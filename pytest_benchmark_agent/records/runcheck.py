"""Every field of a run's record checked before anything reads it: the one gate between a
record file (written by this engine, an older one, an edit or an import) and the typed record.

:func:`check_run_files` takes ``results.yaml`` and ``config.yaml`` as parsed and raises
:class:`RecordFieldError` naming the first field of the wrong type: a number that is not finite
or too large for the statistics (:data:`MAX_MAGNITUDE`), a tag outside :data:`TAGS`, a state
outside :data:`STATES`, a name that is no bounded printable line (the rule gate 1 applies), a
code identity that is no mapping. :func:`.record.load_run` calls it, so a verb skips such a run
with one warning instead of crashing on it later; ``import`` calls it before it writes anything.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_benchmark_agent.records.schema import RecordShapeError, check_verdict
from pytest_benchmark_agent.stats.describe import MAX_MAGNITUDE
from pytest_benchmark_agent.util.safetext import NAME_MAX, one_line

#: The tags a run may carry (judge/tags.py sets them; reclassify moves between them).
TAGS = ("RELIABLE", "QUALIFIED", "EXPLORATORY", "UNRELIABLE")
#: The states a run may be in (docs/benchmark/FORMAT.md).
STATES = ("running", "complete", "halted", "interrupted", "failed")
_TEXT = ("run_id", "treatment_variable", "started", "ended", "stop_reason")
_MORE_TEXT = ("config_file", "config_hash", "decided")
_TEXTS = ("caveats", "refusals", "tag_reasons", "what_went_wrong")
_MAPPINGS = ("summary", "selected", "revisions", "ci_gate", "reproduces", "sequential")
_SCALAR = (str, int, float, bool)


class RecordFieldError(ValueError):
    """A field of a run's record of the wrong type or value: names the field and the problem."""

    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem
        super().__init__(f"{field}: {problem}")


def check_run_files(results: Mapping[str, Any], frozen: Mapping[str, Any]) -> None:
    """Raise :class:`RecordFieldError` for the first bad field of ``results.yaml`` (``results``)
    or ``config.yaml`` (``frozen``; its fields named ``config.yaml:FIELD``)."""
    _check_words(results)
    for name in _TEXT + _MORE_TEXT:
        _kind(results, name, (str,), "text")
    for name in ("schema_version", "hash_seed_base"):
        _kind(results, name, (int,), "an integer")
    _kind(results, "control", _SCALAR, "a value")
    _scalars(results, "treatments")
    for name in _TEXTS:
        _texts(results, name)
    for name in _MAPPINGS:
        _kind(results, name, (Mapping,), "a mapping")
    _numbers(results, "counts", integers=True)
    _numbers(results, "spent", integers=False)
    _check_baseline(results)
    _check_by_host(results)
    _check_warmups(results)
    _check_metrics(results, frozen)
    _check_frozen(frozen)


def _check_words(results: Mapping[str, Any]) -> None:
    """The name (one printable line, as gate 1 has it), the tag and the state; each may be
    absent (a run whose session has not written ``results.yaml`` yet)."""
    name = results.get("name")
    if name is not None and (
        not isinstance(name, str) or not 0 < len(name) <= NAME_MAX or one_line(name) != name
    ):
        raise RecordFieldError(
            "name",
            f"{_shown(name)} is no benchmark name: one line of 1 to {NAME_MAX} printable "
            "characters (no control or bidi character), as gate 1 accepts",
        )
    for field, words in (("tag", TAGS), ("state", STATES)):
        value = results.get(field)
        if value is not None and value not in words:
            raise RecordFieldError(field, f"{_shown(value)} is none of {', '.join(words)}")


def _kind(data: Mapping[str, Any], name: str, kinds: tuple[type, ...], what: str) -> None:
    value = data.get(name)
    if value is None:
        return
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise RecordFieldError(name, f"{_shown(value)} is not {what}")
    if isinstance(value, float):
        _number(name, value)


def _scalars(data: Mapping[str, Any], name: str) -> None:
    values = data.get(name)
    if values is None:
        return
    if not isinstance(values, list) or not all(isinstance(v, _SCALAR) for v in values):
        raise RecordFieldError(name, f"{_shown(values)} is not a list of values")


def _texts(data: Mapping[str, Any], name: str) -> None:
    values = data.get(name)
    if values is None:
        return
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise RecordFieldError(name, f"{_shown(values)} is not a list of text")


def _numbers(data: Mapping[str, Any], name: str, *, integers: bool) -> None:
    """A mapping of name -> number (``counts``: integers; ``spent``: finite numbers)."""
    values = data.get(name)
    if values is None:
        return
    if not isinstance(values, Mapping):
        raise RecordFieldError(name, f"{_shown(values)} is not a mapping")
    kinds = (int,) if integers else (int, float)
    for key, value in values.items():
        if value is None and not integers:
            continue
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise RecordFieldError(f"{name}.{key}", f"{_shown(value)} is not a number")
        _number(f"{name}.{key}", value)


def _number(field: str, value: int | float) -> None:
    """A number every statistic and chart can use: finite, at most :data:`MAX_MAGNITUDE`."""
    if isinstance(value, float) and not math.isfinite(value):
        raise RecordFieldError(field, f"{value!r} is not a finite number")
    if abs(value) > MAX_MAGNITUDE:
        raise RecordFieldError(
            field, f"{_shown(value)} is beyond {MAX_MAGNITUDE:g}, too large to compute with"
        )


def _verdict_tables(field: str, tables: Any) -> None:
    """metric -> label -> verdict, each verdict of its shape."""
    if tables is None:
        return
    if not isinstance(tables, Mapping):
        raise RecordFieldError(field, f"{_shown(tables)} is not a mapping of verdicts")
    for metric, per in tables.items():
        if not isinstance(per, Mapping):
            raise RecordFieldError(f"{field}.{metric}", f"{_shown(per)} is not a mapping")
        for label, verdict in per.items():
            try:
                check_verdict(verdict)
            except RecordShapeError as problem:
                raise RecordFieldError(f"{field}.{metric}.{label}", str(problem)) from None


def _check_baseline(results: Mapping[str, Any]) -> None:
    baseline = results.get("baseline")
    if baseline is None:
        return
    if not isinstance(baseline, Mapping):
        raise RecordFieldError("baseline", f"{_shown(baseline)} is not a mapping")
    for name in ("run_id", "ref", "resolved", "refused"):
        _kind(baseline, name, (str,), "text")
    for name in ("code", "gate"):
        _kind(baseline, name, (Mapping,), "a mapping")
    for name in ("verdicts", "judged"):
        _verdict_tables(f"baseline.{name}", baseline.get(name))


def _check_by_host(results: Mapping[str, Any]) -> None:
    hosts = results.get("verdicts_by_host")
    if hosts is None:
        return
    if not isinstance(hosts, Mapping):
        raise RecordFieldError("verdicts_by_host", f"{_shown(hosts)} is not a mapping")
    for host, tables in hosts.items():
        _verdict_tables(f"verdicts_by_host.{host}", tables)


def _check_warmups(results: Mapping[str, Any]) -> None:
    warmups = results.get("warmups")
    if warmups is not None and not (
        isinstance(warmups, list) and all(isinstance(w, Mapping) for w in warmups)
    ):
        raise RecordFieldError("warmups", f"{_shown(warmups)} is not a list of mappings")


def _check_metrics(results: Mapping[str, Any], frozen: Mapping[str, Any]) -> None:
    """Each trial's numbers finite and representable; an exact metric (``direction: equal``)
    may hold an integer of any size, as the engine records it."""
    config = frozen.get("config")
    specs = config.get("metrics") if isinstance(config, Mapping) else None
    specs = specs if isinstance(specs, Mapping) else {}
    for number, trial in enumerate(results.get("trials") or ()):
        if not isinstance(trial, Mapping):
            continue  # the reader refused it already (RecordShapeError names it)
        where = f"trials[{number}]"
        if isinstance(trial.get("peak_rss_mb"), (int, float)):
            _number(f"{where}.peak_rss_mb", trial["peak_rss_mb"])
        metrics = trial.get("metrics")
        for metric, value in metrics.items() if isinstance(metrics, Mapping) else ():
            spec = specs.get(metric)
            exact = isinstance(spec, Mapping) and spec.get("direction") == "equal"
            if isinstance(value, float) or (isinstance(value, int) and not exact):
                _number(f"{where}.metrics.{metric}", value)


def _check_frozen(frozen: Mapping[str, Any]) -> None:
    """``config.yaml``: the fingerprint a mapping, the code identity a mapping of values (every
    comparison and chart labels the code with it). The frozen config is validated where it is
    used (``RunRecord.model``; ``import`` validates it whole), so a run whose config.yaml is
    damaged is still listed, as interrupted when its session is gone."""
    for name in ("fingerprint", "effective_params"):
        value = frozen.get(name)
        if value is not None and not isinstance(value, Mapping):
            raise RecordFieldError(f"config.yaml:{name}", f"{_shown(value)} is not a mapping")
    _kind(frozen, "source", (str,), "text")
    if frozen.get("planned_trials") is not None and not isinstance(frozen["planned_trials"], list):
        raise RecordFieldError("config.yaml:planned_trials", "is not a list of trial ids")
    fingerprint = frozen.get("fingerprint") or {}
    for section in ("code_identity", "code", "env", "accelerator", "vars"):
        value = fingerprint.get(section)
        if value is not None and not isinstance(value, Mapping):
            raise RecordFieldError(
                f"config.yaml:fingerprint.{section}", f"{_shown(value)} is not a mapping"
            )
    identity = fingerprint.get("code_identity") or {}
    for key, value in identity.items():
        if value is not None and not isinstance(value, _SCALAR):
            raise RecordFieldError(
                f"config.yaml:fingerprint.code_identity.{key}", f"{_shown(value)} is not a value"
            )


def _shown(value: Any) -> str:
    """A found value as an error quotes it: printable, one line, bounded."""
    if isinstance(value, (Mapping, list)):
        return f"a {'mapping' if isinstance(value, Mapping) else 'list'}"
    return one_line(repr(value), 60)
