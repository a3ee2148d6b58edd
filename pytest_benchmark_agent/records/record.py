"""The record of one run as a value: typed, frozen, the one thing every reader of a run is given.

:class:`RunRecord` is ``results.yaml`` (docs/benchmark/FORMAT.md) with the frozen config and
the fingerprint of ``config.yaml``. The engine makes one from its live run
(:meth:`.run.BenchRun.record`); :func:`load_run` makes one from a run folder (every version of
the format; a newer one is refused). Hooks, the judge's readers, the reports, the verbs and the
``bench`` fixture take it, and so does every reader of a run folder: ``reclassify`` (a new
record, written through the writers), the recovery of a run, ``export``/``import``, the
tuner's rounds (pooled with :meth:`RunRecord.replace`), the plan review; only ``tune --resume``
reads a ``results.yaml`` as YAML, since that record is a tune's, not a run's. It is frozen all
the way down (mappings read-only, sequences tuples, trials :class:`.TrialRecord`, verdicts
:class:`.Verdict`, the CI gate, reproduction and sequential looks :mod:`.outcomes`' types,
summary rows :class:`.SummaryRow`), so no reader can change what another reads after it; only
the writer calls :meth:`RunRecord.to_dict`, and a reader that needs the ``results.yaml``
document (``export``, the trials a tune's record keeps) gets it with :func:`.frozen.thaw`.

:class:`Judgement` is what gate 2 decides about a run (``judge.gate2.judge_run``): returned to
the engine, which puts it on the run; the judge never writes on the run itself.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.records.fingerprint import code_label
from pytest_benchmark_agent.records.frozen import FrozenDict, freeze, thaw
from pytest_benchmark_agent.records.outcomes import GateRecord, ReproductionRecord, SequentialRecord
from pytest_benchmark_agent.records.reader import UnreadableRecord, load_results, load_yaml
from pytest_benchmark_agent.records.runcheck import RecordFieldError, check_run_files
from pytest_benchmark_agent.records.schema import PrepEvent, TrialRecord
from pytest_benchmark_agent.records.summary import SummaryRow, summary_table
from pytest_benchmark_agent.stats.comparability import Verdict
from pytest_benchmark_agent.util.placeholders import as_text

#: The version of the record format (docs/benchmark/FORMAT.md) every record file carries.
SCHEMA_VERSION = 1


def verdict_table(data: Any) -> FrozenDict:
    """metric -> label -> :class:`.Verdict` from a record's ``verdicts`` mapping."""
    if not isinstance(data, Mapping):
        return FrozenDict()
    return FrozenDict(
        {
            metric: FrozenDict(
                {
                    label: record if isinstance(record, Verdict) else Verdict.from_dict(record)
                    for label, record in per.items()
                }
            )
            for metric, per in data.items()
            if isinstance(per, Mapping)
        }
    )


def _verdicts_as_dict(table: Mapping[str, Mapping[str, Verdict]]) -> dict[str, Any]:
    return {
        metric: {label: v.to_dict() for label, v in per.items()} for metric, per in table.items()
    }


@dataclass(frozen=True)
class PlannedTrial:
    """One trial of the run's plan (``config.yaml``'s ``planned_trials``), run or not yet: what
    the judge needs to count blocks and a writer to list the plan."""

    id: str
    treatment: str
    replicate: int
    stage: str
    seed: int | None = None
    position: int = 0


@dataclass(frozen=True)
class SessionOutcome:
    """How the pytest session that recorded a run ended, for a run the ``bench`` fixture
    started (:mod:`.engine.fixture`): not in ``results.yaml``, which the session wrote."""

    exit_code: int
    output: str


