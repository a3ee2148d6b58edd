"""The search space of a tuning file: its lattice, objective, constraints and tuner settings.

A tuning file declares ``search_space:`` (each tuned param maps to a list of values or a
``{min, max, steps, scale}`` range), ``objective: {metric, direction}`` and ``constraints:``
(``"recall@10 >= 0.99"``). Every other param is a control; the declared ``params`` value of a
tuned param is the starting incumbent. Everything is validated here, before any round runs,
and each problem names its field and the fix (a :class:`~.errors.ConfigError`).

Each tuned param becomes a :class:`Dimension` whose values form a lattice: a range gives
``steps`` values (evenly spaced, or geometrically with ``scale: log``), a list gives its values.
Numeric dimensions are *ordered* (ascending), so a strategy can step to neighbours; a list of
other values is categorical. A param whose starting value is an integer keeps integer values.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.config.metric import BUILTIN_METRICS
from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.config.tuning import Range
from pytest_benchmark_agent.errors import ConfigError
from pytest_benchmark_agent.util.placeholders import as_text

Problem = tuple[str, str, str]
Point = dict[str, Any]

#: The operators a constraint may use, and what each demands of a sample.
OPERATORS = {
    ">=": lambda v, b: v >= b,
    "<=": lambda v, b: v <= b,
    ">": lambda v, b: v > b,
    "<": lambda v, b: v < b,
}
_CONSTRAINT = re.compile(
    r"^\s*(?P<metric>[A-Za-z_][\w.@\-/]*)\s*(?P<op>>=|<=|>|<)\s*"
    r"(?P<bound>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$"
)
#: Default length of a streak of non-comparable candidates after which the tuner halts.


@dataclass(frozen=True)
class Dimension:
    """One tuned param and the lattice of values it may take."""

    name: str
    values: tuple[Any, ...]
    ordered: bool

    def index(self, value: Any) -> int:
        """Position of ``value`` on the lattice: exact, else the nearest value (ordered only)."""
        text = as_text(value)
        for i, candidate in enumerate(self.values):
            if as_text(candidate) == text:
                return i
        if not self.ordered:
            raise ValueError(f"{self.name}={text} is not one of {list(self.values)}")
        return min(range(len(self.values)), key=lambda i: abs(float(self.values[i]) - value))

    def coarse_spacing(self) -> int:
        """Lattice spacing of refine's first grid: the largest power of two giving >= 4 points."""
        if not self.ordered:
            return 1
        return 2 ** math.floor(math.log2(max(1.0, (len(self.values) - 1) / 3)))

    def coarse_indices(self) -> list[int]:
        """Every ``coarse_spacing``-th lattice index, always including both ends."""
        step = self.coarse_spacing()
        picks = list(range(0, len(self.values), step))
        return picks if picks[-1] == len(self.values) - 1 else [*picks, len(self.values) - 1]


@dataclass(frozen=True)
class Constraint:
    """A bound another metric must meet on every sample of a candidate: ``recall@10 >= 0.99``."""

    metric: str
    op: str
    bound: float

    @property
    def text(self) -> str:
        return f"{self.metric} {self.op} {self.bound:g}"

    def holds(self, value: float) -> bool:
        return bool(OPERATORS[self.op](value, self.bound))

    def worst(self, values: list[float]) -> float:
        """The sample closest to breaking the bound (the one a report should show)."""
        return min(values) if self.op in (">=", ">") else max(values)


@dataclass(frozen=True)
class SearchSpace:
    """Everything a strategy needs to know about what it searches and what it optimizes."""

    dimensions: tuple[Dimension, ...]
    start: Point
    objective: str
    direction: str
    constraints: tuple[Constraint, ...]

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.dimensions]

    def point_at(self, indices: tuple[int, ...]) -> Point:
        return {d.name: d.values[i] for d, i in zip(self.dimensions, indices, strict=True)}

    def indices(self, point: Point) -> tuple[int, ...]:
        return tuple(d.index(point[d.name]) for d in self.dimensions)

    def grid(self) -> list[Point]:
        """Every lattice point, the first dimension varying slowest."""
        return [
            self.point_at(ix) for ix in product(*(range(len(d.values)) for d in self.dimensions))
        ]

    def distance(self, a: Point, b: Point) -> tuple[int, int]:
        """(params that differ, lattice steps between them): smaller is the simpler move."""
        changed, steps = 0, 0
        for dim in self.dimensions:
            if as_text(a[dim.name]) == as_text(b[dim.name]):
                continue
            changed += 1
            steps += abs(dim.index(a[dim.name]) - dim.index(b[dim.name])) if dim.ordered else 1
        return changed, steps

    def definition(self) -> dict[str, Any]:
        """A plain description, stored in the tune record so a resume can check it is the same."""
        return {
            "dimensions": {d.name: [as_text(v) for v in d.values] for d in self.dimensions},
            "start": {k: as_text(v) for k, v in self.start.items()},
            "objective": {"metric": self.objective, "direction": self.direction},
            "constraints": [c.text for c in self.constraints],
        }


