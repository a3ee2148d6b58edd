"""The benchmark file: the top-level model, the design of its experiment, and loading it with
readable errors.

Unknown keys are errors everywhere (a typo is never silently ignored), and every validation
problem is reported at once as ``file: field: what is wrong. Fix: what is accepted``
(config/explain.py). The field types: config/fields.py; the parts of the file: config/metric.py,
config/stage.py, config/resources.py, config/tuning.py. The plugin imports this module (and
pydantic) only once a benchmark file is loaded. The file's format: docs/benchmark/FORMAT.md;
its JSON Schema: :func:`json_schema`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from pytest_benchmark_agent.config.explain import readable_errors
from pytest_benchmark_agent.config.fields import (
    FORMAT_DOC,
    FileModel,
    Int,
    ReplicateCount,
    by_shape,
)
from pytest_benchmark_agent.config.metric import (
    COUNTER_MIN_REPLICATES,
    COUNTER_NOISE_THRESHOLD,
    COUNTERS,
    MetricSpec,
)
from pytest_benchmark_agent.config.resources import Budget, Resources
from pytest_benchmark_agent.config.retyped import retyped_values
from pytest_benchmark_agent.config.safe_yaml import read_yaml_input
from pytest_benchmark_agent.config.stage import Stage
from pytest_benchmark_agent.config.tuning import Dimension, Objective, TuneSettings
from pytest_benchmark_agent.errors import ConfigError

#: The most trials one plan may hold (treatments x replicates x measure stages).
MAX_TRIALS = 1_000_000


#: What a range of replicates adds blocks until: every primary verdict decided (``verdicts``),
#: the CI gate can decide (``gate``: the default under ``--bench-against``), or each primary
#: interval lies wholly on one side of its ``fail_threshold`` (``midpoint``: a bisect step,
#: whose threshold is the midpoint between GOOD and BAD).
UNTIL = ("verdicts", "gate", "midpoint")


class ReplicateRange(FileModel):
    """Sequential replication: add blocks from ``min`` until ``until`` is met, at most ``max``.
    ``until`` unset: ``gate`` under ``--bench-against``, else ``verdicts``."""

    min: ReplicateCount
    max: ReplicateCount
    until: Literal["verdicts", "gate", "midpoint"] | None = None

    @model_validator(mode="after")
    def _check(self) -> ReplicateRange:
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) must be >= min ({self.min})")
        return self


#: ``replicates``: a fixed count, or a range for sequential replication.
Replicates = by_shape(
    f"a valid integer or a mapping of {', '.join(ReplicateRange.model_fields)}",
    count=(ReplicateCount, (int, float, str)),
    range=(ReplicateRange, (dict, ReplicateRange)),
)


#: ``treatment_variable``: one param, or several varied together.
TreatmentVariable = by_shape(
    "a valid string or a list", name=(str, (str,)), names=(list[str], (list, tuple))
)


class ManifestEntry(FileModel):
    """A parameter a comparison depends on (a recipe's or domain's provenance manifest).

    Gate 1 requires it declared, even at its ``default``; ``why`` is shown when it is missing.
    ``must_match``: runs whose values differ are never compared (e.g. ``eval_suite``), so it
    cannot be the treatment variable either. The key ``seeds`` stands for the ``seeds:`` field.
    ``secret``: its value is written as ``<redacted>`` in every record (the stage gets it).
    """

    why: str
    default: Any = None
    #: What a real value looks like (shown where the param is missing or a placeholder).
    example: Any = None
    must_match: bool = False
    secret: bool = False


class BenchmarkConfig(FileModel):
    """A whole benchmark file (docs/benchmark/FORMAT.md)."""

    domain: str = "command"
    recipe: str | None = None
    name: str
    hypothesis: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    treatment_variable: TreatmentVariable | None = None
    treatments: list[Any] | None = None
    replicates: Replicates = 7
    seeds: list[Int] | None = None
    stages: list[Stage] = Field(default_factory=list)
    metrics: dict[str, MetricSpec] = Field(default_factory=dict)
    resources: Resources = Field(default_factory=Resources)
    budget: Budget = Field(default_factory=Budget)
    code: list[str] = Field(default_factory=list)
    env_vars: list[str] = Field(default_factory=list)
    search_space: dict[str, Dimension] | None = None
    objective: Objective | None = None
    constraints: list[str] = Field(default_factory=list)
    tune: TuneSettings = Field(default_factory=TuneSettings)
    manifest: dict[str, ManifestEntry] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _counter_noise(self) -> BenchmarkConfig:
        """A counter's default noise band and ``min_replicates`` are the counters' (they are
        nearly deterministic, and their t rule decides from 3 blocks)."""
        for name, spec in self.metrics.items():
            if name in COUNTERS and "noise_threshold" not in spec.model_fields_set:
                spec.noise_threshold = COUNTER_NOISE_THRESHOLD
            if name in COUNTERS and "min_replicates" not in spec.model_fields_set:
                spec.min_replicates = COUNTER_MIN_REPLICATES
        return self

    @model_validator(mode="after")
    def _plan_size(self) -> BenchmarkConfig:
        measures = sum(stage.kind == "measure" for stage in self.stages)
        trials = len(self.treatments or [None]) * self.max_replicates * max(measures, 1)
        if trials > MAX_TRIALS:
            raise ValueError(
                f"the plan would hold {trials} trials (treatments x replicates x measure "
                f"stages), over the {MAX_TRIALS} one run may hold; ask for fewer replicates"
            )
        return self

    @property
    def min_replicates(self) -> int:
        """Replicates every treatment gets before any sequential stopping is considered."""
        return self.replicates if isinstance(self.replicates, int) else self.replicates.min

    @property
    def max_replicates(self) -> int:
        return self.replicates if isinstance(self.replicates, int) else self.replicates.max


def one_configuration(config: BenchmarkConfig) -> bool:
    """A file naming neither ``treatment_variable`` nor ``treatments`` (nor a search space): it
    runs its replicates of one configuration, compared with nothing inside the run, only with
    other runs (a baseline, a reproduction)."""
    return (
        config.treatment_variable is None
        and config.treatments is None
        and config.search_space is None
    )


def treatment_variable(config: BenchmarkConfig) -> str | None:
    """The one varying parameter, whether named directly or implied by mapping treatments."""
    tv = config.treatment_variable
    if isinstance(tv, list):
        return tv[0] if len(tv) == 1 else None
    if tv is None and config.treatments and all(isinstance(t, dict) for t in config.treatments):
        keys = {key for t in config.treatments for key in t}
        return next(iter(keys)) if len(keys) == 1 else None
    return tv


def treatment_values(config: BenchmarkConfig) -> list[Any]:
    """The treatment values in declared order (mapping entries reduced to their one value)."""
    tv = treatment_variable(config)
    return [t[tv] if isinstance(t, dict) else t for t in (config.treatments or [])]


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a benchmark file, generated from the models.

    ``name`` is not required: a file without it is named after itself (:func:`load_config`).
    """
    schema = BenchmarkConfig.model_json_schema()
    schema["required"] = [key for key in schema.get("required", []) if key != "name"]
    if not schema["required"]:
        del schema["required"]
    schema.pop("title", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:pytest-benchmark-agent:bench.schema.json",
        "title": "pytest-benchmark-agent benchmark file (bench.yaml)",
        **schema,
    }


