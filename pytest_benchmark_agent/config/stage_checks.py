"""Gate 1's checks of the stages: unique names, commands, the ``needs`` DAG (unknown names and
cycles, shown as a path), measure stages declaring their metrics, unique artifacts, every
placeholder resolving to a param, an artifact of a needed stage or a reserved name, and
declared inputs existing. Each problem is a ``(field, message, fix)`` line of gate 1's
ConfigError (config/gate1.py).
"""

from __future__ import annotations

import difflib
from pathlib import Path

from pytest_benchmark_agent.config.models import (
    BenchmarkConfig,
)
from pytest_benchmark_agent.config.stage import Stage
from pytest_benchmark_agent.errors import Problem
from pytest_benchmark_agent.util.placeholders import names_in


def stage_problems(config: BenchmarkConfig) -> list[Problem]:
    """The stages' structure: unique names, commands, needs, declared metrics, a measure stage
    and no cycle in ``needs``."""
    if not config.stages:
        return [("stages", "is empty.", "add at least one measure stage.")]
    problems: list[Problem] = []
    names = [stage.name for stage in config.stages]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(
            (f"stages ({dup})", "two stages share this name.", "give every stage a unique name.")
        )
    by_name = {stage.name: stage for stage in config.stages}
    for index, stage in enumerate(config.stages):
        field = f"stages[{index}] ({stage.name})"
        if config.domain == "command" and not (stage.cmd or "").strip():
            problems.append(
                (
                    f"{field}.cmd",
                    "is missing: a command-domain stage runs a command.",
                    'add cmd: "..." (the shell command of this stage).',
                )
            )
        problems += _check_needs(stage, field, by_name, names)
        problems += _check_metrics_declared(stage, field)
    if not any(stage.kind == "measure" for stage in config.stages):
        problems.append(
            (
                "stages",
                "has no measure stage, so nothing would be measured.",
                "add a stage with kind: measure.",
            )
        )
    cycle = _find_cycle(config.stages)
    if cycle:
        problems.append(
            (
                "stages.needs",
                f"form a cycle: {' -> '.join(cycle)}.",
                "remove one of these needs so the stages form a DAG.",
            )
        )
    return problems


