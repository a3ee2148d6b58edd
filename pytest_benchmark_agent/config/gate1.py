"""Gate 1, parameter identity: what makes a comparison unfair or a file unrunnable, found before
any trial runs. Every problem becomes one ``(field, message, fix)`` line of a ConfigError.

Checked here: at most one varying parameter: none (a file of one configuration, see
:func:`one_configuration`) or one that is declared, with two or more treatments; stage names,
commands and the ``needs`` DAG (unknown names and cycles, shown as a path); every placeholder
resolves; artifacts are produced by a stage the user needs; every measure stage declares a
metric and every metric is declared with its direction; declared inputs exist; every param of
the recipe's or domain's provenance manifest is declared (with why it is required, its default,
and the value of the latest RELIABLE run when there is one), and a ``must_match`` manifest param
(``eval_suite``) is never what varies; every name that becomes a path stays inside the data home
(the benchmark's name bounded to one line, stage and artifact names plain folder names,
``metrics_from.file`` relative without ``..``), and a secret param (``util/redact.py``) never
varies, since its values would label every trial. A stage's ``counters:`` need a counting
backend on this machine (engine/counters.py), and a timing they distort is never declared as a
metric only counted stages report; both are asked of the machine, so the engine's preflight
checks them and passes its problems in. The stages' own checks (names, the DAG, placeholders,
inputs) are config/stage_checks.py's; the manifest's, config/manifest.py's.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable
from pathlib import Path

from pytest_benchmark_agent.config.as_recorded import (
    METRIC_NAME,
    command_size_problems,
    param_value_problems,
)
from pytest_benchmark_agent.config.manifest import LatestReliable, manifest_problems
from pytest_benchmark_agent.config.metric import BUILTIN_METRICS, COUNTERS
from pytest_benchmark_agent.config.models import (
    BenchmarkConfig,
    one_configuration,
    treatment_values,
    treatment_variable,
)
from pytest_benchmark_agent.config.recipe import placeholder_problems
from pytest_benchmark_agent.config.stage import Stage
from pytest_benchmark_agent.config.stage_checks import (
    input_problems,
    placeholder_resolution_problems,
    stage_names,
    stage_problems,
)
from pytest_benchmark_agent.errors import ConfigError, Problem
from pytest_benchmark_agent.util.placeholders import as_text, names_in
from pytest_benchmark_agent.util.redact import secret_params
from pytest_benchmark_agent.util.safetext import NAME_MAX, one_line, simple_name_problem

#: What asking this machine finds wrong with a file (the engine's preflight: is there a counting
#: backend); gate 1 reports it with its own problems, in one ConfigError.
MachineCheck = Callable[[BenchmarkConfig], list[Problem]]


def check(
    config: BenchmarkConfig,
    path: Path,
    *,
    tuning: bool = False,
    latest: LatestReliable | None = None,
    machine: MachineCheck | None = None,
    revisions: bool = False,
) -> None:
    """Raise ConfigError with every gate-1 problem of ``config`` (read from ``path``); warn
    (:class:`UndecidableReplicatesWarning`) when its replicates can never decide a verdict.

    Gate 1 reads neither records nor the machine; its caller passes what they say: ``latest``
    gives a missing manifest param's suggested value (what the latest RELIABLE run used),
    ``machine`` the problems only this machine shows (engine/preflight.py's ``gate_one``).
    ``revisions`` (``--bench-against``): each treatment, or the one configuration, is compared
    with itself under REV, so a range of replicates has verdicts to wait for in every shape.
    """
    problems: list[Problem] = []
    problems += _check_treatments(config, tuning, revisions)
    problems += manifest_problems(config, latest)
    problems += placeholder_problems(config)
    problems += _check_secrets(config)
    problems += _check_names(config)
    problems += param_value_problems(config)
    problems += command_size_problems(config)
    structure = stage_problems(config)
    problems += structure
    if not structure:  # placeholders need a sound DAG to know which artifacts are reachable
        problems += placeholder_resolution_problems(config)
        problems += _check_metrics(config)
        problems += machine(config) if machine else []
        problems += input_problems(config, path.parent)
    if problems:
        raise ConfigError(path, problems)
    if not tuning and (why := replicates_cannot_decide(config, revisions)):  # tuner: its own
        warnings.warn(UndecidableReplicatesWarning(f"{path}: {why}"), stacklevel=2)


#: The family-wise error rate of gate 2's verdicts (stats/analysis.py's default alpha).
ALPHA = 0.05


class UndecidableReplicatesWarning(UserWarning):
    """A count of replicates (or seeds) with which no verdict of the run can be decided: it
    runs, and its verdicts say "could never decide" (an EXPLORATORY run, an unjudged CI gate)."""


def replicates_cannot_decide(config: BenchmarkConfig, revisions: bool = False) -> str | None:
    """Why the planned blocks (or seeds) can never decide a timing's verdict, with the
    arithmetic and the count that could; None when they can (docs/benchmark/STATISTICS.md).

    With n units a test that respects them has at most 2^n equally likely label patterns, so
    its smallest two-sided p is 2 / 2^n; Holm's first step over m comparisons (metrics compared
    x treatments other than the control) needs p <= alpha / m. Counted metrics (``counters:``)
    are judged by a parametric rule without that floor and are left out. A count below every
    such metric's ``min_replicates`` is a smoke run that refuses to compare anyway (its
    verdicts say so), and one configuration compares nothing: both are left alone.
    ``revisions`` (``--bench-against``): each treatment (or the one configuration) is compared
    once, under the working tree against under REV.
    """
    if one_configuration(config) and not revisions:
        return None
    counted = {name for stage in config.stages for name in stage.counters}
    family = [m for m in config.metrics.values() if m.direction != "equal"]
    ranked = [
        m for name, m in config.metrics.items() if m.direction != "equal" and name not in counted
    ]
    if revisions:
        others = 1 if one_configuration(config) else len(treatment_values(config))
    else:
        others = len(treatment_values(config)) - 1
    what = "seeds" if config.seeds is not None else "blocks"
    units = len(config.seeds) if config.seeds is not None else config.max_replicates
    if not ranked or others < 1 or units < min(m.min_replicates for m in ranked):
        return None
    comparisons = len(family) * others
    level = ALPHA / comparisons
    need = 1
    while 2 / 2**need > level:
        need += 1
    if units >= need:
        return None
    field = (
        "seeds"
        if config.seeds is not None
        else ("replicates" if isinstance(config.replicates, int) else "replicates.max")
    )
    fix = (
        f"list at least {need} seeds"
        if config.seeds is not None
        else f"replicates: {need} (or replicates: {{min: {need}, max: {need * 2}}} to stop early "
        "on a clear effect)"
    )
    return (
        f"{field}: {units} {what} can never decide a timing's verdict: an exact paired test's "
        f"smallest two-sided p at {units} {what} is 2/2^{units} = {2 / 2**units:.4g}, above the "
        f"{ALPHA:g}/{comparisons} = {level:.4g} that Holm's first step needs over {comparisons} "
        f"comparison(s) ({len(family)} metric(s) x {others} treatment(s) against "
        f"{'itself under REV' if revisions else 'the control'}). "
        f"The run goes ahead: its verdicts will say 'could never decide', it will be "
        f"EXPLORATORY and its CI gate unjudged unless an interval lies wholly beyond "
        f"fail_threshold (--bench-fail-on=unjudged fails it). To decide, "
        f"use {fix}, compare fewer metrics or treatments, or count instructions "
        "(counters: [instructions] decide from 3 blocks; docs/benchmark/STATISTICS.md)."
    )


def _check_treatments(config: BenchmarkConfig, tuning: bool, revisions: bool) -> list[Problem]:
    """At most one parameter varies: none (one configuration), a tuned search space, or one
    named, declared param taking two or more distinct treatments, the first its control."""
    if config.search_space is not None:
        return _check_search_space(config, tuning)
    if one_configuration(config):
        return _check_one_configuration(config, revisions)
    varying = _varying_params(config)
    if len(varying) > 1:
        return [
            (
                "treatment_variable",
                f"more than one parameter varies ({', '.join(varying)}): "
                "a difference could not be attributed to one of them.",
                "vary exactly one parameter and keep the others as controls under params: "
                "(run a second benchmark for the next one).",
            )
        ]
    name = treatment_variable(config)
    if name is None:
        return [
            (
                "treatment_variable",
                "is missing: treatments lists values but no param is named to take them.",
                "name the ONE parameter that varies, e.g. "
                "treatment_variable: fts.merge; or, to measure one configuration, remove "
                "treatments:.",
            )
        ]
    return (
        _check_declared(config, name)
        + _check_values(config, name)
        + _check_control(config, name)
        + _check_seeds(config)
    )


def _check_search_space(config: BenchmarkConfig, tuning: bool) -> list[Problem]:
    """A search space is run by the tuner only, and every dimension is a declared param."""
    if not tuning:
        return [
            (
                "search_space",
                "makes this a tuning file, which runs rounds of trials.",
                "run it with --bench-tune=grid|refine|coordinate (or benchmark-agent tune).",
            )
        ]
    return [
        (
            f"search_space.{name}",
            "is tuned but not declared under params.",
            "declare it under params: with its starting value (the first incumbent).",
        )
        for name in config.search_space or {}
        if name not in config.params
    ]


def _check_declared(config: BenchmarkConfig, name: str) -> list[Problem]:
    """The treatment variable ``name`` is a declared param."""
    if name in config.params:
        return []
    close = difflib.get_close_matches(name, list(config.params), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return [
        (
            "treatment_variable",
            f"'{name}' is not a declared param{hint}.",
            f"declare it under params: with the control's value, e.g. "
            f"{name}: {as_text(treatment_values(config)[:1] or ['VALUE'][0])}.",
        )
    ]


def _check_values(config: BenchmarkConfig, name: str) -> list[Problem]:
    """The treatments of ``name``: at least two, each once."""
    problems: list[Problem] = []
    values = treatment_values(config)
    texts = [as_text(v) for v in values]
    if len(values) < 2:
        what = (
            f"is missing: treatment_variable names '{name}' but gives it no values"
            if config.treatments is None
            else f"lists {len(values)} value(s) of '{name}'"
        )
        problems.append(
            (
                "treatments",
                f"{what}: half a comparison, a control with nothing to compare it with.",
                "list the control first, then at least one "
                "treatment; or, to measure one configuration, remove "
                "treatment_variable: and treatments: (its value stays under params:).",
            )
        )
    duplicates = sorted({t for t in texts if texts.count(t) > 1})
    if duplicates:
        problems.append(("treatments", f"repeats {duplicates}.", "list each value once."))
    return problems


def _check_control(config: BenchmarkConfig, name: str) -> list[Problem]:
    """A declared treatment variable's value is the control (the first treatment), and some
    stage uses it."""
    if name not in config.params:
        return []
    problems: list[Problem] = []
    values = treatment_values(config)
    if values and as_text(config.params[name]) != as_text(values[0]):
        problems.append(
            (
                f"params.{name}",
                f"is {as_text(config.params[name])!r} but the control "
                f"(the first treatment) is {as_text(values[0])!r}.",
                "make the declared value the control, or put it first in treatments.",
            )
        )
    used = {n for stage in config.stages for n in stage_names(stage)}
    if config.stages and name not in used:
        problems.append(
            (
                "treatment_variable",
                f"'{name}' is used by no stage, so the treatments cannot differ.",
                f"pass {{{name}}} to the stage it should change.",
            )
        )
    return problems


def _check_one_configuration(config: BenchmarkConfig, revisions: bool) -> list[Problem]:
    """A file of one configuration: nothing varies, so nothing is decided inside the run, and
    sequential replication (which adds blocks until the in-run verdicts are decided) has
    nothing to wait for, unless ``--bench-against`` compares it with itself under REV."""
    problems = _check_seeds(config)
    if not isinstance(config.replicates, int) and not revisions:  # a {min, max} range
        problems.append(
            (
                "replicates",
                "is a range, which adds blocks until every in-run verdict "
                "is decided; a file of one configuration (no treatment_variable) has "
                "no in-run verdict.",
                f"give a number, e.g. replicates: "
                f"{config.replicates.max}; or name a treatment_variable and its "
                "treatments to compare; or compare revisions (--bench-against REV), where a "
                "range adds blocks until the CI gate can decide.",
            )
        )
    return problems


def _check_secrets(config: BenchmarkConfig) -> list[Problem]:
    """A secret param is written ``<redacted>`` everywhere, so it can be no treatment's label."""
    varying = {treatment_variable(config), *(config.search_space or {})}
    return [
        (
            f"params.{name}",
            "is a secret (its name, or secret: true in manifest:), so it cannot be what varies: "
            "its values would label every trial, and are written <redacted>.",
            "vary a param that is not secret (or rename it if it is no secret).",
        )
        for name in secret_params(config)
        if name in varying
    ]


