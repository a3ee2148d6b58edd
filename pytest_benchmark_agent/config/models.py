"""The benchmark file: pydantic models for every field, and loading with readable errors.

Unknown keys are errors everywhere (a typo is never silently ignored), and every validation
problem is reported at once as ``file: field: what is wrong. Fix: what is accepted``. Values
follow pydantic's lax mode where YAML users rely on it (``"5"`` and ``5.0`` for an int, an int
for a float, ``yes``/``no`` for a bool) but a bool is never taken for a number. A union is
validated by the member the input's shape belongs to (a mapping by the model), so its errors
are that member's alone. The plugin imports this module (and pydantic) only once a benchmark
file is loaded. The file's format: docs/benchmark/FORMAT.md; its JSON Schema: :func:`json_schema`.
"""

from __future__ import annotations

import difflib
import types
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from pytest_benchmark_agent.errors import ConfigError

#: Metrics every stage reports without being asked: they can be used as fields and as primaries.
BUILTIN_METRICS = ("wall_s", "cpu_s", "peak_rss_mb")

#: Where the format of the benchmark file is documented; every message about a value points here.
FORMAT_DOC = "docs/benchmark/FORMAT.md"


class FileModel(BaseModel):
    """A mapping of a YAML file: declared keys only, each validated; unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


def _number(tp: type, noun: str, **bounds: float) -> Any:
    """``tp`` within ``bounds`` (``ge=1``...), refusing ``true``/``false``, which pydantic's lax
    mode takes for 1 and 0. (The bounds come first: after the check they would be lost to the
    JSON Schema of an optional field.)"""
    kind, message = f"{tp.__name__}_type", f"Input should be a valid {noun}, not a boolean"

    def refuse_bool(value: Any) -> Any:
        if isinstance(value, bool):
            raise PydanticCustomError(kind, message)
        return value

    return Annotated[tp, Field(**bounds), BeforeValidator(refuse_bool)]


#: Numbers as the file's fields take them: never a bool.
Int = _number(int, "integer")
Count = _number(int, "integer", ge=1)
NonNegativeInt = _number(int, "integer", ge=0)
Float = _number(float, "number")
Positive = _number(float, "number", gt=0)
NonNegative = _number(float, "number", ge=0)
#: How many values a numeric search range spans.
Steps = _number(int, "integer", ge=2)


def _percent(value: Any) -> Any:
    """``"5%"`` as 0.05, so a threshold can be written the way people say it; else unchanged."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            return float(value.strip()[:-1]) / 100
        except ValueError:
            raise PydanticCustomError(
                "fraction_type", "Input should be a fraction (0.05) or a percentage ('5%')"
            ) from None
    return value


#: A share such as a noise threshold: a number (0.05) or a percentage string ("5%").
Fraction = Annotated[NonNegative, BeforeValidator(_percent, json_schema_input_type=float | str)]


def _by_shape(expected: str, **members: tuple[Any, tuple[type, ...]]) -> Any:
    """A union of ``members`` (tag -> (type, the input types it owns)): an input is validated
    by the member owning its type only, or refused as not ``expected`` when none does.

    pydantic's plain union tries every member and reports each one's errors; here a mapping
    given for a model gets the model's precise errors alone. The tag shows in pydantic's error
    locations; :func:`_explain` leaves it out of the field it names.
    """

    def shape(value: Any) -> str | None:
        for tag, (_, owned) in members.items():
            if isinstance(value, owned):
                return tag
        return None

    choices = tuple(Annotated[tp, Tag(tag)] for tag, (tp, _) in members.items())
    return Annotated[
        Union[choices],  # noqa: UP007  (a runtime tuple of members)
        Discriminator(
            shape,
            custom_error_type="union_type",
            custom_error_message=f"Input should be {expected}",
        ),
    ]