def _check_needs(
    stage: Stage, field: str, by_name: dict[str, Stage], names: list[str]
) -> list[Problem]:
    """Each need names a known stage; a prep never needs a measure stage (measure stages are
    never cached), and a measure stage needs no other one (a trial measures one stage)."""
    problems: list[Problem] = []
    for need in stage.needs:
        if need not in by_name:
            close = difflib.get_close_matches(need, names, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            problems.append(
                (
                    f"{field}.needs",
                    f"names unknown stage '{need}'{hint}.",
                    f"needs may name: {', '.join(names)}.",
                )
            )
        elif stage.kind == "prep" and by_name[need].kind == "measure":
            problems.append(
                (
                    f"{field}.needs",
                    f"a prep cannot need the measure stage '{need}' "
                    "(measure stages are never cached).",
                    "make the needed stage a prep, or drop the need.",
                )
            )
        elif stage.kind == "measure" and by_name[need].kind == "measure":
            problems.append(
                (
                    f"{field}.needs",
                    f"needs the measure stage '{need}': a trial measures one stage.",
                    "make the needed stage a prep.",
                )
            )
    return problems


def _check_metrics_declared(stage: Stage, field: str) -> list[Problem]:
    """A measure stage declares the metrics it reports; a prep, cached, reports none."""
    declared = stage.counters or (stage.metrics_from is not None and stage.metrics_from.fields)
    if stage.kind == "measure" and not declared:
        return [
            (
                f"{field}.metrics_from",
                "a measure stage must declare the metrics it reports.",
                "add metrics_from: {stdout: true, fields: [p50_ms]} (or "
                "fields from the built-ins wall_s, cpu_s, peak_rss_mb).",
            )
        ]
    if stage.kind == "prep" and stage.metrics_from is not None:
        return [
            (
                f"{field}.metrics_from",
                "a prep stage is cached, so its metrics would be read once and reused.",
                "measure in a measure stage.",
            )
        ]
    return []


def _find_cycle(stages: list[Stage]) -> list[str] | None:
    graph = {stage.name: [n for n in stage.needs] for stage in stages}
    state: dict[str, int] = {}  # 1 visiting, 2 done
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for need in graph.get(name, []):
            if need not in graph:
                continue
            if state.get(need) == 1:
                return path[path.index(need) :] + [need]
            if need not in state:
                found = visit(need)
                if found:
                    return found
        path.pop()
        state[name] = 2
        return None

    for name in graph:
        if name not in state:
            found = visit(name)
            if found:
                return found
    return None


def needs_closure(stage: Stage, by_name: dict[str, Stage]) -> list[Stage]:
    """Every stage ``stage`` depends on, dependencies first (the DAG is known to be acyclic)."""
    ordered: list[Stage] = []

    def visit(current: Stage) -> None:
        for need in current.needs:
            dep = by_name[need]
            if dep not in ordered:
                visit(dep)
                ordered.append(dep)

    visit(stage)
    return ordered


def _stage_templates(stage: Stage) -> list[tuple[str, str]]:
    """(field, template) pairs of a stage that may hold placeholders."""
    pairs = [("cmd", stage.cmd or "")]
    if stage.setup is not None:
        pairs.append(("setup", stage.setup))
    pairs += [(f"inputs[{i}]", text) for i, text in enumerate(stage.inputs)]
    pairs += [(f"env.{key}", text) for key, text in stage.env.items()]
    if stage.wdir:
        pairs.append(("wdir", stage.wdir))
    if stage.metrics_from and stage.metrics_from.file:
        pairs.append(("metrics_from.file", stage.metrics_from.file))
    return pairs


def _checkout_outside_commands(stage: Stage, index: int, field: str) -> Problem:
    """``{checkout}`` (the root of the checkout the stage's code comes from) is known when the
    stage runs: in its command and environment only."""
    return (
        f"stages[{index}] ({stage.name}).{field}",
        "uses {checkout}, which only a stage's cmd and env may use.",
        "give the path relative to the stage's folder, or read $BENCH_CHECKOUT in the command.",
    )


def _run_time_path_outside_commands(stage: Stage, index: int, field: str, name: str) -> Problem:
    """``{out}`` and artifact paths exist once the stage runs, while its ``wdir`` and ``inputs``
    are read when the session is planned (the trial's folder, the code's fingerprint)."""
    what = "{out}, the trial's own folder," if name == "out" else f"{{{name}}}, an artifact,"
    return (
        f"stages[{index}] ({stage.name}).{field}",
        f"uses {what} which exists only once the stage runs; wdir and inputs are read "
        "before, so they may use params and {seed} only.",
        f"use {{{name}}} in the stage's cmd instead (e.g. `cd {{{name}}} && ...`).",
    )


def stage_names(stage: Stage) -> set[str]:
    """The placeholder names a stage uses, in any of its templates."""
    return {name for _, text in _stage_templates(stage) for name in names_in(text)}


def placeholder_resolution_problems(config: BenchmarkConfig) -> list[Problem]:
    """Artifacts named once and apart from params; every placeholder of a stage resolves (the
    ``needs`` DAG is known to be sound)."""
    problems, producers = _check_artifacts(config)
    by_name = {stage.name: stage for stage in config.stages}
    for index, stage in enumerate(config.stages):
        reachable = {a for dep in needs_closure(stage, by_name) for a in dep.produces}
        known = set(config.params) | set(stage.produces) | reachable | {"out"}
        if config.seeds is not None:
            known.add("seed")
        for field, text in _stage_templates(stage):
            for name in names_in(text):
                if name == "checkout" and name not in config.params:
                    if not (field == "cmd" or field.startswith("env.")):
                        problems.append(_checkout_outside_commands(stage, index, field))
                    continue
                if (
                    (field == "wdir" or field.startswith("inputs["))
                    and (name == "out" or name in producers)
                    and name not in config.params
                ):
                    problems.append(_run_time_path_outside_commands(stage, index, field, name))
                    continue
                if (
                    name in known
                    or name in config.manifest
                    or (name == "seed" and "seeds" in config.manifest)
                ):  # explained there
                    continue
                where = f"stages[{index}] ({stage.name}).{field}"
                problems.append(_unresolved(name, where, producers, known))
    return problems


def _check_artifacts(config: BenchmarkConfig) -> tuple[list[Problem], dict[str, str]]:
    """The problems of artifact names (produced twice, or a param's or reserved name) and
    which stage produces each artifact."""
    problems: list[Problem] = []
    producers: dict[str, str] = {}
    for stage in config.stages:
        for artifact in stage.produces:
            if artifact in producers:
                problems.append(
                    (
                        f"stages ({stage.name}).produces",
                        f"'{artifact}' is also produced by '{producers[artifact]}'.",
                        "name artifacts uniquely.",
                    )
                )
            elif artifact in config.params or artifact in ("out", "seed", "checkout"):
                problems.append(
                    (
                        f"stages ({stage.name}).produces",
                        f"'{artifact}' is also a param or a reserved name (out, seed, checkout).",
                        "rename the artifact.",
                    )
                )
            producers.setdefault(artifact, stage.name)
    return problems, producers


def _unresolved(name: str, where: str, producers: dict[str, str], known: set[str]) -> Problem:
    """Why placeholder ``{name}`` at ``where`` resolves to nothing: an artifact of a stage not
    needed, ``{seed}`` without seeds, or an unknown name (with the closest known one)."""
    if name in producers:
        return (
            where,
            f"uses artifact {{{name}}} of stage '{producers[name]}', which this stage does "
            "not need.",
            f"add '{producers[name]}' to needs.",
        )
    if name == "seed":
        return (
            where,
            "uses {seed} but the file declares no seeds.",
            "add seeds: [1, 2, 3] or drop {seed}.",
        )
    close = difflib.get_close_matches(name, sorted(known), n=1)
    hint = f" (did you mean '{{{close[0]}}}'?)" if close else ""
    return (
        where,
        f"unknown placeholder {{{name}}}{hint}.",
        "declare it under params:, produce it in a needed stage, or "
        "write literal braces as {{ and }}.",
    )


def input_problems(config: BenchmarkConfig, folder: Path) -> list[Problem]:
    """Every declared input without a placeholder exists, relative to the file's folder."""
    problems: list[Problem] = []
    for stage in config.stages:
        base = folder / stage.wdir if stage.wdir and not names_in(stage.wdir) else folder
        for index, text in enumerate(stage.inputs):
            if names_in(text):
                continue  # resolved per binding, checked when the plan is built
            if not (base / text).exists():
                problems.append(
                    (
                        f"stages ({stage.name}).inputs[{index}]",
                        f"'{text}' does not exist (looked at {base / text}).",
                        "fix the path (relative to the benchmark file's folder).",
                    )
                )
    return problems
