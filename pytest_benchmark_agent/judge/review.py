"""What ``benchmark-agent plan`` judges before anything runs: the request against what is known.

Gate 1 and preflight are the engine's (``pytest --bench --collect-only``); this module adds what
needs the records: the comparison matrix against the latest RELIABLE run of the same benchmark
(every param: the baseline's value, this request's value, TREATMENT or CONTROL), the lessons and
risks that apply, and the challenges: a control changed relative to that baseline, a treatment
variable that is not the baseline's, or a param set against a lesson's recommended value. Each
challenge names its risk and the aligned alternative.

A challenge is either followed or deviated from knowingly: ``--accept-deviation REASON`` writes
``deviations/<name>.yaml``; a run of that benchmark whose values match the accepted request gets
the caveat "comparability limited: ..." in its record at run start (see ``heartbeat.py``), which
the tagging reads.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.config.safe_yaml import parse_value, read_input
from pytest_benchmark_agent.errors import ConfigError
from pytest_benchmark_agent.records.frozen import thaw
from pytest_benchmark_agent.records.lessons import Note, notes_for
from pytest_benchmark_agent.records.reader import UnreadableRecord, load_yaml, skip_unreadable
from pytest_benchmark_agent.records.record import RunRecord, load_run
from pytest_benchmark_agent.records.store import DEVIATIONS, runs_in
from pytest_benchmark_agent.records.writer import dump_yaml
from pytest_benchmark_agent.util import redact
from pytest_benchmark_agent.util.fsutil import atomic_write, utc_now
from pytest_benchmark_agent.util.placeholders import as_text

_MISSING = "(not declared)"
_CELL = 36


@dataclass(frozen=True)
class Baseline:
    """The latest RELIABLE run of a benchmark, as far as planning needs it."""

    run_id: str
    params: dict[str, Any]
    variables: list[str]
    treatments: list[Any]


@dataclass(frozen=True)
class Row:
    param: str
    baseline: str
    this: str
    role: str  # TREATMENT | CONTROL
    changed: bool


@dataclass(frozen=True)
class Challenge:
    """A part of the request that breaks comparability or a lesson, with what to do instead."""

    what: str
    risk: str
    alternative: str
    #: The request's values this challenge is about (what an accepted deviation is matched on).
    request: dict[str, str]


@dataclass
class Review:
    """Everything ``plan`` prints after gate 1 passed, for one benchmark file."""

    config: BenchmarkConfig
    baseline: Baseline | None
    rows: list[Row]
    lessons: list[Note]
    risks: list[Note]
    challenges: list[Challenge] = field(default_factory=list)

    def lines(self, home: Path) -> list[str]:
        name = self.config.name
        if self.baseline is None:
            out = [
                f"{name}: no RELIABLE run of '{name}' in {home / 'runs'} to compare with; this "
                "run will be a first, EXPLORATORY record."
            ]
        else:
            out = [f"{name}: comparison with baseline {self.baseline.run_id} (RELIABLE):"]
        out += _table(
            ["param", "baseline", "this", "role"],
            [
                [r.param, r.baseline, r.this, r.role + (" (changed)" if r.changed else "")]
                for r in self.rows
            ],
        )
        for label, notes, file in (
            ("lessons", self.lessons, "lessons.md"),
            ("risks", self.risks, "risks.md"),
        ):
            if notes:
                out.append(f"{label} that apply (from {home / file}):")
                out += [f"  - {note.summary()}" for note in notes]
            else:
                out.append(f"no {label} in {home / file} apply to '{name}'.")
        for number, challenge in enumerate(self.challenges, 1):
            out += [
                f"CHALLENGE {number}: {challenge.what}",
                f"  risk: {challenge.risk}",
                f"  aligned alternative: {challenge.alternative}",
            ]
        return out


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    cells = [[_clip(c) for c in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [
        "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]


def _clip(text: str) -> str:
    return text if len(text) <= _CELL else text[: _CELL - 3] + "..."


def variables_of(config: BenchmarkConfig) -> list[str]:
    """The params that vary: the treatment variable, or a tuning file's search space."""
    if isinstance(config.treatment_variable, str):
        return [config.treatment_variable]
    if config.treatment_variable:
        return list(config.treatment_variable)
    return list(config.search_space or {})


def _latest_reliable_run(home: Path, name: str) -> tuple[str, RunRecord] | None:
    """(folder name, record) of the newest run of benchmark ``name`` tagged RELIABLE, each run
    read with :func:`.record.load_run`; an unreadable record is skipped with a warning naming
    it."""
    for run_dir in reversed(runs_in(home)):
        try:
            run = load_run(run_dir)
        except UnreadableRecord as error:
            skip_unreadable(error)
            continue
        if run.name == name and run.tag == "RELIABLE":
            return run_dir.name, run
    return None


