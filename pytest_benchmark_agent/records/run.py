"""One benchmark run in memory: its identity, folder, trial records, preps and summary.

A run is one benchmark file executed in one pytest session. It is created at collection (so
``--collect-only`` can plan it without touching the disk) and started before its first trial.
:meth:`BenchRun.record` is the run as it stands, frozen (:class:`.RunRecord`): what every hook,
writer and report is given.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
import secrets
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_benchmark_agent.config.metric import BUILTIN_METRICS
from pytest_benchmark_agent.records.frozen import FrozenDict, freeze
from pytest_benchmark_agent.records.hashseeds import hash_seed_base
from pytest_benchmark_agent.records.outcomes import GateRecord, ReproductionRecord, SequentialRecord
from pytest_benchmark_agent.records.record import (
    SCHEMA_VERSION,
    BaselineComparison,
    Judgement,
    PlannedTrial,
    RunRecord,
)
from pytest_benchmark_agent.records.schema import TrialRecord
from pytest_benchmark_agent.records.summary import SummaryRow
from pytest_benchmark_agent.records.tally import Tally
from pytest_benchmark_agent.stats.comparability import Verdict
from pytest_benchmark_agent.stats.describe import describe, describe_exact, median_ratio
from pytest_benchmark_agent.util import redact
from pytest_benchmark_agent.util.placeholders import as_text
from pytest_benchmark_agent.util.safetext import NAME_MAX

if TYPE_CHECKING:  # the plan is the engine's; a record only holds it
    from pytest_benchmark_agent.engine.plan import BenchPlan, TrialSpec


#: The caveat of a run measured under ``--bench-isolation none`` (gate 2 reads it back).
CAVEAT_NONE = (
    "isolation 'none': measurements may have overlapped other stages of this session "
    "on the same host"
)


def new_session_token() -> tuple[str, str]:
    """(UTC stamp, random suffix) shared by every run of a session, workers included."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H-%M-%S"), secrets.token_hex(2)


def new_run_id(name: str, token: tuple[str, str] | None = None) -> str:
    """``2026-12-02T14-05-09-fts5-merge-3f2a``: sortable by time, readable, unique.

    Workers of one xdist session share ``token``, so they all record into the same run folder.
    The name's part is bounded (gate 1 refuses a longer name; a verb may ask before it).
    """
    stamp, suffix = token or new_session_token()
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:NAME_MAX].strip("-")
    return f"{stamp}-{slug}-{suffix}"


