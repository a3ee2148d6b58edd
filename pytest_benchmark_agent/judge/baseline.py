"""Baselines, reproductions and comparisons between two recorded runs.

Four questions about runs A (the reference) and B, answered from their records
(``results.yaml`` and the frozen ``config.yaml``) or from a live run:

* **Which run is A?** :func:`resolve_ref` reads a REF (a run id or unique prefix, ``latest``, or
  a git revision: the newest finished run of the benchmark whose code identity is that commit,
  with a clean tree) from the ``index.json`` entries alone, so it never opens every record.
  A REF that names nothing is not an error but a :class:`Resolution` whose ``problem`` says
  what was searched and the fix: the run's CI gate is then *unjudged*.
* **May B be compared with A at all?** Gate 1 on the frozen configs: they may differ in the
  treatment variable's values only (every other param, the variable itself, the stages and the
  seeds are equal); A must have finished and not be UNRELIABLE (an EXPLORATORY A is noted).
  Gate 2 on the fingerprints (:func:`.fingerprint.compare_fingerprints`): a blocking difference
  (environment, accelerator, declared variables) refuses the comparison, naming the fields;
  a difference of code is no refusal but the comparison's axis, shown as ``a1b2c3d -> e4f5a6b``.
* **What does B measure against A?** Each treatment of B against the same treatment of A, or
  against A's control when A did not run it, under the rule of :mod:`.analysis`. The sessions
  were not interleaved, so this is unpaired (Mann-Whitney U; paired by seed when seeds are
  used): drift between the sessions does not cancel, and the report says so.
* **Does B reproduce A?** Only a faithful rerun may: the same frozen config *and* the same code.
  Every primary verdict must be the same (else B contradicts A), and a decided effect must
  agree in size: its 95% interval overlaps A's, or its ratio is within the metric's
  ``reproduce_tolerance`` of A's (else a caveat). A run of one configuration has no verdict of
  its own: it reproduces A when every primary metric is ``no_change`` against A. With other
  treatments and the same code (a baseline), the treatments both ran, compared by median, are
  an *anchor*, weaker than a reproduction.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_benchmark_agent.config.gate1 import treatment_variable
from pytest_benchmark_agent.config.metric import MetricSpec
from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.config.placeholders import as_text
from pytest_benchmark_agent.errors import ConfigError
from pytest_benchmark_agent.judge.observations import observations
from pytest_benchmark_agent.records import redact
from pytest_benchmark_agent.records.fingerprint import (
    FingerprintDiff,
    code_label,
    compare_fingerprints,
)
from pytest_benchmark_agent.records.reader import (
    UnreadableRecord,
    load_results,
    load_yaml,
    skip_unreadable,
)
from pytest_benchmark_agent.records.writer import comparison_key, index_entries, index_entry

if TYPE_CHECKING:
    from pytest_benchmark_agent.stats import analysis

#: Tags a run needs to serve as a baseline: an UNRELIABLE run failed a gate. Each CI job is one
#: session, so an EXPLORATORY baseline (never reproduced) is accepted, and noted.
BASELINE_TAGS = ("RELIABLE", "QUALIFIED", "EXPLORATORY")
#: Tags of an earlier run that a new run of the same config may reproduce.
REPRODUCIBLE_TAGS = ("RELIABLE", "QUALIFIED", "EXPLORATORY")
#: States of a finished run (a budget that stopped it still finished it).
FINISHED = ("complete", "halted")
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
        frozen = (load_yaml(frozen_path) or {}) if os.path.lexists(frozen_path) else {}
        if not isinstance(frozen, dict):
            raise UnreadableRecord(frozen_path, "not a mapping of fields")
        return cls(
            run_id=run_dir.name,
            name=results.get("name") or "",
            tag=results.get("tag") or "EXPLORATORY",
            state=results.get("state") or "",
            control=str(results.get("control")),
            treatments=[str(t) for t in results.get("treatments") or []],
            config=frozen.get("config") or {},
            fingerprint=frozen.get("fingerprint") or {},
            trials=list(results.get("trials") or []),
            summary=results.get("summary") or {},
            verdicts=results.get("verdicts") or {},
            caveats=list(results.get("caveats") or []) + flag_texts(results),
            started=results.get("started"),
            ended=results.get("ended"),
            config_hash=results.get("config_hash"),
        )

    @classmethod
    def of_run(cls, run: Any) -> RecordView:
        """A live :class:`~.run.BenchRun` (typed loosely: this module sits below run's users)."""
        return cls(
            run_id=run.run_id,
            name=run.name,
            tag=run.tag,
            state=run.state,
            control=run.control,
            treatments=run.treatment_labels,
            config=run.plan.config.model_dump(mode="json", exclude_none=True),
            fingerprint=run.fingerprint,
            trials=run.trials,
            summary=run.summary,
            verdicts=run.verdicts,
            caveats=run.caveats,
            started=run.started,
            ended=run.ended,
            config_hash=run.config_hash,
        )

    def model(self) -> BenchmarkConfig:
        return BenchmarkConfig.model_validate(self.config)

    def specs(self) -> dict[str, MetricSpec]:
        return self.model().metrics

    def uses_gpu(self) -> bool:
        config = self.model()
        return bool(config.resources.gpus or any(stage.gpus for stage in config.stages))

    @property
    def code(self) -> str:
        """The code this run measured, as a label (``a1b2c3d``, ``content:1f2e3d4``)."""
        return code_label(self.fingerprint.get("code_identity"))


def flag_texts(results: Mapping[str, Any]) -> list[str]:
    """The flags a reclassification of a run this one cited left on its record, as caveats."""
    return [
        f"flagged: it cited {flag.get('run')}, since reclassified {flag.get('to')} "
        f"({flag.get('why')})"
        for flag in results.get("flags") or []
    ]


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
    entries = index_entries(home)
    if exclude is not None:
        entries = [(run_dir, entry) for run_dir, entry in entries if run_dir.name != exclude]
    if ref == "latest":
        pool = [(d, e) for d, e in entries if name is None or e.get("name") == name]
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
        how = f"git revision {commit[:7]}"
        pool = [
            (d, e)
            for d, e in entries
            if (name is None or e.get("name") == name)
            and (e.get("code") or {}).get("commit") == commit
        ]
        clean = [(d, e) for d, e in pool if not (e.get("code") or {}).get("dirty")]
        mine = [e for _, e in entries if name is None or e.get("name") == name]
        dirty = len(pool) - len(clean)
        unknown = sum(1 for e in mine if not (e.get("code") or {}).get("commit"))
        searched = (
            f"`{ref}` is git commit {commit[:7]} (in {repo}), but no finished run of "
            f"{_which(name)} measured it with a clean tree in {runs} ({len(mine)} run(s) "
            f"of it recorded: {len(mine) - len(pool) - unknown} at other commits, "
            f"{dirty} at it with a dirty tree, {unknown} without a recorded commit)"
        )
        return _newest(
            ref,
            clean,
            how,
            key,
            searched,
            "run `pytest --bench` at that commit "
            "first (in CI: on the base branch, keeping or importing its data home), "
            "or name a run id (benchmark-agent history lists them)",
        )
    if len(prefixed) > 1:
        shown = ", ".join(prefixed[:3])
        problem = (
            f"`{ref}` is a prefix of {len(prefixed)} run ids ({shown}, ...) in {runs}; "
            "fix: give more of the id"
        )
    else:
        problem = (
            f"`{ref}` is no run id or unique prefix of one among {len(names)} recorded "
            f"run(s) in {runs}, not `latest`, and no git revision of {repo} ({why}); fix: "
            "give a run id (benchmark-agent history lists them), `latest`, or a commit, "
            "branch or tag of that repository"
        )
    return Resolution(ref, None, "not found", problem)


def _which(name: str | None) -> str:
    return f"benchmark '{name}'" if name is not None else "any benchmark"


def _named(ref: str, run_dir: Path, how: str, strict: bool) -> Resolution:
    """A run named by its id (only its own index entry is read): as a baseline, refused when it
    did not finish or failed a gate."""
    entry = index_entry(run_dir)
    state, tag = (entry or {}).get("state"), (entry or {}).get("tag")
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
    pool: list[tuple[Path, Mapping[str, Any]]],
    how: str,
    key: str | None,
    searched: str,
    fix: str,
) -> Resolution:
    """The newest run of ``pool`` that may be a baseline, one sharing ``key`` first; else a
    Resolution saying what was searched (and what was found but refused) and the fix."""
    usable = [
        (d, e) for d, e in pool if e.get("state") in FINISHED and e.get("tag") in BASELINE_TAGS
    ]
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
    same = [(d, e) for d, e in usable if key is not None and e.get("comparison_key") == key]

    def order(item: tuple[Path, Mapping[str, Any]]) -> tuple[str, str]:
        return item[1].get("ended") or "", item[0].name

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
        view = RecordView.load(resolution.run_dir)
    except UnreadableRecord as error:  # the run goes on, its CI gate unjudged
        return Resolution(ref, None, resolution.how, f"{error}")
    try:
        other = view.model()
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