def _check_names(config: BenchmarkConfig) -> list[Problem]:
    """Names that become folder and file names inside the data home: nothing outside it."""
    problems: list[Problem] = []
    if not _bounded_line(config.name):
        problems.append(
            (
                "name",
                f"{one_line(config.name, 60)!r} must be one line of 1 to {NAME_MAX} characters "
                f"({_why_not_a_line(config.name)}; it names the runs' folders).",
                "give a short name, e.g. name: fts5-merge.",
            )
        )
    for metric in config.metrics:
        if _bounded_line(metric) and not METRIC_NAME.fullmatch(metric):
            problems.append(
                (
                    f"metrics.{metric}",
                    "the metrics parser cannot read this name: a metric line is name=value "
                    "with a name of letters, digits and _ . @ - /, starting with a letter or _.",
                    "rename the metric (and what the stage prints), e.g. score.",
                )
            )
        if not _bounded_line(metric):
            problems.append(
                (
                    f"metrics.{one_line(metric, 60)}",
                    f"a metric's name must be one line of 1 to {NAME_MAX} characters (it is "
                    f"{len(metric)}; it names its plot's file).",
                    "give it a short name, e.g. p50_ms.",
                )
            )
    for index, stage in enumerate(config.stages):
        field = f"stages[{index}] ({one_line(stage.name, 60)})"
        problem = simple_name_problem(stage.name)
        if problem:
            problems.append((f"{field}.name", f"{problem}.", "rename the stage, e.g. build_index."))
        for artifact in stage.produces:
            problem = simple_name_problem(artifact)
            if problem:
                problems.append(
                    (
                        f"{field}.produces",
                        f"{one_line(artifact, 60)!r} {problem}.",
                        "name the artifact, e.g. index_db; the engine gives it a path in the "
                        "prep's cache folder ({index_db} in commands).",
                    )
                )
        source = stage.metrics_from.file if stage.metrics_from else None
        if source is not None:
            problems += _check_metrics_file(config, stage, field, source)
    return problems


