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
import errno
import math
import types
import warnings
from collections.abc import Iterator, Mapping
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
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from pytest_benchmark_agent.errors import ConfigError
from pytest_benchmark_agent.records.fsutil import read_regular

#: Metrics every stage reports without being asked: they can be used as fields and as primaries.
BUILTIN_METRICS = ("wall_s", "cpu_s", "peak_rss_mb")
#: Counters a measure stage may ask for (``counters:``): each becomes a built-in metric of it,
#: counted by a backend (engine/counters.py). Their default ``noise_threshold`` is
#: :data:`COUNTER_NOISE_THRESHOLD`, calibrated in docs/benchmark/STATISTICS.md.
COUNTERS = ("instructions",)
COUNTER_NOISE_THRESHOLD = 0.002
#: A counter's default ``min_replicates``: its t rule decides from 3 blocks (stats/analysis.py).
COUNTER_MIN_REPLICATES = 3

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
    if tp is float:  # .inf and .nan are no size, time or threshold (mem_mb: .inf)
        bounds = {"allow_inf_nan": False, **bounds}

    def refuse_bool(value: Any) -> Any:
        if isinstance(value, bool):
            raise PydanticCustomError(kind, message)
        return value

    return Annotated[tp, Field(**bounds), BeforeValidator(refuse_bool)]


#: The most replicates (or search steps) a file may ask for: a plan is refused, before
#: anything is allocated, past this (``replicates: 100000000000`` would build 10^11 trials).
MAX_REPLICATES = 10_000
#: The most trials one plan may hold (treatments x replicates x measure stages).
MAX_TRIALS = 1_000_000

#: Numbers as the file's fields take them: never a bool; floats finite.
Int = _number(int, "integer")
Count = _number(int, "integer", ge=1)
#: A count of replicates: at least 1, at most :data:`MAX_REPLICATES`.
ReplicateCount = _number(int, "integer", ge=1, le=MAX_REPLICATES)
NonNegativeInt = _number(int, "integer", ge=0)
Float = _number(float, "number")
Positive = _number(float, "number", gt=0)
NonNegative = _number(float, "number", ge=0)
#: How many values a numeric search range spans.
Steps = _number(int, "integer", ge=2, le=MAX_REPLICATES)


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
        needs_source = [f for f in self.fields if f not in BUILTIN_METRICS + COUNTERS]
        if needs_source and not (self.stdout or self.file):
            raise ValueError(
                f"fields {needs_source} need a source: add stdout: true or file: PATH "
                f"(only the built-in metrics {list(BUILTIN_METRICS)} and the counters "
                f"{list(COUNTERS)} need none)"
            )
        return self