@dataclass
class BenchRun:
    """The live record of one run."""

    plan: BenchPlan
    home: Path
    run_id: str
    planned: list[TrialSpec] = field(default_factory=list)
    state: str = "running"
    tag: str = "EXPLORATORY"
    trials: list[TrialRecord] = field(default_factory=list)
    preps: list[dict[str, Any]] = field(default_factory=list)
    #: Untimed warm-up rounds (engine/untimed.py): recorded, never a trial or a sample.
    warmups: list[dict[str, Any]] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    fingerprint: dict[str, Any] = field(default_factory=dict)
    started: str | None = None
    ended: str | None = None
    stop_reason: str | None = None
    #: metric -> label -> :class:`.SummaryRow` (:meth:`summarize`).
    summary: dict[str, dict[str, SummaryRow]] = field(default_factory=dict)
    #: Gate 2's verdicts (metric -> label -> Verdict), from ``judge.gate2.judge_run``'s
    #: Judgement, as every value the judgement puts here (:meth:`judged`).
    verdicts: Mapping[str, Mapping[str, Verdict]] = field(default_factory=dict)
    selected: dict[str, Any] | None = None
    #: Sequential replication stopped adding blocks (the state stays ``complete``).
    decided: str | None = None
    #: Gate 2's refusals, and the verdicts per host.
    refusals: list[str] = field(default_factory=list)
    verdicts_by_host: Mapping[str, Any] = field(default_factory=dict)
    #: The comparison with ``--bench-baseline``, the reproduction check, the sequential looks.
    baseline: BaselineComparison | None = None
    reproduces: ReproductionRecord | None = None
    sequential: SequentialRecord | None = None
    tag_reasons: list[str] = field(default_factory=list)
    #: What ``--bench-fail-on`` acts on (``judge.ci_gate.ci_gate``): its outcome and reasons.
    ci_gate: GateRecord | None = None
    what_went_wrong: list[str] = field(default_factory=list)
    #: ``--bench-hash-seeds BASE``: replay a recorded run's hash seeds (None: the run's own).
    replayed_hash_seeds: int | None = None
    #: The trials frozen so far, in order, and the list they were frozen from (:meth:`record`).
    _frozen_trials: tuple[TrialRecord, ...] = field(default=(), repr=False)
    _frozen_of: list[Any] | None = field(default=None, repr=False)
    _fingerprint_cache: tuple[Any, FrozenDict] = field(default=(None, FrozenDict()), repr=False)
    _tally: Tally = field(default_factory=Tally, repr=False)
    _planned_cache: tuple[Any, tuple[PlannedTrial, ...]] = field(default=(None, ()), repr=False)
    #: The last snapshot and the version of the run it was made from (:meth:`record`).
    _snapshot: tuple[tuple[Any, ...], RunRecord] | None = field(default=None, repr=False)

    @property
    def hash_seed_base(self) -> int:
        """The offset of this run's hash seeds (engine/counters.py): drawn from the run id, or
        a recorded run's, replayed."""
        if self.replayed_hash_seeds is not None:
            return self.replayed_hash_seeds
        return hash_seed_base(self.run_id)

    @property
    def counted(self) -> bool:
        """Whether any stage of the run is counted (``counters:``)."""
        return any(stage.counters for stage in self.plan.config.stages)

    @property
    def name(self) -> str:
        return self.plan.config.name

    @functools.cached_property
    def dir(self) -> Path:
        return self.home / "runs" / self.run_id

    @functools.cached_property
    def _trials_dir(self) -> Path:
        return self.dir / "trials"

    @functools.cached_property
    def config_hash(self) -> str:
        """Identity of the frozen config (what a reproduction must share); the hypothesis and the
        budget are left out: they describe or limit the run, they do not change what it measures."""
        config = redact.as_written(self.plan.config).model_dump(  # no secret, not even hashed
            mode="json", exclude_none=True, exclude={"hypothesis", "budget"}
        )
        identity = {
            "config": config,
            "variable": self.variable,
            "treatments": self.treatment_labels,
        }
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()

    @property
    def variable(self) -> str | None:
        """The treatment variable; None for a file of one configuration."""
        return self.plan.variable

    @property
    def one_configuration(self) -> bool:
        """One configuration measured alone: its one label ``default`` is the control and
        ``treatment_labels == ["default"]``; nothing is compared inside the run."""
        return self.plan.variable is None

    @property
    def control(self) -> str:
        return as_text(self.plan.control)

    @property
    def treatment_labels(self) -> list[str]:
        return [as_text(t) for t in self.plan.treatments]

    def trial_id(self, spec: TrialSpec) -> str:
        return spec.test_name(self.variable)

    def trial_dir(self, spec: TrialSpec) -> Path:
        """A filesystem-safe folder per trial (ids may hold any character a value holds)."""
        trial_id = self.trial_id(spec)
        safe = re.sub(r"[^A-Za-z0-9_.=@-]+", "_", trial_id)[:100]
        digest = hashlib.sha256(trial_id.encode()).hexdigest()[:8]
        return self._trials_dir / f"{safe}-{digest}"

    def blank_trial(
        self,
        spec: TrialSpec,
        status: str,
        reason: str | None = None,
        ended: str | None = None,
    ) -> TrialRecord:
        """A trial record before (or instead of) measuring: the plan's fields, and a trial that
        did not run its ``status``, ``reason`` and when it ``ended``."""
        return TrialRecord(
            id=self.trial_id(spec),
            treatment=spec.treatment_label,
            replicate=spec.replicate,
            seed=spec.seed,
            position=spec.position,
            status=status,
            stage=spec.stage.name,
            reason=reason,
            ended=ended,
        )

    def metric_names(self) -> list[str]:
        """Declared metrics first, then any built-in metric the trials carry."""
        names = list(self.plan.config.metrics)
        return names + [m for m in BUILTIN_METRICS if m not in names]

    def samples(self) -> dict[str, dict[str, list[Any]]]:
        """metric -> treatment -> values of the passed trials, in execution order (an exact
        metric's as recorded: ints and strs)."""
        table: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
        for trial in self.trials:
            if trial.status != "passed":
                continue
            for metric, value in trial.metrics.items():
                table[metric][trial.treatment].append(value)
        return table

    def summarize(self) -> None:
        """Descriptive statistics per metric and treatment, with the ratio to the control (one
        configuration: its statistics alone, no ratio)."""
        table = self.samples()
        self.summary = {}
        for metric in self.metric_names():
            if metric not in table:
                continue
            per = {
                label: SummaryRow(self.describe(metric, table[metric].get(label, [])))
                for label in self.treatment_labels
            }
            for label, row in per.items():
                if label != self.control and not row.exact:
                    ratio_to_control = median_ratio(row, per[self.control])
                    per[label] = SummaryRow({**row, "ratio_to_control": ratio_to_control})
            self.summary[metric] = per

    def describe(self, metric: str, values: list[Any]) -> dict[str, Any]:
        """Descriptive statistics of ``metric``'s values; a ``direction: equal`` metric's are
        its distinct values as recorded, with their counts (never a mean or a CV)."""
        spec = self.plan.config.metrics.get(metric)
        if spec is not None and spec.direction == "equal":
            return describe_exact(values)
        return describe(values)

    def judged(self, judgement: Judgement) -> None:
        """Put gate 2's judgement on the run (the judge returns it and never writes here); its
        values stay typed and frozen, as :meth:`record` gives them to every reader."""
        self.verdicts = judgement.verdicts
        self.verdicts_by_host = judgement.verdicts_by_host
        self.refusals = list(judgement.refusals)
        self.caveats += [c for c in judgement.caveats if c not in self.caveats]
        self.sequential = judgement.sequential
        self.baseline = judgement.baseline
        self.reproduces = judgement.reproduces
        self.tag = judgement.tag
        self.tag_reasons = list(judgement.tag_reasons)
        self.ci_gate = judgement.ci_gate

    def record(self) -> RunRecord:
        """The run as it stands, frozen: what every hook, report and reader is given.

        Trials are frozen already (each once, as it ends) and only appended, and the config, its
        hash and the fingerprint are frozen once per run, so a hook called per trial costs
        about the same on a run of ten trials as on one of ten thousand. A run that has not
        changed since the last snapshot (a stage's start after the previous trial's end) gets
        that snapshot again; one that has only gained trials (a trial's end, the common case)
        gets it with the new trials and their tally, every other field shared with it."""
        version = self._version()
        last = self._snapshot
        if last is not None and last[0] == version:
            return last[1]
        if last is not None and _only_trials_added(last[0], version):
            record = self._with_new_trials(last[1])
        else:
            record = self._freeze()
        self._snapshot = (version, record)
        return record

    def _version(self) -> tuple[Any, ...]:
        """What :meth:`record` reads that the engine changes as a run goes: the containers it
        reassigns (held, so compared by identity first), the lengths of those it appends to,
        and the scalars. Equal versions give equal records. The trials come first
        (:func:`_only_trials_added`)."""
        return (
            self.trials,
            len(self.trials),
            self.preps,
            len(self.preps),
            self.warmups,
            len(self.warmups),
            self.caveats,
            len(self.caveats),
            (self.state, self.tag, self.started, self.ended, self.stop_reason, self.decided),
            (self.summary, self.selected, self.verdicts, self.verdicts_by_host, self.baseline),
            (self.reproduces, self.sequential, self.ci_gate, self.refusals, self.tag_reasons),
            (self.what_went_wrong, self.fingerprint, self.planned, len(self.planned)),
        )

    def _freeze_new_trials(self) -> None:
        """Freeze the trials appended since the last snapshot onto ``_frozen_trials`` and
        their tally (all of them again when the list itself was replaced: recovery)."""
        if self._frozen_of is not self.trials or len(self.trials) < len(self._frozen_trials):
            self._frozen_of, self._frozen_trials = self.trials, ()
            self._tally = Tally()
        new = tuple(self.trials[len(self._frozen_trials) :])
        if new:
            self._frozen_trials += new
            self._tally.add(new)

    def _with_new_trials(self, last: RunRecord) -> RunRecord:
        """``last`` with the trials appended since it, and their counts and spend."""
        self._freeze_new_trials()
        return dataclasses.replace(
            last,
            trials=self._frozen_trials,
            counts=FrozenDict(self._tally.counts),
            spent=FrozenDict(self._tally.spent(self.preps)),
        )

    def _freeze(self) -> RunRecord:
        """A new snapshot of the run (:meth:`record`)."""
        self._freeze_new_trials()
        record = RunRecord.from_dict(
            {
                **self._results_fields(),
                "counts": dict(self._tally.counts),
                "spent": self._tally.spent(self.preps),
            },
            run_dir=self.dir,
            config=self._config_record,
            fingerprint=self._fingerprint_record,
            planned=self._planned_record,
            source=self._source,
        )
        return dataclasses.replace(
            record,
            trials=self._frozen_trials,
            revision_pairs=tuple(
                (control, treatment) for control, treatment in self.plan.revision_pairs
            ),
        )

    @property
    def _planned_record(self) -> tuple[PlannedTrial, ...]:
        """The plan as the record lists it, made again only when the session assigns a new
        plan (``planned`` is set once at collection, or by recovery)."""
        key = (id(self.planned), len(self.planned))
        if self._planned_cache[0] != key:
            self._planned_cache = (
                key,
                tuple(
                    PlannedTrial(
                        id=self.trial_id(spec),
                        treatment=spec.treatment_label,
                        replicate=spec.replicate,
                        stage=spec.stage.name,
                        seed=spec.seed,
                        position=spec.position,
                    )
                    for spec in self.planned
                ),
            )
        return self._planned_cache[1]

    @functools.cached_property
    def _config_record(self) -> FrozenDict:
        """``config.yaml``'s config: the plan is built once and never changed."""
        return freeze(self.plan.config.model_dump(mode="json", exclude_none=True))

    @property
    def _fingerprint_record(self) -> FrozenDict:
        """The fingerprint, frozen again only when the session assigns a new one."""
        if self._fingerprint_cache[0] is not self.fingerprint:
            self._fingerprint_cache = (self.fingerprint, freeze(self.fingerprint))
        return self._fingerprint_cache[1]

    @functools.cached_property
    def _source(self) -> str:
        """The benchmark file, resolved (``config.yaml``'s ``source``)."""
        return str(self.plan.path.resolve())

    def _results_fields(self) -> dict[str, Any]:
        """``results.yaml``'s fields as the live run holds them (trials aside)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "name": self.name,
            "state": self.state,
            "tag": self.tag,
            "treatment_variable": self.variable,
            "control": self.control,
            "summary": self.summary,
            "selected": self.selected,
            "verdicts": self.verdicts,
            "treatments": self.treatment_labels,
            "started": self.started,
            "ended": self.ended,
            "stop_reason": self.stop_reason,
            "preps": self.preps,
            "warmups": self.warmups,
            "caveats": self.caveats,
            "config_file": str(self.plan.path),
            "config_hash": self.config_hash,
            "decided": self.decided,
            "refusals": self.refusals,
            "verdicts_by_host": self.verdicts_by_host,
            "baseline": self.baseline,
            "revisions": self.plan.revisions.as_record() if self.plan.revisions else None,
            "ci_gate": self.ci_gate,
            "reproduces": self.reproduces,
            "sequential": self.sequential,
            "hash_seed_base": self.hash_seed_base if self.counted else None,
            "tag_reasons": self.tag_reasons,
            "what_went_wrong": self.what_went_wrong,
        }


def _only_trials_added(before: tuple[Any, ...], now: tuple[Any, ...]) -> bool:
    """Whether a run changed between two versions (:meth:`BenchRun._version`) only by trials
    appended to the same list."""
    return before[0] is now[0] and now[1] > before[1] and before[2:] == now[2:]
