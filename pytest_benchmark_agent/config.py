"""The benchmark file: a model for every field (``model.py``), and loading with readable errors.

Unknown keys are errors everywhere (a typo is never silently ignored), and every validation
problem is reported as ``file: field: what is wrong. Fix: what is accepted``.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

import yaml

from .errors import ConfigError
from .model import Field, Model, Problem, ValidationError

#: Metrics every stage reports without being asked: they can be used as fields and as primaries.
BUILTIN_METRICS = ("wall_s", "cpu_s", "peak_rss_mb")


class MetricsFrom(Model):
    """Where a measure stage's metrics come from: its stdout, a file it writes, or the engine."""

    stdout: bool = False
    file: str | None = None
    fields: list[str] = Field(default_factory=list)

    def _check(self) -> None:
        if self.stdout and self.file:
            raise ValueError("give either stdout: true or file: PATH, not both")
        needs_source = [f for f in self.fields if f not in BUILTIN_METRICS]
        if needs_source and not (self.stdout or self.file):
            raise ValueError(
                f"fields {needs_source} need a source: add stdout: true or file: PATH "
                f"(only the built-in metrics {list(BUILTIN_METRICS)} need none)"
            )


class Stage(Model):
    """One step of the pipeline: a prep (cached by signature) or a measure (always re-run)."""

    name: str
    kind: Literal["prep", "measure"]
    cmd: str | None = None
    needs: list[str] = Field(default_factory=list)
    produces: list[str] = Field(default_factory=list)
    inputs: list[str] = Field(default_factory=list)
    wdir: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    metrics_from: MetricsFrom | None = None
    mem_mb: float | None = Field(default=None, gt=0)
    gpus: int | None = Field(default=None, ge=0)
    vram_mb: float | None = Field(default=None, gt=0)
    timeout_s: float | None = Field(default=None, gt=0)


class MetricSpec(Model):
    """How a metric is judged: its better direction, its role, and its noise and floor bounds."""

    direction: Literal["lower", "higher", "equal"] = "lower"
    primary: bool = False
    guard: bool = False
    floor: float | None = None
    ceiling: float | None = None
    noise_threshold: float = Field(default=0.01, ge=0)
    reproduce_tolerance: float = Field(default=0.10, ge=0)
    #: How far a primary metric may regress against a baseline before the CI gate fails (a
    #: fraction, 0.05 for 5%); None: any regressed verdict (one beyond noise_threshold) fails.
    fail_threshold: float | None = Field(default=None, ge=0)
    min_replicates: int = Field(default=5, ge=1)


class Resources(Model):
    """What the whole benchmark may use; preflight and the guards hold the stages to it."""

    mem_mb: float | None = Field(default=None, gt=0)
    disk_mb: float | None = Field(default=None, gt=0)
    gpus: int = Field(default=0, ge=0)
    vram_mb: float = Field(default=0, ge=0)
    est_gpu_hours: float = Field(default=0, ge=0)
    price_per_gpu_hour: float = Field(default=0, ge=0)


class Budget(Model):
    """Session limits: the session stops cleanly when one is spent."""

    trials: int | None = Field(default=None, ge=1)
    wall_clock_s: float | None = Field(default=None, gt=0)
    gpu_hours: float | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)


class ReplicateRange(Model):
    """Sequential replication: add blocks from ``min`` until every primary verdict is decided."""

    min: int = Field(ge=1)
    max: int = Field(ge=1)

    def _check(self) -> None:
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) must be >= min ({self.min})")


class Range(Model):
    """A numeric search range of a tuning file."""

    min: float
    max: float
    steps: int = Field(ge=2)
    scale: Literal["linear", "log"] = "linear"


class TuneSettings(Model):
    """How a tune guards its own loop (the ``tune:`` block of a tuning file)."""

    max_noncomparable_streak: int = Field(default=3, ge=1)


class Objective(Model):
    metric: str
    direction: Literal["lower", "higher"]


class ManifestEntry(Model):
    """A parameter a comparison depends on (a recipe's or domain's provenance manifest).

    Gate 1 requires it declared, even at its ``default``; ``why`` is shown when it is missing.
    ``must_match``: runs whose values differ are never compared (e.g. ``eval_suite``), so it
    cannot be the treatment variable either. The key ``seeds`` stands for the ``seeds:`` field.
    """

    why: str
    default: Any = None
    must_match: bool = False