def _bounded_line(text: str) -> bool:
    return 0 < len(text) <= NAME_MAX and one_line(text) == text


def _why_not_a_line(text: str) -> str:
    """Why ``text`` is no bounded line: its length, else the characters it may not hold."""
    if not 0 < len(text) <= NAME_MAX:
        return f"it is {len(text)}"
    bad = sorted({char for char in text if one_line(char) != char})
    return "it holds " + ", ".join(one_line(repr(char)) for char in bad)


def _check_metrics_file(
    config: BenchmarkConfig, stage: Stage, field: str, source: str
) -> list[Problem]:
    """``metrics_from.file`` is read from the stage's folders: its working folder (a relative
    path), its scratch folder ``{out}`` or an artifact it needs, and never through ``..``, nor
    through a param whose value (declared, or a treatment's) holds a ``/`` or is ``..``."""
    parts = source.replace("\\", "/").split("/")
    first = names_in(parts[0])
    artifacts = {a for s in config.stages for a in s.produces}
    values = {name: [value] for name, value in config.params.items()}
    values.setdefault(str(treatment_variable(config)), []).extend(treatment_values(config))
    escaping = [
        f"{{{name}}} ({as_text(value)!r})"
        for name in names_in(source)
        for value in values.get(name, [])
        if "/" in as_text(value).replace("\\", "/") or as_text(value) in (".", "..")
    ]
    if source.startswith(("/", "~")) or ".." in parts:
        why = "is absolute" if source.startswith(("/", "~")) else "climbs out through .."
    elif parts[0].startswith("{") and not (
        first and parts[0] == f"{{{first[0]}}}" and first[0] in artifacts | {"out"}
    ):
        why = "starts with a placeholder that is not {out} or an artifact"
    elif escaping:
        why = f"takes a path from {one_line(escaping[0], 80)}"
    else:
        return []
    return [
        (
            f"{field}.metrics_from.file",
            f"{one_line(source, 80)!r} {why}: a stage's metrics are read from its own "
            "folders only.",
            "give a path relative to the stage's folder (metrics.json), or one under its "
            "scratch folder ({out}/metrics.json).",
        )
    ]


