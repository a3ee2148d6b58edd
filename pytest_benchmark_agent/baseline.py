"""Baselines, reproductions and comparisons between two recorded runs.

Three questions about runs A (the reference) and B, answered from their records
(``results.yaml`` and the frozen ``config.yaml``) or from a live run:

* **May B be compared with A at all?** Gate 1 on the frozen configs: they may differ in the
  treatment variable's values only (every other param, the variable itself, the stages and the
  seeds are equal), and A must be RELIABLE or QUALIFIED to serve as a baseline. Gate 2 on the
  fingerprints (:func:`.fingerprint.compare_fingerprints`): a blocking difference refuses the
  comparison, naming the fields; benign ones are listed.
* **What does B measure against A?** Each treatment of B against the same treatment of A, or
  against A's control when A did not run it, under the rule of :mod:`.analysis`. The sessions
  were not interleaved, so this is unpaired (Mann-Whitney U; paired by seed when seeds are
  used): drift between the sessions does not cancel, and the report says so.
* **Does B reproduce A?** With the same frozen config: every primary verdict is the same (else B
  contradicts A) and every decided primary ratio is within the metric's ``reproduce_tolerance``
  of A's (else B reproduced the verdict but not its size: a caveat). With different treatments
  (a baseline): the treatments both ran, compared by median, an *anchor*, weaker than a
  reproduction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import BenchmarkConfig, MetricSpec
from .errors import ConfigError
from .fingerprint import FingerprintDiff, compare_fingerprints
from .gate1 import treatment_variable
from .placeholders import as_text
from .record import index_entries, load_results, load_yaml

if TYPE_CHECKING:
    from . import analysis

#: Tags a run needs to serve as a baseline: EXPLORATORY was never reproduced, UNRELIABLE failed.
BASELINE_TAGS = ("RELIABLE", "QUALIFIED")
#: Tags of an earlier run that a new run of the same config may reproduce.
REPRODUCIBLE_TAGS = ("RELIABLE", "QUALIFIED", "EXPLORATORY")
_REFERENCE = "<reference>"
_OFFSET = 1_000_000  # keeps the two sessions' replicates from pairing as if they were blocks
_UNPAIRED_NOTE = "compared unpaired with Mann-Whitney U"
_MISSING = object()


@dataclass
class RecordView:
    """What a comparison reads of one run, whether it is live or on disk."""

    run_id: str
    name: str
    tag: str
    state: str
    control: str
    treatments: list[str]
    config: dict[str, Any]
    fingerprint: dict[str, Any]
    trials: list[dict[str, Any]]
    summary: dict[str, Any] = field(default_factory=dict)
    verdicts: dict[str, Any] = field(default_factory=dict)
    caveats: list[str] = field(default_factory=list)
    started: str | None = None
    ended: str | None = None
    config_hash: str | None = None

    @classmethod
    def load(cls, run_dir: Path) -> RecordView:
        results = load_results(run_dir)
        frozen_path = run_dir / "config.yaml"
        frozen = (load_yaml(frozen_path) or {}) if frozen_path.is_file() else {}
        return cls(run_id=run_dir.name, name=results.get("name") or "",
                   tag=results.get("tag") or "EXPLORATORY", state=results.get("state") or "",
                   control=str(results.get("control")),
                   treatments=[str(t) for t in results.get("treatments") or []],
                   config=frozen.get("config") or {}, fingerprint=frozen.get("fingerprint") or {},
                   trials=list(results.get("trials") or []),
                   summary=results.get("summary") or {}, verdicts=results.get("verdicts") or {},
                   caveats=list(results.get("caveats") or []) + flag_texts(results),
                   started=results.get("started"), ended=results.get("ended"),
                   config_hash=results.get("config_hash"))

    @classmethod
    def of_run(cls, run: Any) -> RecordView:
        """A live :class:`~.run.BenchRun` (typed loosely: this module sits below run's users)."""
        return cls(run_id=run.run_id, name=run.name, tag=run.tag, state=run.state,
                   control=run.control, treatments=run.treatment_labels,
                   config=run.plan.config.model_dump(mode="json", exclude_none=True),
                   fingerprint=run.fingerprint, trials=run.trials, summary=run.summary,
                   verdicts=run.verdicts, caveats=run.caveats, started=run.started,
                   ended=run.ended, config_hash=run.config_hash)

    def model(self) -> BenchmarkConfig:
        return BenchmarkConfig.model_validate(self.config)

    def specs(self) -> dict[str, MetricSpec]:
        return self.model().metrics

    def uses_gpu(self) -> bool:
        config = self.model()
        return bool(config.resources.gpus or any(stage.gpus for stage in config.stages))


def flag_texts(results: Mapping[str, Any]) -> list[str]:
    """The flags a reclassification of a run this one cited left on its record, as caveats."""
    return [f"flagged: it cited {flag.get('run')}, since reclassified {flag.get('to')} "
            f"({flag.get('why')})" for flag in results.get("flags") or []]


def primary_metrics(specs: Mapping[str, Any]) -> list[str]:
    """The metrics a run is judged on: its primaries, else every lower/higher metric."""
    return [m for m, s in specs.items() if s.primary] or [
        m for m, s in specs.items() if s.direction != "equal"]


def resolve_run(home: Path, ref: str) -> Path | None:
    """A recorded run folder by exact id or unique id prefix, else None."""
    runs = home / "runs"
    folders = sorted(p for p in runs.iterdir() if (p / "results.yaml").is_file()) \
        if runs.is_dir() else []
    matches = [p for p in folders if p.name == ref] or [p for p in folders
                                                         if p.name.startswith(ref)]
    return matches[0] if len(matches) == 1 else None


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
            out.append((f"stages ({name})", _stage_text(stages.get(name)),
                        _stage_text(others.get(name))))
    if this.seeds != other.seeds:
        out.append(("seeds", str(this.seeds), str(other.seeds)))
    return out


def _text(value: Any) -> str:
    return "(not declared)" if value is _MISSING else repr(as_text(value))


def _stage_text(stage: dict[str, Any] | None) -> str:
    return "(no such stage)" if stage is None else repr(stage.get("cmd"))


def check_baseline(home: Path, ref: str, config: BenchmarkConfig, path: Path) -> None:
    """Gate 1 for ``--bench-baseline``: a collection error unless ``ref`` may be a baseline."""
    run_dir = resolve_run(home, ref)
    if run_dir is None:
        raise ConfigError(path, [("--bench-baseline", f"'{ref}' names no single recorded run in "
                                  f"{home / 'runs'}.", "give a run id or a unique prefix of one "
                                  "(benchmark-agent history lists them).")])
    view = RecordView.load(run_dir)
    problems: list[tuple[str, str, str]] = []
    if view.tag not in BASELINE_TAGS:
        why = ("it was never reproduced" if view.tag == "EXPLORATORY" else "a gate failed in it")
        problems.append(("--bench-baseline", f"run {view.run_id} is {view.tag} ({why}) and "
                         "cannot be a baseline.", "reproduce it first (run the same config "
                         "again) or name a RELIABLE or QUALIFIED run."))
    try:
        other = view.model()
    except ValueError as exc:
        raise ConfigError(path, [*problems, ("--bench-baseline", f"the frozen config of "
                                             f"{view.run_id} no longer validates ({exc}).",
                                             "choose a baseline recorded by this version.")]
                          ) from None
    variable = treatment_variable(config)
    for name, mine, theirs in config_differences(config, other):
        problems.append((name, f"is {mine} here but {theirs} in baseline {view.run_id}: a "
                         f"baseline may differ in the treatment variable ('{variable}') only.",
                         "use the baseline's value (e.g. --bench-set for a param) or choose a "
                         "baseline recorded with this one."))
    if problems:
        raise ConfigError(path, problems)


# -- gate 2 across runs ---------------------------------------------------------------------------

def fingerprint_diff(reference: RecordView, subject: RecordView) -> FingerprintDiff:
    uses_gpu = reference.uses_gpu() or subject.uses_gpu()
    return compare_fingerprints(reference.fingerprint, subject.fingerprint, uses_gpu=uses_gpu)


def blocking_reason(diff: FingerprintDiff) -> str:
    fields = sorted({entry.split(": ", 1)[0] for entry in diff.blocking})
    return "fingerprints differ in fields that matter: " + ", ".join(fields)


def cross_verdicts(subject: RecordView, reference: RecordView, specs: Mapping[str, Any],
                   refusal: str | None = None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Every treatment of ``subject`` against ``reference`` (its same treatment, else its
    control), per metric; all ``not_comparable`` with ``refusal`` when gate 2 refused."""
    from . import analysis  # scipy: imported only when runs are compared

    against = {label: label if label in reference.treatments else reference.control
               for label in subject.treatments}
    verdicts: dict[str, dict[str, Any]] = {metric: {} for metric in specs}
    caveats: list[str] = []
    for ref_label in sorted(set(against.values())):
        labels = [label for label, target in against.items() if target == ref_label]
        where = f"{reference.run_id} `{ref_label}`"
        if refusal is not None:
            for metric in specs:
                for label in labels:
                    verdicts[metric][label] = {"verdict": "not_comparable", "reason": refusal,
                                               "against": where}
            continue
        observations: dict[str, list[analysis.Observation]] = {}
        for metric in specs:
            obs = _observations(reference.trials, metric, {ref_label: _REFERENCE}, 0)
            obs += _observations(subject.trials, metric, {label: label for label in labels},
                                 _OFFSET)
            observations[metric] = obs
        result = analysis.analyze_run(observations, specs, [_REFERENCE, *labels], _REFERENCE)
        for metric, per in result.verdicts.items():
            for label, verdict in per.items():
                verdicts[metric][label] = {**verdict.as_record(), "against": where}
        caveats += [c.replace(_REFERENCE, where) for c in result.caveats
                    if _UNPAIRED_NOTE not in c]
    return verdicts, caveats


def _observations(trials: list[dict[str, Any]], metric: str, names: dict[str, str],
                  offset: int) -> list[analysis.Observation]:
    """Passed trials' values of ``metric`` for the treatments in ``names`` (renamed)."""
    from . import analysis  # scipy: imported only when runs are compared

    seen: dict[tuple[str, int, Any], analysis.Observation] = {}
    for trial in trials:
        label = str(trial.get("treatment"))
        value = (trial.get("metrics") or {}).get(metric)
        if trial.get("status") != "passed" or label not in names or value is None:
            continue
        key = (label, int(trial.get("replicate") or 0), trial.get("seed"))
        seen[key] = analysis.Observation(names[label], key[1] + offset, key[2], float(value))
    return list(seen.values())


# -- reproduction ---------------------------------------------------------------------------------

@dataclass
class Reproduction:
    """Whether a run reproduced (or, for a baseline of other treatments, anchored to) another."""

    run_id: str
    kind: str  # "reproduction" | "anchor"
    lines: list[str]
    problems: list[str]
    tag: str
    caveats: list[str] = field(default_factory=list)
    benign: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_record(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "kind": self.kind, "ok": self.ok, "lines": self.lines,
                "problems": self.problems, "tag": self.tag, "caveats": self.caveats,
                "benign_differences": self.benign}


def reproduction(this: RecordView, prior: RecordView, specs: Mapping[str, Any],
                 benign: list[str]) -> Reproduction:
    """Same frozen config: every primary verdict must be the same (a different one contradicts
    the prior run); a decided effect whose ratio moved beyond ``reproduce_tolerance`` reproduced
    the verdict but not its size, which is a caveat."""
    lines, problems, caveats = [], [], _carried(prior)
    for metric in primary_metrics(specs):
        tolerance = specs[metric].reproduce_tolerance
        for label in this.treatments:
            if label == this.control:
                continue
            mine = this.verdicts.get(metric, {}).get(label) or {}
            theirs = prior.verdicts.get(metric, {}).get(label) or {}
            same = mine.get("verdict") == theirs.get("verdict")
            decided = mine.get("verdict") in ("improved", "regressed")
            within = not decided or _within(mine.get("ratio"), theirs.get("ratio"), tolerance)
            line = (f"`{metric}` [{label}]: {mine.get('verdict')} x{_num(mine.get('ratio'))} "
                    f"here, {theirs.get('verdict')} x{_num(theirs.get('ratio'))} in "
                    f"{prior.run_id}")
            if not same:
                problems.append(line)
                lines.append(f"{line}: NOT reproduced")
            elif not within:
                caveats.append(f"reproduced the verdict of {prior.run_id}, not its size: {line} "
                               f"(reproduce_tolerance {tolerance:.0%})")
                lines.append(f"{line}: the verdict reproduced, the size moved beyond "
                             f"{tolerance:.0%}")
            else:
                lines.append(f"{line}: reproduced (tolerance {tolerance:.0%})")
    return Reproduction(prior.run_id, "reproduction", lines, problems, prior.tag, caveats,
                        benign)


def anchor(this: RecordView, baseline: RecordView, specs: Mapping[str, Any],
           benign: list[str]) -> Reproduction | None:
    """Other treatments: the treatments both runs measured, compared by median (a median that
    moved beyond ``reproduce_tolerance`` is a caveat). None when no treatment is shared."""
    shared = [label for label in this.treatments if label in baseline.treatments]
    if not shared:
        return None
    lines, caveats = [], _carried(baseline)
    for metric in primary_metrics(specs):
        tolerance = specs[metric].reproduce_tolerance
        for label in shared:
            mine = (this.summary.get(metric) or {}).get(label, {}).get("median")
            theirs = (baseline.summary.get(metric) or {}).get(label, {}).get("median")
            line = (f"`{metric}` [{label}]: median {_num(mine)} here, {_num(theirs)} in "
                    f"{baseline.run_id} (tolerance {tolerance:.0%})")
            if mine is not None and _within(mine, theirs, tolerance):
                lines.append(f"{line}: agrees")
            else:
                lines.append(f"{line}: differs")
                caveats.append(f"the treatments shared with baseline {baseline.run_id} moved: "
                               f"{line}")
    return Reproduction(baseline.run_id, "anchor", lines, [], baseline.tag, caveats, benign)


def _carried(reference: RecordView) -> list[str]:
    """What a QUALIFIED reference passes on to the run that relies on it."""
    if reference.tag != "QUALIFIED":
        return []
    return [f"relies on QUALIFIED run {reference.run_id}: " + ("; ".join(reference.caveats)
                                                              or "see its report")]


def _within(a: Any, b: Any, tolerance: float) -> bool:
    if a is None and b is None:
        return True
    if a is None or b is None or b == 0:
        return False
    return abs(a / b - 1) <= tolerance + 1e-12


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.4g}"


def find_reproduction_target(home: Path, this: RecordView, config_hash: str
                             ) -> tuple[RecordView | None, FingerprintDiff | None, list[str]]:
    """The newest earlier run of the same frozen config with a comparable fingerprint.

    Returns it, its fingerprint differences, and a note per newer same-config run skipped
    because its fingerprint differs where it matters.
    """
    skipped: list[str] = []
    candidates = []
    for run_dir, entry in index_entries(home):
        if (run_dir.name != this.run_id and entry.get("name") == this.name
                and entry.get("config_hash") == config_hash and entry.get("state") == "complete"
                and entry.get("tag") in REPRODUCIBLE_TAGS
                and (entry.get("ended") or "") < (this.started or "~")):
            candidates.append((entry.get("ended") or "", run_dir))
    for _, run_dir in sorted(candidates, reverse=True):
        prior = RecordView.load(run_dir)
        diff = fingerprint_diff(prior, this)
        if diff.blocking:
            skipped.append(f"{prior.run_id} (same config) is not comparable: "
                           + blocking_reason(diff))
            continue
        return prior, diff, skipped
    return None, None, skipped