def load_space(config: BenchmarkConfig, path: Path) -> SearchSpace:
    """The validated search space of a tuning file; ConfigError lists every problem at once."""
    if config.search_space is None:
        raise ConfigError(
            path,
            [
                (
                    "search_space",
                    "is missing, so this is not a tuning file.",
                    "add search_space: {param: [values]} (or {min, max, steps}), "
                    "objective: and constraints:, or run it with plain --bench.",
                )
            ],
        )
    problems: list[Problem] = []
    if config.treatment_variable is not None or config.treatments is not None:
        problems.append(
            (
                "treatments",
                "a tuning file varies its search_space params, so it has "
                "no treatment_variable or treatments.",
                "remove treatment_variable: and treatments:.",
            )
        )
    if not config.search_space:
        problems.append(("search_space", "is empty.", "map at least one param to its values."))
    dimensions = []
    for name, spec in config.search_space.items():
        dim, dim_problems = _dimension(name, spec, config.params)
        problems += dim_problems
        if dim is not None:
            dimensions.append(dim)
    objective, direction = _objective(config, problems)
    constraints = [
        _constraint(text, i, config, problems) for i, text in enumerate(config.constraints)
    ]
    if problems:
        raise ConfigError(path, problems)
    start = {d.name: config.params[d.name] for d in dimensions}
    return SearchSpace(
        tuple(dimensions),
        start,
        objective,
        direction,
        tuple(c for c in constraints if c is not None),
    )


def _dimension(
    name: str, spec: list[Any] | Range, params: dict[str, Any]
) -> tuple[Dimension | None, list[Problem]]:
    field = f"search_space.{name}"
    if name not in params:
        return None, [
            (
                field,
                "is tuned but not declared under params.",
                "declare it under params: with its starting value (the first incumbent).",
            )
        ]
    start = params[name]
    if isinstance(spec, Range):
        return _range_dimension(name, spec, start)
    texts = [as_text(v) for v in spec]
    if len(spec) < 2:
        return None, [
            (
                field,
                f"lists {len(spec)} value(s); a tuned param needs at least two.",
                "list two or more values, or make it a plain param.",
            )
        ]
    duplicates = sorted({t for t in texts if texts.count(t) > 1})
    if duplicates:
        return None, [(field, f"repeats {duplicates}.", "list each value once.")]
    numeric = all(_is_number(v) for v in spec) and _is_number(start)
    if numeric:
        return Dimension(name, tuple(sorted(spec)), ordered=True), _start_inside(
            field, name, start, min(spec), max(spec)
        )
    if as_text(start) not in texts:
        return None, [
            (
                f"params.{name}",
                f"starts at {as_text(start)!r}, which is not one of search_space.{name} {texts}.",
                "start from one of the listed values.",
            )
        ]
    return Dimension(name, tuple(spec), ordered=False), []