class StageResources(FileModel):
    """A GPU stage's own ``resources:`` (the same as its flat ``gpus``/``vram_mb``), and what
    one execution of it (a trial, or a prep's build) is estimated to cost in GPU-hours."""

    gpus: NonNegativeInt | None = None
    vram_mb: Positive | None = None
    est_gpu_hours: NonNegative | None = None


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
    #: GPU-hours one execution is estimated to cost (preflight and the tuner's budget check).
    est_gpu_hours: NonNegative | None = None
    timeout_s: Positive | None = None
    #: Untimed rounds of a measure stage per configuration before its first trial (a cold
    #: first run, caches and imports, is never measured); ``--bench-warmup`` where unset.
    warmup: NonNegativeInt | None = None
    #: Run before every trial of a measure stage (and every warm-up round), outside its
    #: metrics: hyperfine's ``--prepare`` (reset a table, drop a cache).
    setup: str | None = None
    #: Lifted into ``gpus``, ``vram_mb`` and ``est_gpu_hours`` as read (declared for the schema).
    resources: StageResources | None = Field(default=None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _lift_resources(cls, data: Any) -> Any:
        """``resources: {gpus, vram_mb, est_gpu_hours}`` stands for the flat fields."""
        if not isinstance(data, dict) or not isinstance(data.get("resources"), dict):
            return data
        data = dict(data)
        for key, value in data["resources"].items():
            if key in data and data[key] != value:
                raise ValueError(
                    f"{key} is given twice, as {data[key]!r} and as resources.{key}: "
                    f"{value!r}; keep one"
                )
            if key in StageResources.model_fields:
                data[key] = value
        return data

    #: Counted by a backend while the stage runs (engine/counters.py), each one a metric.
    counters: list[Literal[COUNTERS]] = Field(default_factory=list)  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _counted(self) -> Stage:
        if self.counters and self.kind != "measure":
            raise ValueError("counters: are counted on a measure stage only")
        for name in ("warmup", "setup"):
            if getattr(self, name) is not None and self.kind != "measure":
                raise ValueError(f"{name}: belongs to a measure stage only (this is a prep)")
        read = self.metrics_from.fields if self.metrics_from else []
        uncounted = [name for name in read if name in COUNTERS and name not in self.counters]
        if uncounted:
            raise ValueError(f"fields {uncounted} are counters: add counters: {uncounted}")
        return self

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        bad = [name for name in env if not name or "=" in name]
        if bad:
            raise ValueError(
                f"environment variable names must be non-empty and hold no '=' (got {bad})"
            )
        return env


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
    #: How far this metric's run medians may move between CI jobs on the same code (a
    #: fraction): against a recorded baseline with fewer than 3 recorded runs, a change within it
    #: cannot be told from the machine. None: the documented default (judge/evidence.py).
    run_to_run: Fraction | None = None
    min_replicates: ReplicateCount = 5


def metric_role(name: str, spec: MetricSpec | None) -> str:
    """How the reports title a metric: primary, guard, built-in (measured by the engine) or
    secondary."""
    if spec is not None and spec.primary:
        return "primary"
    if spec is not None and spec.guard:
        return "guard"
    return "built-in" if name in BUILTIN_METRICS else "secondary"


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

    min: ReplicateCount
    max: ReplicateCount

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
    count=(ReplicateCount, (int, float, str)),
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


def exact_metrics(specs: Mapping[str, object]) -> frozenset[str]:
    """The names of the ``direction: equal`` metrics of ``specs`` (kept as written)."""
    return frozenset(
        name for name, spec in specs.items() if getattr(spec, "direction", None) == "equal"
    )


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
#: How deep a record may nest; libyaml's composer recurses on the C stack, and a document
#: nested ~25,000 deep (25 kB of ``[``) crashed the process, so deeper ones are refused first.
MAX_DEPTH = 2000
#: How deep a file a user writes may nest (a benchmark file nests about 6 deep): the records
#: of a run nest a few levels deeper than its config, and must stay writable and readable.
MAX_INPUT_DEPTH = 100
#: How many nodes aliases may add to a document: 30 lines of aliases (an alias bomb) expand
#: to billions of values once the config is validated or written.
MAX_ALIAS_NODES = 100_000
#: The largest benchmark, recipe or tuning file read; a bigger one is refused unread.
MAX_INPUT_BYTES = 16 << 20


class YamlLimitError(yaml.MarkedYAMLError):
    """A document refused before it is built: too deep, an alias bomb, a duplicate key..."""


class _Loader(_SAFE_LOADER):  # type: ignore[misc,valid-type]
    """The safe loader, refusing what a reader must never build: a duplicate key (the second
    silently won), a recursive alias, aliases expanding past :data:`MAX_ALIAS_NODES` or
    nesting past ``max_depth``; and a scalar its constructor cannot read (``2026-13-45``, a
    5,000-digit int) as a YAML error at its place instead of a ValueError."""

    max_depth = MAX_DEPTH
    aliases = True

    def construct_document(self, node: yaml.Node) -> Any:
        if self.aliases:
            _check_graph(node, self.max_depth)
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            return super().construct_mapping(node, deep=deep)  # PyYAML's own error
        explicit = node.value
        self.flatten_mapping(node)  # ``<<: *base`` pairs first; the file's own keys after
        first = len(node.value) - len(explicit)
        mapping: dict[Any, Any] = {}
        for index, (key_node, value_node) in enumerate(node.value):
            key = self.construct_object(key_node, deep=deep)
            try:
                seen = key in mapping
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    "found unhashable key",
                    key_node.start_mark,
                ) from None
            if seen and index > first:
                _refuse_duplicate(self, node.value[first:index], key, key_node)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def _refuse_duplicate(loader: Any, earlier: list[Any], key: Any, key_node: yaml.Node) -> None:
    """Raise for ``key`` at ``key_node`` if the file wrote it before among ``earlier`` pairs
    (a key from a ``<<`` merge may be overridden: that is what merging is for)."""
    for other, _ in earlier:
        if loader.construct_object(other) == key:
            raise YamlLimitError(
                None,
                None,
                f"duplicate key {key!r}: first at line {other.start_mark.line + 1}, "
                f"again at line {key_node.start_mark.line + 1}",
                key_node.start_mark,
            )