class MetricsFrom(FileModel):
    """Where a measure stage's metrics come from: its stdout, a file it writes, or the engine."""

    stdout: bool = False
    file: str | None = None
    fields: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> MetricsFrom:
        if self.stdout and self.file:
            raise ValueError("give either stdout: true or file: PATH, not both")
        needs_source = [f for f in self.fields if f not in BUILTIN_METRICS]
        if needs_source and not (self.stdout or self.file):
            raise ValueError(
                f"fields {needs_source} need a source: add stdout: true or file: PATH "
                f"(only the built-in metrics {list(BUILTIN_METRICS)} need none)"
            )
        return self


class Stage(FileModel):
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
    mem_mb: Positive | None = None
    gpus: NonNegativeInt | None = None
    vram_mb: Positive | None = None
    timeout_s: Positive | None = None


class MetricSpec(FileModel):
    """How a metric is judged: its better direction, its role, and its noise and floor bounds."""

    direction: Literal["lower", "higher", "equal"] = "lower"
    primary: bool = False
    guard: bool = False
    floor: Float | None = None
    ceiling: Float | None = None
    noise_threshold: Fraction = 0.01
    reproduce_tolerance: Fraction = 0.10
    #: How far a primary metric may regress against a baseline before the CI gate fails (a
    #: fraction, 0.05 or "5%"); None: any regressed verdict (one beyond noise_threshold) fails.
    fail_threshold: Fraction | None = None
    min_replicates: Count = 5


class Resources(FileModel):
    """What the whole benchmark may use; preflight and the guards hold the stages to it."""

    mem_mb: Positive | None = None
    disk_mb: Positive | None = None
    gpus: NonNegativeInt = 0
    vram_mb: NonNegative = 0
    est_gpu_hours: NonNegative = 0
    price_per_gpu_hour: NonNegative = 0


class Budget(FileModel):
    """Session limits: the session stops cleanly when one is spent."""

    trials: Count | None = None
    wall_clock_s: Positive | None = None
    gpu_hours: NonNegative | None = None
    cost_usd: NonNegative | None = None


class ReplicateRange(FileModel):
    """Sequential replication: add blocks from ``min`` until every primary verdict is decided."""

    min: Count
    max: Count

    @model_validator(mode="after")
    def _check(self) -> ReplicateRange:
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) must be >= min ({self.min})")
        return self


class Range(FileModel):
    """A numeric search range of a tuning file."""

    min: Float
    max: Float
    steps: Steps
    scale: Literal["linear", "log"] = "linear"


#: ``replicates``: a fixed count, or a range for sequential replication.
Replicates = _by_shape(
    f"a valid integer or a mapping of {', '.join(ReplicateRange.model_fields)}",
    count=(Count, (int, float, str)),
    range=(ReplicateRange, (dict, ReplicateRange)),
)
#: ``treatment_variable``: one param, or several varied together.
TreatmentVariable = _by_shape(
    "a valid string or a list", name=(str, (str,)), names=(list[str], (list, tuple))
)
#: A dimension of ``search_space``: the values to try, or a numeric range.
Dimension = _by_shape(
    f"a list or a mapping of {', '.join(Range.model_fields)}",
    values=(list[Any], (list, tuple)),
    range=(Range, (dict, Range)),
)


class TuneSettings(FileModel):
    """How a tune guards its own loop (the ``tune:`` block of a tuning file)."""

    max_noncomparable_streak: Count = 3


class Objective(FileModel):
    """What a tune optimizes: a metric and its better direction."""

    metric: str
    direction: Literal["lower", "higher"]