def _baseline(run_id: str, run: RunRecord) -> Baseline:
    """The baseline ``run`` is: its frozen config's params, variables and treatments."""
    frozen = run.config
    variable = thaw(frozen.get("treatment_variable")) or run.treatment_variable
    return Baseline(
        run_id=run_id,
        params=thaw(frozen.get("params") or {}),
        variables=[variable] if isinstance(variable, str) else list(variable or []),
        treatments=thaw(frozen.get("treatments")) or list(run.treatments),
    )


def latest_reliable(home: Path, name: str) -> Baseline | None:
    """The newest run of benchmark ``name`` whose record is tagged RELIABLE."""
    found = _latest_reliable_run(home, name)
    return _baseline(*found) if found is not None else None


def latest_reliable_values(home: Path, name: str) -> tuple[str, dict[str, Any]] | None:
    """(run id, params and seeds) of the latest RELIABLE run of benchmark ``name``, if any:
    gate 1's hint for a manifest param the file leaves out (config/manifest.py)."""
    found = _latest_reliable_run(home, name)
    if found is None:
        return None
    run_id, run = found
    values = dict(_baseline(run_id, run).params)
    seeds = thaw(run.config.get("seeds"))
    if seeds is not None:
        values["seeds"] = seeds
    return run_id, values


def review(home: Path, config: BenchmarkConfig) -> Review:
    """The matrix, the notes that apply, and every challenge of this request (the config read
    as its records hold it: a secret is never compared, nor shown)."""
    config = redact.as_written(config)
    baseline = latest_reliable(home, config.name)
    variables = variables_of(config)
    lessons, risks = notes_for(home, config.name, config.params)
    result = Review(
        config=config,
        baseline=baseline,
        rows=_rows(config, variables, baseline),
        lessons=lessons,
        risks=risks,
    )
    if baseline is not None:
        result.challenges += _baseline_challenges(config, variables, baseline)
    result.challenges += _lesson_challenges(config, variables, lessons)
    return result


def _rows(config: BenchmarkConfig, variables: list[str], baseline: Baseline | None) -> list[Row]:
    names = list(config.params) + [
        p for p in (baseline.params if baseline else {}) if p not in config.params
    ]
    rows = []
    for name in names:
        this = _value(config.params, name)
        if name in variables:
            this = (
                ", ".join(as_text(v) for v in config.treatments or []) or f"search space of {name}"
            )
        if baseline is None:
            rows.append(
                Row(name, "-", this, "TREATMENT" if name in variables else "CONTROL", False)
            )
            continue
        before = _value(baseline.params, name)
        if name in baseline.variables:
            before = ", ".join(as_text(v) for v in baseline.treatments) or before
        role = "TREATMENT" if name in variables else "CONTROL"
        rows.append(Row(name, before, this, role, role == "CONTROL" and before != this))
    return rows


def _value(params: dict[str, Any], name: str) -> str:
    return as_text(params[name]) if name in params else _MISSING


def _baseline_challenges(
    config: BenchmarkConfig, variables: list[str], baseline: Baseline
) -> list[Challenge]:
    challenges = []
    if variables and baseline.variables and variables != baseline.variables:
        challenges.append(
            Challenge(
                what=f"the treatment variable is {', '.join(variables)}, but the baseline "
                f"{baseline.run_id} varied {', '.join(baseline.variables)}",
                risk="this run answers a different question than the baseline: none of its "
                "verdicts can be read against the baseline's, and the baseline's treatment "
                "variable is now a control whose value decides the outcome silently.",
                alternative=f"keep treatment_variable: {', '.join(baseline.variables)} to extend "
                f"the baseline, or give the new question its own benchmark name so its first "
                f"run is an honest EXPLORATORY record.",
                request={"treatment_variable": ", ".join(variables)},
            )
        )
    for name in sorted(set(config.params) | set(baseline.params)):
        if name in variables or name in baseline.variables:
            continue
        before, this = _value(baseline.params, name), _value(config.params, name)
        if before == this:
            continue
        challenges.append(
            Challenge(
                what=f"control {name} changed relative to the baseline {baseline.run_id} "
                f"({before} -> {this})",
                risk=f"the treatments of this run still share one value of {name}, but its effect "
                f"can no longer be compared with the baseline's or reproduce it: a difference "
                f"may come from {name} rather than from "
                f"{', '.join(variables) or 'the treatment'}.",
                alternative=(
                    f"set {name}: {before} as in the baseline"
                    if before != _MISSING
                    else f"drop {name}, which the baseline did not declare"
                )
                + f"; to study {name}, make it the treatment_variable of its own "
                "benchmark.",
                request={name: this},
            )
        )
    return challenges