def _marked(construct: Any) -> Any:
    """A scalar constructor whose ValueError (a date that does not exist, an int too long to
    convert) is a YAML error naming the scalar's place."""

    def checked(loader: Any, node: yaml.Node) -> Any:
        try:
            return construct(loader, node)
        except (ValueError, OverflowError) as error:
            raise YamlLimitError(
                None,
                None,
                f"cannot read {str(node.value)[:40]!r} ({str(error).split(';')[0]})",
                node.start_mark,
            ) from None

    return checked


for _tag in ("int", "timestamp"):  # what a plain scalar can make fail; a tag's error: below
    _Loader.add_constructor(
        f"tag:yaml.org,2002:{_tag}",
        _marked(yaml.constructor.SafeConstructor.yaml_constructors[f"tag:yaml.org,2002:{_tag}"]),
    )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return node.value
    return []


def _check_graph(root: yaml.Node, max_depth: int) -> None:
    """Refuse a node graph that aliases make recursive, too big or too deep once expanded.

    Each node's expanded size and depth is computed once (iteratively: the graph may be
    deep), so a bomb is measured without being built.
    """
    sizes: dict[int, tuple[int, int]] = {}  # id -> (expanded nodes, expanded depth)
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            parts = [sizes[id(child)] for child in _children(node)]
            size = 1 + sum(p[0] for p in parts)
            depth = 1 + max((p[1] for p in parts), default=0)
            sizes[key] = size, depth
            if size > len(sizes) + MAX_ALIAS_NODES:
                raise YamlLimitError(
                    None,
                    None,
                    f"aliases expand this value to over {MAX_ALIAS_NODES} values (an alias bomb)",
                    node.start_mark,
                )
            if depth > max_depth:
                raise YamlLimitError(
                    None, None, f"nests deeper than {max_depth} levels", node.start_mark
                )
            continue
        if key in sizes:
            continue
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                raise YamlLimitError(
                    None, None, "an alias refers to a value that contains it", child.start_mark
                )
            if id(child) not in sizes:
                stack.append((child, False))


