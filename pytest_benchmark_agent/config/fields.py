"""The field types of the benchmark file's models: a mapping that refuses unknown keys, numbers
that refuse booleans, shares written as a fraction or a percentage, and unions validated by
the input's shape. Values follow pydantic's lax mode where YAML users rely on it (``"5"`` and
``5.0`` for an int, an int for a float, ``yes``/``no`` for a bool) but a bool is never taken
for a number.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
)
from pydantic_core import PydanticCustomError

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


#: Numbers as the file's fields take them: never a bool; floats finite.
Int = _number(int, "integer")


Count = _number(int, "integer", ge=1)


#: A count of replicates: at least 1, at most :data:`MAX_REPLICATES`.
ReplicateCount = _number(int, "integer", ge=1, le=MAX_REPLICATES)


NonNegativeInt = _number(int, "integer", ge=0)


#: The most warm-up rounds a measure stage may ask for, per configuration: like
#: :data:`MAX_REPLICATES`, a plan is refused past it (``warmup: 1000000`` ran on for as long as
#: the budget had, and past it).
MAX_WARMUP = 1_000


#: A count of warm-up rounds: 0 or more, at most :data:`MAX_WARMUP`.
WarmupCount = _number(int, "integer", ge=0, le=MAX_WARMUP)


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


def by_shape(expected: str, **members: tuple[Any, tuple[type, ...]]) -> Any:
    """A union of ``members`` (tag -> (type, the input types it owns)): an input is validated
    by the member owning its type only, or refused as not ``expected`` when none does.

    pydantic's plain union tries every member and reports each one's errors; here a mapping
    given for a model gets the model's precise errors alone. The tag shows in pydantic's error
    locations; :func:`readable_errors` leaves it out of the field it names.
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