class ManifestEntry(FileModel):
    """A parameter a comparison depends on (a recipe's or domain's provenance manifest).

    Gate 1 requires it declared, even at its ``default``; ``why`` is shown when it is missing.
    ``must_match``: runs whose values differ are never compared (e.g. ``eval_suite``), so it
    cannot be the treatment variable either. The key ``seeds`` stands for the ``seeds:`` field.
    ``secret``: its value is written as ``<redacted>`` in every record (the stage gets it).
    """

    why: str
    default: Any = None
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
    replicates: Replicates = 5
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

    @property
    def min_replicates(self) -> int:
        """Replicates every treatment gets before any sequential stopping is considered."""
        return self.replicates if isinstance(self.replicates, int) else self.replicates.min

    @property
    def max_replicates(self) -> int:
        return self.replicates if isinstance(self.replicates, int) else self.replicates.max


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
        raise ConfigError(
            path,
            [
                (
                    where,
                    f"not valid YAML ({getattr(exc, 'problem', exc)}).",
                    "correct the YAML syntax at that place.",
                )
            ],
        ) from None
    except OSError as exc:
        raise ConfigError(
            path, [("", f"cannot be read ({exc.strerror}).", "check the path.")]
        ) from None
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
    try:
        return BenchmarkConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(path, _explain(exc, raw)) from None


def _explain(
    exc: ValidationError, raw: Any, model: type[BaseModel] = BenchmarkConfig
) -> list[tuple[str, str, str]]:
    """pydantic's errors (every one) as (field, message, fix) triples a user can act on."""
    explained = []
    for error in exc.errors(include_url=False):
        loc, kind = error["loc"], error["type"]
        if loc and loc[-1] == "[key]":  # a mapping's key that is not text (YAML's 1:, true:)
            field, _ = _walk(loc[:-1], raw, model)
            explained.append(
                (field, "is a key here and should be text.", f"quote it ('{loc[-2]}').")
            )
            continue
        field, owner = _walk(loc, raw, model)
        if kind == "extra_forbidden":
            accepted = sorted(owner.model_fields) if owner else []
            close = difflib.get_close_matches(str(loc[-1]), accepted, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            explained.append(
                (field, "is not a known key.", f"{hint}accepted keys here: {', '.join(accepted)}.")
            )
        elif kind == "missing":
            explained.append((field, "is required.", "add it."))
        else:
            message = error["msg"].removeprefix("Value error, ")
            explained.append(
                (
                    field,
                    f"{message} (got {error['input']!r}).",
                    f"see {FORMAT_DOC} for accepted values.",
                )
            )
    return explained


def _walk(
    loc: tuple[str | int, ...], raw: Any, model: type[BaseModel]
) -> tuple[str, type[BaseModel] | None]:
    """The field pydantic's ``loc`` names, as a user reads it, and the model holding its key.

    The path reads ``stages[1] (merge).kind``: list entries by their ``name`` when they have
    one, union tags (:func:`_by_shape`) left out. The model is the one whose mapping holds the
    last key (for an unknown key, the keys it accepts); None where that is no model's.
    """
    text, node, tp, owner = "", raw, model, None
    for part in loc:
        tp = _bare(tp)
        if get_origin(tp) in (Union, types.UnionType):  # the next part tags the member used
            tp = next(
                (
                    member
                    for member in get_args(tp)
                    if any(
                        getattr(meta, "tag", None) == part
                        for meta in getattr(member, "__metadata__", ())
                    )
                ),
                Any,
            )
            continue
        owner = tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None
        if owner is not None:
            field = owner.model_fields.get(str(part))
            tp = field.annotation if field else Any
        else:
            args = get_args(tp)
            tp = args[-1] if get_origin(tp) in (list, dict) and args else Any
        if isinstance(part, int) and not isinstance(node, dict):  # a list's index
            text += f"[{part}]"
            node = node[part] if isinstance(node, list) and part < len(node) else None
            if isinstance(node, dict) and isinstance(node.get("name"), str):
                text += f" ({node['name']})"
        else:
            text += f".{part}" if text else str(part)
            node = node.get(part) if isinstance(node, dict) else None
    return text, owner


def _bare(tp: Any) -> Any:
    """``tp`` without its ``Annotated`` metadata and its ``| None``."""
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
        elif get_origin(tp) in (Union, types.UnionType) and type(None) in get_args(tp):
            rest = tuple(arg for arg in get_args(tp) if arg is not type(None))
            tp = rest[0] if len(rest) == 1 else Union[rest]  # noqa: UP007
        else:
            return tp