def _check_depth(text: str, max_depth: int) -> bool:
    """Refuse ``text`` nesting deeper than ``max_depth``, from the parser's events alone;
    whether it may hold an alias (a node graph to check).

    Each level of nesting takes a ``[``, ``{``, ``-`` or ``?``, or more indentation (a level
    of which costs a line as long as its depth): where those cannot add up to ``max_depth``,
    nothing is parsed twice, and a text with an ``&`` and a ``*`` may hold an alias.
    """
    bound = sum(text.count(c) for c in "[{-?") + math.isqrt(2 * len(text)) + 1
    if bound <= max_depth:
        return "&" in text and "*" in text
    parser = _SAFE_LOADER(text)
    aliased = False
    try:
        depth = 0
        while not parser.check_event(yaml.StreamEndEvent):
            event = parser.get_event()
            if isinstance(event, yaml.AliasEvent):
                aliased = True
            elif isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > max_depth:
                    raise YamlLimitError(
                        None, None, f"nests deeper than {max_depth} levels", event.start_mark
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.MarkedYAMLError as error:
        # libyaml (0.2.5+) scans ahead and stops at its own nesting limit first: the same refusal
        if "maximum nesting depth" not in (error.problem or ""):
            raise
        raise YamlLimitError(
            None, None, f"nests deeper than {max_depth} levels", error.problem_mark
        ) from None
    finally:
        parser.dispose()
    return aliased


def parse_yaml(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """Parse YAML as ``yaml.safe_load`` does (with libyaml when available), refusing with a
    ``yaml.YAMLError`` what :class:`_Loader` refuses and nesting past ``max_depth``."""
    aliased = _check_depth(text, max_depth)
    loader = _Loader(text)
    loader.max_depth = max_depth
    loader.aliases = aliased  # without an alias the graph is a tree, as deep as checked
    try:
        return loader.get_single_data()
    except (ValueError, OverflowError, RecursionError) as error:  # e.g. ``!!float abc``
        raise YamlLimitError(None, None, f"cannot read a value ({error})", None) from None
    finally:
        loader.dispose()


def yaml_problem(error: yaml.YAMLError, text: str = "") -> tuple[str, str]:
    """(where, what) of a YAML error: ``line 3, column 5`` and the problem, for messages."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    if mark is not None:
        where = f"line {mark.line + 1}, column {mark.column + 1}"
    elif isinstance(error, yaml.reader.ReaderError):  # a character YAML does not allow
        line = text.count("\n", 0, error.position) + 1
        column = error.position - (text.rfind("\n", 0, error.position) + 1) + 1
        where = f"line {line}, column {column}"
        code = ord(error.character) if isinstance(error.character, str) else error.character
        return where, f"the character U+{code:04X} is not allowed in YAML"
    else:
        where = ""
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    context = getattr(error, "context", None)
    return where, f"{context}: {problem}" if context else problem


def read_input(path: Path, limit: int = MAX_INPUT_BYTES) -> str:
    """A file a user wrote, as text: a regular file (a FIFO or device is refused, never
    read), at most ``limit`` bytes, UTF-8. Raises ConfigError naming the path, or the line
    and byte offset of the first byte that is not UTF-8."""
    try:
        data = read_regular(path, limit)
    except OSError as error:
        fix = (
            "give a benchmark file of a sensible size."
            if error.errno == errno.EFBIG
            else "check the path."
        )
        raise ConfigError(path, [("", f"cannot be read: {error.strerror}.", fix)]) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigError(
            path,
            [
                (
                    f"line {line}, byte offset {error.start}",
                    f"is not UTF-8 text (byte 0x{data[error.start]:02x}).",
                    "save the file as UTF-8.",
                )
            ],
        ) from None


def read_yaml_input(path: Path, limit: int = MAX_INPUT_BYTES) -> Any:
    """A YAML file a user wrote (:func:`read_input`), parsed at :data:`MAX_INPUT_DEPTH`;
    raises ConfigError naming the path, line and problem."""
    text = read_input(path, limit)
    try:
        return parse_yaml(text, MAX_INPUT_DEPTH)
    except yaml.YAMLError as error:
        where, problem = yaml_problem(error, text)
        raise ConfigError(
            path, [(where, f"not valid YAML ({problem}).", "correct the YAML at that place.")]
        ) from None


def parse_value(text: str, name: str = "") -> Any:
    """A value given on the command line (``--bench-set PARAM=VALUE``), read as YAML; raises
    ValueError saying why it is not (quoting the value unless it is a secret: a param ``name``
    named like one, or a value that looks like one)."""
    try:
        return parse_yaml(text, MAX_INPUT_DEPTH)
    except yaml.YAMLError as error:
        from pytest_benchmark_agent.records.redact import redact_value

        where, problem = yaml_problem(error, text)
        shown = redact_value(name, text[:80])
        raise ValueError(
            f"{shown!r} is not a valid YAML value ({problem}{', ' + where if where else ''})"
            "; quote a plain string, e.g. name='a: b'"
        ) from None


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
    retyped = list(_retyped_values(path, raw, skip=set(overrides or ())))
    if retyped:
        raise ConfigError(path, retyped)
    try:
        return BenchmarkConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(path, _explain(exc, raw)) from None


class RetypedValueWarning(UserWarning):
    """A treatment or param YAML 1.1 reads as another value than typed (``3.10`` as 3.1)."""


def _retyped_values(
    path: Path, raw: dict[str, Any], *, skip: set[str]
) -> Iterator[tuple[str, str, str]]:
    """Treatments and params (``skip``: those --bench-set replaced) that YAML 1.1's typing
    reads as other than typed, each a warning showing both (``3.10`` is 3.1, ``no`` false,
    ``on`` true, ``1.0e+3`` 1000.0, ``010`` 8, ``1_000`` 1000). Two treatments are refused: a
    word read as a boolean or null, and two spellings read as one value (``3.1``, ``3.10``),
    since the run would measure or merge values nobody wrote."""
    treatments, params = raw.get("treatments"), raw.get("params")
    if not isinstance(treatments, list) and not (isinstance(params, dict) and params):
        return
    root = yaml.compose(read_input(path), Loader=_SAFE_LOADER)
    nodes = {getattr(k, "value", None): v for k, v in getattr(root, "value", [])}
    if isinstance(params, dict):
        for field, item, value in _plain_scalars(nodes.get("params"), params, "params", skip):
            typed = item.value.lower() if value is None or isinstance(value, bool) else item.value
            if item.value not in ("", "~") and _read_as(value) != typed:
                _warn_retyped(path, field, item.value, _read_as(value), "it runs as")
    node = nodes.get("treatments")
    if not isinstance(node, yaml.SequenceNode) or not isinstance(treatments, list):
        return
    if len(node.value) != len(treatments):
        return
    typed: dict[Any, str] = {}
    quote = "quote it to keep it as written"
    for number, (item, value) in enumerate(zip(node.value, treatments, strict=True)):
        if not isinstance(item, yaml.ScalarNode) or item.style not in (None, ""):
            continue  # quoted, or a list or mapping: read as written
        field = f"treatments[{number}]"
        if value is None or isinstance(value, bool):
            read = _read_as(value)
            if item.value.lower() != read:
                yield (
                    field,
                    f"is typed {item.value} but YAML reads it as {read}.",
                    f"{quote}: '{item.value}' (see {FORMAT_DOC}).",
                )
        elif isinstance(value, (int, float)) and str(value) != item.value:
            key = (type(value).__name__, value)
            if key in typed:
                yield (
                    field,
                    f"is typed {item.value} but YAML reads it as {value!r}, the same value as "
                    f"{typed[key]}: the two would be one treatment.",
                    f"{quote}: '{item.value}' (see {FORMAT_DOC}).",
                )
            else:
                _warn_retyped(path, field, item.value, repr(value), "it runs and is labelled")
        typed.setdefault((type(value).__name__, value), item.value)


def _read_as(value: Any) -> str:
    """A plain scalar's value as YAML read it, spelled as the warnings show it."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    return repr(value) if isinstance(value, (int, float)) else str(value)


def _plain_scalars(
    node: Any, value: Any, field: str, skip: set[str]
) -> Iterator[tuple[str, yaml.ScalarNode, Any]]:
    """The unquoted scalars under ``node`` (a params mapping, its lists and mappings) with the
    value each was read as and its field (``params.sizes[1]``); a name in ``skip`` is left out."""
    if isinstance(node, yaml.ScalarNode):
        if node.style in (None, "") and not isinstance(value, str):
            yield field, node, value
    elif isinstance(node, yaml.SequenceNode) and isinstance(value, list):
        if len(node.value) == len(value):
            for index, (item, read) in enumerate(zip(node.value, value, strict=True)):
                yield from _plain_scalars(item, read, f"{field}[{index}]", set())
    elif isinstance(node, yaml.MappingNode) and isinstance(value, dict):
        for key, item in node.value:
            name = getattr(key, "value", None)
            if isinstance(name, str) and name in value and name not in skip:
                yield from _plain_scalars(item, value[name], f"{field}.{name}", set())


def _warn_retyped(path: Path, field: str, typed: str, read: str, runs: str) -> None:
    """The gate-1 warning of a value YAML 1.1 read otherwise than typed: file, field, both
    spellings and the fix."""
    warnings.warn(
        RetypedValueWarning(
            f"{path}: {field} is typed {typed} and YAML reads it as {read}; {runs} {read} "
            f"(quote it to keep it as written: '{typed}'; see {FORMAT_DOC})"
        ),
        stacklevel=4,
    )


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
                    f"{message} (got {_shown(loc, error['input'])!r}).",
                    f"see {FORMAT_DOC} for accepted values.",
                )
            )
    return explained


def _shown(loc: tuple[str | int, ...], value: Any) -> Any:
    """A refused value as its error may quote it: ``<redacted>`` under a secret's name (its
    key, or a key inside it), a URL without its credentials, a token-looking text hidden."""
    from pytest_benchmark_agent.records.redact import redact_mapping

    name = next((str(part) for part in reversed(loc) if isinstance(part, str)), "")
    return redact_mapping({name: value})[name]


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