# -- gate 2 across runs ---------------------------------------------------------------------------


def fingerprint_diff(reference: RecordView, subject: RecordView) -> FingerprintDiff:
    uses_gpu = reference.uses_gpu() or subject.uses_gpu()
    return compare_fingerprints(reference.fingerprint, subject.fingerprint, uses_gpu=uses_gpu)


def blocking_reason(diff: FingerprintDiff) -> str:
    fields = sorted({entry.split(": ", 1)[0] for entry in diff.blocking})
    return "fingerprints differ in fields that matter: " + ", ".join(fields)


def _code_key(identity: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
    """What makes two code identities the same code (a branch name does not)."""
    if not identity:
        return None
    if identity.get("vcs") == "git":
        return (
            "git",
            identity.get("commit"),
            bool(identity.get("dirty")),
            identity.get("diff_hash"),
        )
    return ("content", identity.get("content_hash"))


def code_changed(reference: RecordView, subject: RecordView, diff: FingerprintDiff) -> bool:
    """Whether the two runs measured different code: their code identities differ (for records
    without one, any difference gate 2 files under code)."""
    a = _code_key(reference.fingerprint.get("code_identity"))
    b = _code_key(subject.fingerprint.get("code_identity"))
    if a is not None and b is not None:
        return a != b
    return bool(diff.code)


def sides(reference: RecordView, subject: RecordView) -> str:
    """Both sides of a comparison by their code: ``a1b2c3d -> e4f5a6b``."""
    return f"{reference.code} -> {subject.code}"


def cross_verdicts(
    subject: RecordView, reference: RecordView, specs: Mapping[str, Any], refusal: str | None = None
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Every treatment of ``subject`` against ``reference`` (its same treatment, else its
    control), per metric; all ``not_comparable`` with ``refusal`` when gate 2 refused."""
    from pytest_benchmark_agent.stats import analysis  # numpy: imported only when runs are compared

    against = {
        label: label if label in reference.treatments else reference.control
        for label in subject.treatments
    }
    verdicts: dict[str, dict[str, Any]] = {metric: {} for metric in specs}
    caveats: list[str] = []
    for ref_label in sorted(set(against.values())):
        labels = [label for label, target in against.items() if target == ref_label]
        where = f"{reference.run_id} `{ref_label}`"
        if refusal is not None:
            for metric in specs:
                for label in labels:
                    verdicts[metric][label] = {
                        "verdict": "not_comparable",
                        "reason": refusal,
                        "against": where,
                    }
            continue
        obs_by_metric: dict[str, list[analysis.Observation]] = {}
        for metric in specs:
            theirs, _ = observations(reference.trials, [metric], [], rename={ref_label: _REFERENCE})
            mine, _ = observations(
                subject.trials,
                [metric],
                [],
                rename={label: label for label in labels},
                offset=_OFFSET,
            )
            obs_by_metric[metric] = theirs[metric] + mine[metric]
        result = analysis.analyze_run(obs_by_metric, specs, [_REFERENCE, *labels], _REFERENCE)
        for metric, per in result.verdicts.items():
            for label, verdict in per.items():
                verdicts[metric][label] = {**verdict.to_dict(), "against": where}
        caveats += [c.replace(_REFERENCE, where) for c in result.caveats if _UNPAIRED_NOTE not in c]
    return verdicts, caveats


# -- reproduction ---------------------------------------------------------------------------------


@dataclass
class Reproduction:
    """Whether a run reproduced (or, for a baseline of other treatments, anchored to) another.

    ``problems`` contradict the earlier run (UNRELIABLE), ``caveats`` qualify the agreement,
    ``limits`` say the comparison could not be made (too little data: EXPLORATORY)."""

    run_id: str
    kind: str  # "reproduction" | "anchor"
    lines: list[str]
    problems: list[str]
    tag: str
    caveats: list[str] = field(default_factory=list)
    benign: list[str] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.limits

    def as_record(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "kind": self.kind,
            "ok": self.ok,
            "lines": self.lines,
            "problems": self.problems,
            "tag": self.tag,
            "caveats": self.caveats,
            "benign_differences": self.benign,
            "limits": self.limits,
        }


def reproduction(
    this: RecordView, prior: RecordView, specs: Mapping[str, Any], benign: list[str]
) -> Reproduction:
    """A faithful rerun (same frozen config and code), judged by evidence, not verdict equality.

    It *contradicts* the prior run (UNRELIABLE) only when both are decided in opposite
    directions, or their 95% intervals exclude each other with ratios beyond
    ``reproduce_tolerance``. One decided and one undecided is *inconclusive* (QUALIFIED, both
    MDEs shown): underpowered is not contradictory. Two ``no_change`` reproduce only when both
    show that no effect beyond the noise band is there (:func:`_resolved`; else QUALIFIED: they
    could not have seen the effect). A
    refusal on either side keeps the old rule: the same verdict, or a contradiction. A run of
    one configuration is compared with the prior run instead (:func:`_rerun`)."""
    if not [label for label in this.treatments if label != this.control]:
        return _rerun(this, prior, specs, benign)
    lines, problems, caveats = [], [], _carried(prior)
    decided = ("improved", "regressed")
    for metric in primary_metrics(specs):
        tolerance = specs[metric].reproduce_tolerance
        threshold = specs[metric].noise_threshold
        for label in this.treatments:
            if label == this.control:
                continue
            mine = this.verdicts.get(metric, {}).get(label) or {}
            theirs = prior.verdicts.get(metric, {}).get(label) or {}
            ours, prior_verdict = mine.get("verdict"), theirs.get("verdict")
            line = (
                f"`{metric}` [{label}]: {ours} x{_num(mine.get('ratio'))} "
                f"{_interval(mine.get('ci'))} here, {prior_verdict} "
                f"x{_num(theirs.get('ratio'))} {_interval(theirs.get('ci'))} in {prior.run_id}"
            )
            mdes = f"MDE {_pct(mine.get('mde'))} here, {_pct(theirs.get('mde'))} there"
            apart = (
                mine.get("ci")
                and theirs.get("ci")
                and not _overlap(mine.get("ci"), theirs.get("ci"))
                and not _within(mine.get("ratio"), theirs.get("ratio"), tolerance)
            )
            if "not_comparable" in (ours, prior_verdict) or None in (ours, prior_verdict):
                if ours == prior_verdict:
                    lines.append(f"{line}: reproduced (the same verdict)")
                else:
                    problems.append(line)
                    lines.append(f"{line}: NOT reproduced")
            elif ours in decided and prior_verdict in decided and ours != prior_verdict:
                problems.append(f"{line}: decided in opposite directions")
                lines.append(f"{line}: NOT reproduced (opposite directions)")
            elif apart:
                problems.append(f"{line}: the 95% intervals exclude each other")
                lines.append(f"{line}: NOT reproduced (the intervals exclude each other)")
            elif (ours in decided) != (prior_verdict in decided):
                caveats.append(
                    f"inconclusive against {prior.run_id}: {line}; one run decided and the "
                    f"other did not ({mdes})"
                )
                lines.append(f"{line}: inconclusive (one decided, one not; {mdes})")
            elif ours in decided:
                agree = (
                    "intervals overlap"
                    if _overlap(mine.get("ci"), theirs.get("ci"))
                    else f"ratios within {tolerance:.0%}"
                )
                lines.append(f"{line}: reproduced (the same direction, {agree})")
            elif _resolved(mine, threshold) and _resolved(theirs, threshold):
                lines.append(
                    f"{line}: reproduced (no change; both intervals inside the noise band "
                    f"+-{threshold:.0%}; {mdes})"
                )
            else:
                caveats.append(
                    f"could not have seen the effect: {line}; {mdes}, and the intervals "
                    f"reach beyond the noise band +-{threshold:.0%}"
                )
                lines.append(f"{line}: not shown (no change, but {mdes})")
    return Reproduction(prior.run_id, "reproduction", lines, problems, prior.tag, caveats, benign)


def _resolved(verdict: Mapping[str, Any], threshold: float) -> bool:
    """Whether a ``no_change`` shows that any effect is one that does not matter: its interval
    lies inside the noise band, or its MDE is the band itself (no noise at all). The MDE counts
    the band (an effect is decided only once the interval clears it), so with any noise it is
    above the band, and the evidence of "no effect that matters" is the interval."""
    return _inside(verdict.get("ci"), threshold) or _below(verdict.get("mde"), threshold)


def _below(mde: Any, threshold: float) -> bool:
    """Whether a recorded MDE is at most the noise threshold (an exact comparison has none)."""
    return mde is not None and mde <= threshold + 1e-12


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:.1%}"


def _rerun(
    this: RecordView, prior: RecordView, specs: Mapping[str, Any], benign: list[str]
) -> Reproduction:
    """One configuration, no verdict of its own: it reproduces the prior run when every primary
    metric is ``no_change`` against it with its 95% interval inside ``reproduce_tolerance`` or
    its MDE below the noise threshold (evidence of agreement, not a shared miss: otherwise the
    run could not have seen a difference, QUALIFIED). A change contradicts it; a comparison
    refused for want of data limits it."""
    verdicts, _ = cross_verdicts(this, prior, specs)
    lines, problems, limits, caveats = [], [], [], _carried(prior)
    for metric in primary_metrics(specs):
        tolerance = specs[metric].reproduce_tolerance
        threshold = specs[metric].noise_threshold
        for label, v in verdicts.get(metric, {}).items():
            line = (
                f"`{metric}` [{label}] against {v['against']}: {v['verdict']} "
                f"x{_num(v.get('ratio'))} {_interval(v.get('ci'))}"
            )
            shown = _inside(v.get("ci"), tolerance) or _below(v.get("mde"), threshold)
            if v["verdict"] == "no_change" and not shown:
                caveats.append(
                    f"could not have seen a difference from {prior.run_id}: {line} reaches "
                    f"beyond reproduce_tolerance {tolerance:.0%} and its MDE "
                    f"{_pct(v.get('mde'))} is above the noise threshold {threshold:.0%} "
                    "(add replicates)"
                )
                lines.append(f"{line}: not shown (MDE {_pct(v.get('mde'))})")
            elif v["verdict"] == "no_change":
                lines.append(f"{line}: reproduced (no change, within {tolerance:.0%})")
            elif v["verdict"] == "not_comparable":
                limits.append(f"could not compare with {prior.run_id}: {line} ({v.get('reason')})")
                lines.append(f"{line}: not compared ({v.get('reason')})")
            else:
                problems.append(f"{line}: the same config and code measured differently")
                lines.append(f"{line}: NOT reproduced")
    return Reproduction(
        prior.run_id, "reproduction", lines, problems, prior.tag, caveats, benign, limits
    )


def _inside(ci: Any, tolerance: float) -> bool:
    """Whether a ratio's interval lies within ``1 +- tolerance`` (no interval: an exact
    comparison, whose ``no_change`` is itself exact)."""
    return not ci or (1 - tolerance - 1e-12 <= ci[0] and ci[1] <= 1 + tolerance + 1e-12)


def _overlap(a: Any, b: Any) -> bool:
    return bool(a and b) and a[0] <= b[1] and b[0] <= a[1]


def _interval(ci: Any) -> str:
    return f"[{_num(ci[0])}, {_num(ci[1])}]" if ci else "[-]"


def anchor(
    this: RecordView, baseline: RecordView, specs: Mapping[str, Any], benign: list[str]
) -> Reproduction | None:
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
            line = (
                f"`{metric}` [{label}]: median {_num(mine)} here, {_num(theirs)} in "
                f"{baseline.run_id} (tolerance {tolerance:.0%})"
            )
            if mine is not None and _within(mine, theirs, tolerance):
                lines.append(f"{line}: agrees")
            else:
                lines.append(f"{line}: differs")
                caveats.append(
                    f"the treatments shared with baseline {baseline.run_id} moved: {line}"
                )
    return Reproduction(baseline.run_id, "anchor", lines, [], baseline.tag, caveats, benign)


def _carried(reference: RecordView) -> list[str]:
    """What a QUALIFIED reference passes on to the run that relies on it."""
    if reference.tag != "QUALIFIED":
        return []
    return [
        f"relies on QUALIFIED run {reference.run_id}: "
        + ("; ".join(reference.caveats) or "see its report")
    ]


def _within(a: Any, b: Any, tolerance: float) -> bool:
    if a is None and b is None:
        return True
    if a is None or b is None or b == 0:
        return False
    return abs(a / b - 1) <= tolerance + 1e-12


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.4g}"


def _same_config_runs(
    home: Path, this: RecordView, config_hash: str
) -> tuple[list[tuple[Path, dict[str, Any]]], list[str]]:
    """Earlier finished runs of the same frozen config and code (newest first) with their index
    entries, told apart by those entries; and the code labels of the same-config runs of other
    code."""
    candidates = []
    label = this.code
    commit = (this.fingerprint.get("code_identity") or {}).get("commit")
    other_code: list[str] = []
    for run_dir, entry in index_entries(home):
        if (
            run_dir.name != this.run_id
            and entry.get("name") == this.name
            and entry.get("config_hash") == config_hash
            and entry.get("state") == "complete"
            and entry.get("tag") in REPRODUCIBLE_TAGS
            and (entry.get("ended") or "") < (this.started or "~")
        ):
            code = entry.get("code")
            if code is not None and (code.get("label"), code.get("commit")) != (label, commit):
                other_code.append(str(code.get("label")))
                continue
            candidates.append((entry.get("ended") or "", run_dir, entry))
    newest = sorted(candidates, key=lambda c: (c[0], c[1]), reverse=True)
    return [(run_dir, entry) for _, run_dir, entry in newest], other_code


def find_reproduction_target(
    home: Path, this: RecordView, config_hash: str
) -> tuple[RecordView | None, FingerprintDiff | None, list[str]]:
    """The newest earlier run of the same frozen config and code with a comparable fingerprint:
    a run of other code is no rerun (it is compared as a baseline instead).

    Returns it, its fingerprint differences, and a note per newer same-config run skipped
    because its fingerprint differs where it matters, and one for the runs of other code (told
    apart by their index entries, so they are never opened).
    """
    skipped: list[str] = []
    candidates, other_code = _same_config_runs(home, this, config_hash)
    if other_code:
        skipped.append(
            f"{len(other_code)} earlier run(s) of this frozen config measured other "
            f"code (e.g. {other_code[-1]}; this run {this.code}): a rerun needs the "
            "same code"
        )
    for run_dir, _ in candidates:
        try:
            prior = RecordView.load(run_dir)
        except UnreadableRecord as error:  # an earlier record never breaks a later run
            skip_unreadable(error)
            skipped.append(f"{run_dir.name} (same config) skipped: {error.path} is unreadable")
            continue
        diff = fingerprint_diff(prior, this)
        if code_changed(prior, this, diff):
            skipped.append(
                f"{prior.run_id} (same config) measured other code "
                f"({sides(prior, this)}): not a rerun"
            )
            continue
        if diff.blocking:
            skipped.append(
                f"{prior.run_id} (same config) is not comparable: " + blocking_reason(diff)
            )
            continue
        return prior, diff, skipped
    return None, None, skipped


def _may_oppose(entry: Mapping[str, Any], verdicts: Mapping[str, Any]) -> bool:
    """Whether an index entry's primary verdicts (metric -> label -> verdict) may hold one
    decided opposite to ``verdicts`` (an entry without them may: its record is read)."""
    listed = entry.get("verdicts")
    if not isinstance(listed, dict):
        return True
    flip = {"improved": "regressed", "regressed": "improved"}
    return any(
        isinstance(per := listed.get(metric), dict)
        and per.get(label) == flip.get((mine or {}).get("verdict"))
        for metric, labels in verdicts.items()
        for label, mine in (labels or {}).items()
    )


def opposite_verdicts(
    home: Path, this: RecordView, config_hash: str, specs: Mapping[str, Any]
) -> list[str]:
    """Every primary verdict of ``this`` decided opposite to the same verdict of ANY earlier
    faithful run (same frozen config and code, comparable fingerprint), naming that run: a
    contradiction with one run is not undone by a later run that happened to agree (issue 35:
    regressed, then no_change, then improved must not pass as inconclusive)."""
    decided = ("improved", "regressed")
    found = []
    for run_dir, entry in _same_config_runs(home, this, config_hash)[0]:
        if not _may_oppose(entry, this.verdicts):
            continue  # its index entry shows no decided verdict opposite to ours: never opened
        try:
            prior = RecordView.load(run_dir)
        except UnreadableRecord as error:
            skip_unreadable(error)
            continue
        diff = fingerprint_diff(prior, this)
        if code_changed(prior, this, diff) or diff.blocking:
            continue
        for metric in primary_metrics(specs):
            for label, mine in (this.verdicts.get(metric) or {}).items():
                theirs = (prior.verdicts.get(metric) or {}).get(label) or {}
                ours, their_verdict = mine.get("verdict"), theirs.get("verdict")
                if ours in decided and their_verdict in decided and ours != their_verdict:
                    found.append(
                        f"contradicts {prior.run_id}: `{metric}` [{label}] {ours} "
                        f"x{_num(mine.get('ratio'))} {_interval(mine.get('ci'))} here, "
                        f"{their_verdict} x{_num(theirs.get('ratio'))} "
                        f"{_interval(theirs.get('ci'))} in {prior.run_id} (the same config "
                        "and code, decided in opposite directions)"
                    )
    return found