class BenchmarkConfig(Model):
    """A whole benchmark file (CONTRACT.md section 2)."""

    domain: str = "command"
    recipe: str | None = None
    name: str
    hypothesis: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    treatment_variable: str | list[str] | None = None
    treatments: list[Any] | None = None
    replicates: int | ReplicateRange = Field(5, ge=1)
    seeds: list[int] | None = None
    stages: list[Stage] = Field(default_factory=list)
    metrics: dict[str, MetricSpec] = Field(default_factory=dict)
    resources: Resources = Field(default_factory=Resources)
    budget: Budget = Field(default_factory=Budget)
    code: list[str] = Field(default_factory=list)
    env_vars: list[str] = Field(default_factory=list)
    search_space: dict[str, list[Any] | Range] | None = None
    objective: Objective | None = None
    constraints: list[str] = Field(default_factory=list)
    tune: TuneSettings = Field(default_factory=TuneSettings)
    manifest: dict[str, ManifestEntry] = Field(default_factory=dict)

    @property
    def min_replicates(self) -> int:
        """Replicates every treatment gets before any sequential stopping is considered."""
        return self.replicates if isinstance(self.replicates, int) else self.replicates.min

    @property
    def max_replicates(self) -> int:
        return self.replicates if isinstance(self.replicates, int) else self.replicates.max


#: libyaml's safe loader where PyYAML was built with it (several times faster), else PyYAML's.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_yaml(text: str) -> Any:
    """Parse YAML as ``yaml.safe_load`` does, with libyaml when available."""
    return yaml.load(text, Loader=_SAFE_LOADER)


def load_config(path: Path | str, overrides: dict[str, Any] | None = None) -> BenchmarkConfig:
    """Read and validate a benchmark file; ``overrides`` replace declared params (``--bench-set``).

    Raises ConfigError naming the file, each bad field and what is accepted.
    """
    path = Path(path)
    try:
        raw = parse_yaml(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(path, [(where, f"not valid YAML ({getattr(exc, 'problem', exc)}).",
                                  "correct the YAML syntax at that place.")]) from None
    except OSError as exc:
        raise ConfigError(path, [("", f"cannot be read ({exc.strerror}).",
                                  "check the path.")]) from None
    if not isinstance(raw, dict):
        raise ConfigError(path, [("", "must be a YAML mapping of fields (name, params, stages...).",
                                  "see CONTRACT.md section 2 for the format.")])
    raw.setdefault("name", path.name.removesuffix(".yaml").removesuffix(".bench"))
    if overrides:
        params = raw.setdefault("params", {})
        unknown = sorted(set(overrides) - set(params)) if isinstance(params, dict) else []
        if unknown:
            raise ConfigError(path, [(f"params.{name}", "is set with --bench-set but not declared.",
                                      "declare it under params: first.") for name in unknown])
        params.update(overrides)
    try:
        return BenchmarkConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(path, _explain(exc.problems, raw)) from None


def _explain(problems: list[Problem], raw: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Turn validation problems into (field, message, fix) triples a user can act on."""
    explained = []
    for problem in problems:
        field = _field_path(problem.loc, raw)
        if problem.kind == "extra_forbidden":
            accepted = sorted(problem.accepted)
            close = difflib.get_close_matches(str(problem.loc[-1]), accepted, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            explained.append((field, "is not a known key.",
                              f"{hint}accepted keys here: {', '.join(accepted)}."))
        elif problem.kind == "missing":
            explained.append((field, "is required.", "add it."))
        else:
            explained.append((field, f"{problem.message} (got {problem.input!r}).",
                              "see CONTRACT.md section 2 for accepted values."))
    return explained


def _field_path(loc: tuple[str | int, ...], raw: dict[str, Any]) -> str:
    """``stages[1] (merge).kind`` style paths, naming list entries by their ``name`` when known."""
    text, node = "", raw
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
            node = node[part] if isinstance(node, list) and part < len(node) else None
            if isinstance(node, dict) and isinstance(node.get("name"), str):
                text += f" ({node['name']})"
        else:
            text += f".{part}" if text else str(part)
            node = node.get(part) if isinstance(node, dict) else None
    return text