@dataclass(frozen=True)
class BaselineComparison:
    """The comparison with ``--bench-baseline`` (``baseline:`` of ``results.yaml``): which run
    served, the verdicts across the two runs, the code each measured and the CI gate on them."""

    run_id: str | None
    ref: str | None = None
    resolved: str | None = None
    refused: str | None = None
    verdicts: Mapping[str, Mapping[str, Verdict]] = field(default_factory=FrozenDict)
    code: Mapping[str, Any] = field(default_factory=FrozenDict)
    gate: GateRecord | None = None
    extra: Mapping[str, Any] = field(default_factory=FrozenDict)
    # -- the judge's (issue 36): the verdicts judged with the session as the unit
    # (``judge.evidence.judge_across``), which the CI gate reads before ``verdicts``.
    judged: Mapping[str, Mapping[str, Verdict]] = field(default_factory=FrozenDict)

    @property
    def gated_verdicts(self) -> Mapping[str, Mapping[str, Verdict]]:
        """The verdicts the CI gate judges: ``judged``, else ``verdicts`` (an older record)."""
        return self.judged or self.verdicts

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BaselineComparison:
        known = {"run_id", "ref", "resolved", "refused", "verdicts", "code", "gate", "judged"}
        return cls(
            run_id=data.get("run_id"),
            ref=data.get("ref"),
            resolved=data.get("resolved"),
            refused=data.get("refused"),
            verdicts=verdict_table(data.get("verdicts")),
            code=freeze(data.get("code") or {}),
            gate=GateRecord.read(data.get("gate")),
            extra=freeze({k: v for k, v in data.items() if k not in known}),
            judged=verdict_table(data.get("judged")),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "ref": self.ref,
            "resolved": self.resolved,
            "refused": self.refused,
        }
        out.update(
            verdicts=_verdicts_as_dict(self.verdicts),
            code=thaw(self.code),
            gate=self.gate.to_dict() if self.gate is not None else {},
        )
        if self.judged:
            out["judged"] = _verdicts_as_dict(self.judged)
        out.update(thaw(self.extra))
        return out


@dataclass(frozen=True)
class Judgement:
    """What gate 2 decides about a run, returned by ``judge.gate2.judge_run`` and put on the run
    by the engine: the verdicts, the refusals, the caveats gate 2 adds, the comparison with a
    baseline, the reproduction, the tag and the CI gate."""

    verdicts: Mapping[str, Mapping[str, Verdict]] = field(default_factory=FrozenDict)
    #: host -> metric -> label -> :class:`.Verdict`.
    verdicts_by_host: Mapping[str, Mapping[str, Mapping[str, Verdict]]] = field(
        default_factory=FrozenDict
    )
    refusals: tuple[str, ...] = ()
    caveats: tuple[str, ...] = ()
    sequential: SequentialRecord | None = None
    baseline: BaselineComparison | None = None
    reproduces: ReproductionRecord | None = None
    tag: str = "EXPLORATORY"
    tag_reasons: tuple[str, ...] = ()
    ci_gate: GateRecord | None = None


#: ``results.yaml``'s fields in FORMAT.md's order, with how each is frozen on reading.
_FIELDS: tuple[str, ...] = (
    "schema_version",
    "run_id",
    "name",
    "state",
    "tag",
    "treatment_variable",
    "control",
    "trials",
    "summary",
    "selected",
    "verdicts",
    "treatments",
    "started",
    "ended",
    "stop_reason",
    "counts",
    "spent",
    "preps",
    "warmups",
    "caveats",
    "config_file",
    "config_hash",
    "decided",
    "refusals",
    "verdicts_by_host",
    "baseline",
    "revisions",
    "ci_gate",
    "reproduces",
    "sequential",
    "hash_seed_base",
    "tag_reasons",
    "what_went_wrong",
)