def _range_dimension(name: str, spec: Range, start: Any) -> tuple[Dimension | None, list[Problem]]:
    field = f"search_space.{name}"
    if not spec.min < spec.max:
        return None, [
            (
                field,
                f"min ({spec.min:g}) must be below max ({spec.max:g}).",
                "swap them, or list the values instead.",
            )
        ]
    if spec.scale == "log" and spec.min <= 0:
        return None, [
            (
                f"{field}.min",
                f"is {spec.min:g}, but scale: log needs min > 0.",
                "use a positive min, or scale: linear.",
            )
        ]
    if not _is_number(start):
        return None, [
            (
                f"params.{name}",
                f"starts at {as_text(start)!r}, which is not a number "
                f"but search_space.{name} is a numeric range.",
                "give a number inside the range.",
            )
        ]
    if spec.scale == "log":
        ratio = (spec.max / spec.min) ** (1 / (spec.steps - 1))
        raw = [spec.min * ratio**i for i in range(spec.steps)]
    else:
        width = (spec.max - spec.min) / (spec.steps - 1)
        raw = [spec.min + width * i for i in range(spec.steps)]
    values: list[Any] = [float(f"{v:.10g}") for v in raw]
    if isinstance(start, int):
        values = sorted({int(round(v)) for v in values})
        if len(values) < 2:
            return None, [
                (
                    field,
                    "gives fewer than two distinct integers.",
                    "widen the range or use fewer steps.",
                )
            ]
    return Dimension(name, tuple(values), ordered=True), _start_inside(
        field, name, start, spec.min, spec.max
    )


def _start_inside(field: str, name: str, start: float, low: float, high: float) -> list[Problem]:
    if low <= start <= high:
        return []
    return [
        (
            f"params.{name}",
            f"starts at {start:g}, outside {field} ({low:g} .. {high:g}).",
            "start from a value inside the space (it is the first incumbent).",
        )
    ]


def _objective(config: BenchmarkConfig, problems: list[Problem]) -> tuple[str, str]:
    objective = config.objective
    if objective is None:
        problems.append(
            (
                "objective",
                "is required in a tuning file.",
                "add objective: {metric: p50_ms, direction: lower}.",
            )
        )
        return "", "lower"
    known = list(config.metrics) + [m for m in BUILTIN_METRICS if m not in config.metrics]
    if objective.metric not in known:
        problems.append(
            (
                "objective.metric",
                f"'{objective.metric}' is not a declared metric"
                f"{_did_you_mean(objective.metric, known)}.",
                f"name one of: {', '.join(known)}.",
            )
        )
        return objective.metric, objective.direction
    spec = config.metrics.get(objective.metric)
    if spec is not None and spec.direction != objective.direction:
        problems.append(
            (
                "objective.direction",
                f"is {objective.direction}, but "
                f"metrics.{objective.metric}.direction is {spec.direction}.",
                "make the two agree.",
            )
        )
    if spec is not None and config.min_replicates < spec.min_replicates:
        problems.append(
            (
                "replicates",
                f"is {config.min_replicates}, below "
                f"metrics.{objective.metric}.min_replicates ({spec.min_replicates}), so "
                "every candidate would be not comparable.",
                f"use replicates: {spec.min_replicates} or more, or lower "
                f"metrics.{objective.metric}.min_replicates.",
            )
        )
    for name, other in config.metrics.items():
        if other.primary and name != objective.metric:
            problems.append(
                (
                    f"metrics.{name}.primary",
                    f"marks '{name}' primary, but the objective is '{objective.metric}'.",
                    "drop primary: true (the objective is the tune's primary metric).",
                )
            )
    return objective.metric, objective.direction


def _constraint(
    text: Any, index: int, config: BenchmarkConfig, problems: list[Problem]
) -> Constraint | None:
    field = f"constraints[{index}]"
    match = _CONSTRAINT.match(text) if isinstance(text, str) else None
    if match is None:
        problems.append(
            (
                field,
                f"{text!r} is not of the form METRIC OP NUMBER.",
                'write e.g. "recall@10 >= 0.99" with one of >=, <=, >, <.',
            )
        )
        return None
    metric = match["metric"]
    known = list(config.metrics) + list(BUILTIN_METRICS)
    if metric not in known:
        problems.append(
            (
                field,
                f"metric '{metric}' is not declared{_did_you_mean(metric, known)}.",
                f"declare it under metrics: (and report it), or name one of: {', '.join(known)}.",
            )
        )
        return None
    spec = config.metrics.get(metric)
    if spec is not None and spec.direction == "equal":
        problems.append(
            (
                field,
                f"'{metric}' has direction: equal, which a bound cannot express.",
                "use direction: lower|higher for a bounded metric, or a guard.",
            )
        )
        return None
    return Constraint(metric, match["op"], float(match["bound"]))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _did_you_mean(name: str, known: list[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""