def _check_seeds(config: BenchmarkConfig) -> list[Problem]:
    if config.seeds is not None and len(set(config.seeds)) != len(config.seeds):
        return [("seeds", "repeats a seed.", "list each seed once.")]
    return []


def _varying_params(config: BenchmarkConfig) -> list[str]:
    tv = config.treatment_variable
    names = list(tv) if isinstance(tv, list) else ([tv] if tv else [])
    for entry in config.treatments or []:
        if isinstance(entry, dict):
            names += [key for key in entry if key not in names]
    return names


def _check_metrics(config: BenchmarkConfig) -> list[Problem]:
    problems: list[Problem] = []
    reported: dict[str, str] = {}
    for stage in config.stages:
        if stage.kind != "measure":
            continue
        read = stage.metrics_from.fields if stage.metrics_from else []
        for name in [*read, *(c for c in stage.counters if c not in read)]:
            if name in reported and reported[name] != stage.name:
                problems.append(
                    (
                        f"stages ({stage.name}).metrics_from.fields",
                        f"'{name}' is also reported by '{reported[name]}'.",
                        "name each metric once.",
                    )
                )
            reported.setdefault(name, stage.name)
            if name not in config.metrics and name not in BUILTIN_METRICS + COUNTERS:
                problems.append(
                    (
                        f"stages ({stage.name}).metrics_from.fields",
                        f"metric '{name}' "
                        "is read but not declared under metrics:, so its better direction "
                        "is unknown.",
                        f"add `{name}: {{direction: lower|higher|equal}}` under metrics:.",
                    )
                )
    for name, spec in config.metrics.items():
        if name not in reported and name not in BUILTIN_METRICS:
            problems.append(
                (
                    f"metrics.{name}",
                    "is declared but no measure stage reports it.",
                    "add it to a measure stage's metrics_from.fields, or remove it.",
                )
            )
        if spec.direction == "equal" and (spec.floor is not None or spec.ceiling is not None):
            problems.append(
                (
                    f"metrics.{name}",
                    "direction: equal takes no floor or ceiling.",
                    "drop floor/ceiling, or use direction: lower|higher.",
                )
            )
    return problems