@dataclass(frozen=True)
class RunRecord:
    """One run, as ``results.yaml`` holds it, with where it lives and what it was configured
    with (``config.yaml``'s frozen config and fingerprint)."""

    run_id: str
    name: str
    state: str
    tag: str = "EXPLORATORY"
    treatment_variable: str | None = None
    control: str = "default"
    treatments: tuple[str, ...] = ()
    trials: tuple[TrialRecord, ...] = ()
    #: metric -> label -> :class:`.SummaryRow`.
    summary: Mapping[str, Mapping[str, SummaryRow]] = field(default_factory=FrozenDict)
    selected: Mapping[str, Any] | None = None
    verdicts: Mapping[str, Mapping[str, Verdict]] = field(default_factory=FrozenDict)
    started: str | None = None
    ended: str | None = None
    stop_reason: str | None = None
    counts: Mapping[str, int] = field(default_factory=FrozenDict)
    spent: Mapping[str, float] = field(default_factory=FrozenDict)
    preps: tuple[PrepEvent, ...] = ()
    warmups: tuple[Mapping[str, Any], ...] = ()
    caveats: tuple[str, ...] = ()
    config_file: str | None = None
    config_hash: str | None = None
    decided: str | None = None
    refusals: tuple[str, ...] = ()
    #: host -> metric -> label -> :class:`.Verdict`.
    verdicts_by_host: Mapping[str, Mapping[str, Mapping[str, Verdict]]] = field(
        default_factory=FrozenDict
    )
    baseline: BaselineComparison | None = None
    revisions: Mapping[str, Any] | None = None
    ci_gate: GateRecord | None = None
    reproduces: ReproductionRecord | None = None
    sequential: SequentialRecord | None = None
    hash_seed_base: int | None = None
    tag_reasons: tuple[str, ...] = ()
    what_went_wrong: tuple[str, ...] = ()
    schema_version: int = SCHEMA_VERSION
    #: Every other field of ``results.yaml`` (a newer writer's, ``flags`` of a reclassified
    #: run), kept as read.
    extra: Mapping[str, Any] = field(default_factory=FrozenDict)
    #: Not in ``results.yaml``: the run folder, and ``config.yaml``'s config, fingerprint and
    #: plan (a record read from disk has the plan's ids only: ``planned_trials``).
    dir: Path | None = None
    config: Mapping[str, Any] = field(default_factory=FrozenDict)
    fingerprint: Mapping[str, Any] = field(default_factory=FrozenDict)
    planned: tuple[PlannedTrial, ...] = ()
    #: ``--bench-against``'s (control, treatment) label pairs measured together
    #: (:attr:`.BenchPlan.revision_pairs`), each judged alone and each named with its own control
    #: in the job summary; empty on a record read from disk.
    revision_pairs: tuple[tuple[str, str], ...] = ()
    #: The benchmark file, resolved (``config.yaml``'s ``source``), for a writer that has only
    #: the record and for ``publish``, which links a run's series to it.
    source: str | None = None
    #: The session's exit code and output, set by the ``bench`` fixture on the record it returns
    #: (None for a record read or made otherwise).
    session: SessionOutcome | None = None

    @property
    def home(self) -> Path | None:
        """The data home the run folder is in (``<home>/runs/<run_id>``)."""
        return self.dir.parent.parent if self.dir is not None else None

    @functools.cached_property
    def model(self) -> BenchmarkConfig:
        """The frozen config as its model (validated once per record)."""
        return BenchmarkConfig.model_validate(thaw(self.config))

    @classmethod
    def from_dict(
        cls,
        results: Mapping[str, Any],
        *,
        run_dir: Path | None = None,
        config: Mapping[str, Any] | None = None,
        fingerprint: Mapping[str, Any] | None = None,
        planned: tuple[PlannedTrial, ...] = (),
        revision_pairs: tuple[tuple[str, str], ...] = (),
        source: str | None = None,
    ) -> RunRecord:
        """The record a ``results.yaml`` document holds (checked by :func:`.reader.load_results`
        when it came from disk). A record without ``schema_version`` predates the field and
        reads as version 1; a newer version is refused by :func:`load_run`."""
        data = dict(results)
        fields = {name: _READERS.get(name, freeze)(data.get(name)) for name in _FIELDS}
        fields["run_id"] = str(data.get("run_id") or (run_dir.name if run_dir else ""))
        return cls(
            **fields,
            extra=freeze({k: v for k, v in data.items() if k not in _FIELDS}),
            dir=run_dir,
            config=freeze(config or {}),
            fingerprint=freeze(fingerprint or {}),
            planned=planned,
            revision_pairs=revision_pairs,
            source=source,
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``results.yaml`` document: FORMAT.md's fields in order, then the others."""
        out: dict[str, Any] = {}
        for name in _FIELDS:
            value = getattr(self, name)
            if name == "verdicts":
                value = _verdicts_as_dict(value)
            elif name == "verdicts_by_host":
                value = {host: _verdicts_as_dict(table) for host, table in value.items()}
            out[name] = thaw(value)
        out.update(thaw(self.extra))
        return out

    # -- what readers ask of a run --------------------------------------------------------------

    @property
    def one_configuration(self) -> bool:
        """One configuration measured alone: nothing is compared inside the run."""
        return self.treatment_variable is None

    def passed(self) -> Iterator[TrialRecord]:
        """The trials that passed, in execution order."""
        return (t for t in self.trials if t.status == "passed")

    def samples(self, metric: str) -> dict[str, list[Any]]:
        """Treatment -> the metric's values over the passed trials, in execution order."""
        table: dict[str, list[Any]] = {label: [] for label in self.treatments}
        for trial in self.passed():
            if metric in trial.metrics:
                table.setdefault(trial.treatment, []).append(trial.metrics[metric])
        return table

    def stats(self, metric: str) -> Mapping[str, SummaryRow]:
        """Treatment -> descriptive statistics of the metric (n, median, mean, cv, ...)."""
        return self.summary.get(metric, FrozenDict())

    def verdict(self, metric: str, treatment: Any) -> Verdict:
        """Gate 2's verdict on ``metric`` for ``treatment`` against the control. ``treatment``
        is its value as the file wrote it (``9``, ``"9"``, ``True``) or its label; a KeyError
        names what the record does hold."""
        label = as_text(treatment)
        if metric not in self.verdicts:
            raise KeyError(
                f"no verdict on {metric!r} in run {self.run_id}: verdicts cover the metrics "
                f"{sorted(self.verdicts)}"
            )
        per = self.verdicts[metric]
        if label not in per:
            raise KeyError(
                f"no verdict on {metric!r} for treatment {treatment!r} in run {self.run_id}: "
                f"judged are {sorted(per)} (the control {self.control!r} is judged against)"
            )
        return per[label]

    # -- what a comparison across runs reads (the judge, the verbs, bisect) -----------------------

    @property
    def code(self) -> str:
        """The code this run measured, as a label (``a1b2c3d``, ``content:1f2e3d4``)."""
        return code_label(self.fingerprint.get("code_identity"))

    @property
    def uses_gpu(self) -> bool:
        """Whether the run's config asks for a GPU (its fingerprint's accelerator then counts)."""
        config = self.model
        return bool(config.resources.gpus or any(stage.gpus for stage in config.stages))

    @property
    def flagged(self) -> tuple[str, ...]:
        """The flags a reclassification of a run this one cited left on its record, as
        caveats (a run relying on this one carries them on with its caveats)."""
        return tuple(
            f"flagged: it cited {flag.get('run')}, since reclassified {flag.get('to')} "
            f"({flag.get('why')})"
            for flag in self.extra.get("flags") or ()
        )

    def hosts(self) -> list[str]:
        """The hosts that recorded a trial, sorted."""
        return sorted({t.host for t in self.trials if t.host})

    def overlapping_measurements(self) -> list[tuple[str, str]]:
        """Pairs of trial ids whose measurement windows overlapped on the same host. Two
        counted trials side by side are no such pair: a count does not depend on what else
        runs, and a block's counted trials run at once (engine/counted.py)."""
        pairs = []
        for host in self.hosts():
            timed = sorted(
                (t for t in self.trials if t.host == host and t.started and t.ended),
                key=lambda t: t.started or "",
            )
            running: list[TrialRecord] = []
            for later in timed:
                running = [t for t in running if (later.started or "") < (t.ended or "")]
                counted = bool(later.counted_by)
                pairs += [(t.id, later.id) for t in running if not (counted and t.counted_by)]
                running.append(later)
        return pairs

    def replace(self, **changes: Any) -> RunRecord:
        """A copy with ``changes`` (frozen in turn)."""
        return dataclasses.replace(self, **{k: freeze(v) for k, v in changes.items()})


def _trial(data: Any) -> TrialRecord:
    return data if isinstance(data, TrialRecord) else TrialRecord.from_dict(data)


def _prep(data: Any) -> PrepEvent:
    return data if isinstance(data, PrepEvent) else PrepEvent.from_dict(data)


def _baseline(data: Any) -> BaselineComparison | None:
    if data is None or isinstance(data, BaselineComparison):
        return data
    return BaselineComparison.from_dict(data)


def _texts(data: Any) -> tuple[str, ...]:
    return tuple(data or ())


def _mapping(data: Any) -> FrozenDict:
    return freeze(data or {})


#: How :meth:`RunRecord.from_dict` reads each field of ``results.yaml`` that is more than frozen
#: as it is (absent values get the record's defaults; trials, preps and verdicts their types).
_READERS: dict[str, Any] = {
    "schema_version": lambda v: int(v or 1),
    "name": lambda v: str(v or ""),
    "state": lambda v: str(v or ""),
    "tag": lambda v: str(v or "EXPLORATORY"),
    "control": lambda v: as_text("default" if v is None else v),
    "treatments": lambda v: tuple(as_text(t) for t in v or ()),
    "trials": lambda v: tuple(_trial(t) for t in v or ()),
    "preps": lambda v: tuple(_prep(p) for p in v or ()),
    "summary": summary_table,
    "counts": _mapping,
    "spent": _mapping,
    "warmups": lambda v: freeze(v or ()),
    "verdicts": verdict_table,
    "verdicts_by_host": lambda v: FrozenDict(
        {host: verdict_table(table) for host, table in (v or {}).items()}
    ),
    "baseline": _baseline,
    "ci_gate": GateRecord.read,
    "reproduces": ReproductionRecord.read,
    "sequential": SequentialRecord.read,
    "caveats": _texts,
    "refusals": _texts,
    "tag_reasons": _texts,
    "what_went_wrong": _texts,
}


def load_run(run_dir: Path) -> RunRecord:
    """The record of the run in ``run_dir``: ``results.yaml`` with the journal merged in, and
    ``config.yaml``'s config and fingerprint. The one loader of a run folder: every field is
    checked first (:func:`.runcheck.check_run_files`), and UnreadableRecord names the file, the
    field and what is wrong (a newer format's version included)."""
    results = load_results(run_dir)
    version = results.get("schema_version")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise UnreadableRecord(
            run_dir / "results.yaml",
            f"written in format version {version}, newer than this version's {SCHEMA_VERSION}; "
            "fix: upgrade pytest-benchmark-agent to read it",
        )
    frozen_path = run_dir / "config.yaml"
    frozen = (load_yaml(frozen_path) or {}) if os.path.lexists(frozen_path) else {}
    if not isinstance(frozen, Mapping):
        raise UnreadableRecord(frozen_path, "not a mapping of fields")
    try:
        check_run_files(results, frozen)
    except RecordFieldError as error:
        where = frozen_path if error.field.startswith("config.yaml:") else run_dir / "results.yaml"
        raise UnreadableRecord(
            where, f"field {error.field.removeprefix('config.yaml:')}: {error.problem}"
        ) from None
    return record_of_files(results, frozen, run_dir)


def record_of_files(
    results: Mapping[str, Any], frozen: Mapping[str, Any], run_dir: Path
) -> RunRecord:
    """The record of a run's ``results.yaml`` and ``config.yaml`` documents, once checked: by
    :func:`load_run`, by ``import`` before it writes the run through the writer, or (their
    shape only, by :func:`.reader.load_results`) by the recovery of a run an earlier version
    left, which finishing it recomputes."""
    planned = frozen.get("planned_trials") or ()
    return RunRecord.from_dict(
        results,
        run_dir=run_dir,
        config=frozen["config"] if isinstance(frozen.get("config"), Mapping) else {},
        fingerprint=frozen.get("fingerprint") or {},
        source=frozen.get("source"),
        planned=tuple(
            PlannedTrial(id=str(i), treatment="", replicate=0, stage="")
            for i in planned
            if isinstance(i, str)
        ),
    )