def load_config(path: Path | str, overrides: dict[str, Any] | None = None) -> BenchmarkConfig:
    """Read and validate a benchmark file; ``overrides`` replace declared params (``--bench-set``).

    Raises ConfigError naming the file, each bad field and what is accepted.
    """
    path = Path(path)
    raw = read_yaml_input(path)
    if not isinstance(raw, dict):
        raise ConfigError(
            path,
            [
                (
                    "",
                    "must be a YAML mapping of fields (name, params, stages...).",
                    f"see {FORMAT_DOC} for the format.",
                )
            ],
        )
    raw.setdefault("name", path.name.removesuffix(".yaml").removesuffix(".bench"))
    if overrides:
        params = raw.setdefault("params", {})
        unknown = sorted(set(overrides) - set(params)) if isinstance(params, dict) else []
        if unknown:
            raise ConfigError(
                path,
                [
                    (
                        f"params.{name}",
                        "is set with --bench-set but not declared.",
                        "declare it under params: first.",
                    )
                    for name in unknown
                ],
            )
        params.update(overrides)
    nul = list(_nul_fields(raw))
    if nul:
        raise ConfigError(
            path,
            [
                (
                    field,
                    "holds a NUL byte (\\0), which no command, path or environment can carry.",
                    "remove it.",
                )
                for field in nul
            ],
        )
    retyped = list(retyped_values(path, raw, skip=set(overrides or ())))
    if retyped:
        raise ConfigError(path, retyped)
    try:
        return BenchmarkConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(path, readable_errors(exc, raw, BenchmarkConfig)) from None


def _nul_fields(node: Any, field: str = "") -> Iterator[str]:
    """The fields (``params.name``, ``stages[0].env.X``) whose key or text holds a NUL byte."""
    stack = [(node, field)]
    while stack:
        node, field = stack.pop()
        if isinstance(node, str):
            if "\0" in node:
                yield field
        elif isinstance(node, dict):
            for key, value in node.items():
                name = f"{field}.{key}" if field else str(key)
                if isinstance(key, str) and "\0" in key:
                    yield name.replace("\0", "\\0")
                else:
                    stack.append((value, name))
        elif isinstance(node, list):
            stack.extend((value, f"{field}[{index}]") for index, value in enumerate(node))