def _lesson_challenges(
    config: BenchmarkConfig, variables: list[str], lessons: list[Note]
) -> list[Challenge]:
    challenges = []
    for note in lessons:
        if note.benchmark not in (None, config.name):
            continue
        for name, recommended in note.params.items():
            if recommended is None or name in variables or name not in config.params:
                continue
            this = as_text(config.params[name])
            if this == recommended:
                continue
            challenges.append(
                Challenge(
                    what=f"{name} = {this} contradicts the lesson of {note.when}: "
                    f"{' '.join(note.text.split())}",
                    risk=f"the lesson recommends {name} = {recommended}; repeating what it warns "
                    "against spends the budget on a result already known to mislead.",
                    alternative=f"set {name}: {recommended} as the lesson recommends.",
                    request={name: this},
                )
            )
    return challenges


# -- accepted deviations ------------------------------------------------------------------------


def deviation_path(home: Path, name: str) -> Path:
    return home / DEVIATIONS / (re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") + ".yaml")


def request_of(challenges: list[Challenge]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for challenge in challenges:
        merged.update(challenge.request)
    return merged


def accept_deviation(home: Path, result: Review, reason: str) -> Path:
    """Record why this request deviates; the matching run gets it as a caveat at run start."""
    if not reason.strip():
        raise SystemExit(
            "benchmark-agent: --accept-deviation needs a reason: say why this "
            "deviation is worth its limited comparability."
        )
    path = deviation_path(home, result.config.name)
    document = {
        "benchmark": result.config.name,
        "accepted": utc_now(),
        "reason": reason.strip(),
        "baseline": result.baseline.run_id if result.baseline else None,
        "request": request_of(result.challenges),
        "challenges": [c.what for c in result.challenges],
    }
    atomic_write(path, dump_yaml(document))
    return path


def accepted_deviation(home: Path, name: str, config: BenchmarkConfig) -> dict[str, Any] | None:
    """The deviation accepted for benchmark ``name`` if ``config`` is the request it was for."""
    path = deviation_path(home, name)
    if not path.is_file():
        return None
    document = load_yaml(path) or {}
    request = document.get("request") or {}
    config = redact.as_written(config)  # the request was recorded redacted
    current = {key: _value(config.params, key) for key in request}
    if "treatment_variable" in request:
        current["treatment_variable"] = ", ".join(variables_of(config))
    return document if request and current == request else None


def deviation_caveat(home: Path, name: str, config: BenchmarkConfig) -> str | None:
    """The caveat a run of ``config`` carries when it is an accepted deviation, else None."""
    document = accepted_deviation(home, name, config)
    if document is None:
        return None
    against = f" relative to {document['baseline']}" if document.get("baseline") else ""
    return (
        f"comparability limited: deviation accepted at plan time ({document['accepted']})"
        f"{against}: {document['reason']} [{'; '.join(document.get('challenges') or [])}]"
    )


# -- the request itself -------------------------------------------------------------------------


def bench_set_overrides(pytest_args: list[str]) -> dict[str, Any]:
    """The ``--bench-set PARAM=VALUE`` overrides among pytest arguments (values read as YAML)."""
    overrides: dict[str, Any] = {}
    args = iter(pytest_args)
    for arg in args:
        if arg == "--bench-set":
            item = next(args, "")
        elif arg.startswith("--bench-set="):
            item = arg.split("=", 1)[1]
        else:
            continue
        name, sep, value = item.partition("=")
        if sep and name:
            try:
                overrides[name.strip()] = parse_value(value, name.strip())
            except ValueError as error:  # the session refuses it, as a usage error
                raise ConfigError("--bench-set", [(name.strip(), str(error), "")]) from None
    return overrides


_TOP_KEY = re.compile(r"^hypothesis\s*:")


def set_hypothesis(path: Path, text: str) -> None:
    """Set or replace the file's top-level ``hypothesis:``, leaving every other line as it was."""
    if not text.strip():
        raise SystemExit(
            "benchmark-agent: --hypothesis needs text: what you expect to change, "
            "by how much, and why."
        )
    lines = read_input(path).splitlines(keepends=True)
    entry = f"hypothesis: {json.dumps(text.strip(), ensure_ascii=False)}\n"
    start = next((i for i, line in enumerate(lines) if _TOP_KEY.match(line)), None)
    if start is None:
        at = next((i + 1 for i, line in enumerate(lines) if line.startswith("name:")), 0)
        lines[at:at] = [entry]
    else:
        end = start + 1
        while end < len(lines) and (lines[end][:1] in (" ", "\t") or not lines[end].strip()):
            end += 1
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1  # blank lines before the next key stay where they are
        lines[start:end] = [entry]
    new_text = "".join(lines)
    try:
        parsed = yaml.safe_load(new_text)
    except yaml.YAMLError as exc:
        raise SystemExit(
            f"benchmark-agent: {path}: setting the hypothesis would break the YAML "
            f"({exc}); edit its hypothesis: by hand."
        ) from None
    if not isinstance(parsed, dict) or parsed.get("hypothesis") != text.strip():
        raise SystemExit(
            f"benchmark-agent: {path}: could not place hypothesis: as a top-level "
            "key; edit it by hand."
        )
    atomic_write(path, new_text)
