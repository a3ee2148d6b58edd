"""Strict models on the standard library: the part of pydantic's API the benchmark file needs.

Importing pydantic and building the config's models cost a cached session ~0.25 s (issue 9);
this module imports in about a millisecond. A model declares its fields as class annotations,
optionally with :func:`Field` for defaults, factories and ``gt``/``ge`` bounds. Validation
follows pydantic's lax mode where YAML users rely on it (``"5"`` and ``5.0`` for an int, an int
for a float, ``yes``/``no`` for a bool) but refuses a bool where a number belongs. Unknown keys
are errors, and every problem is collected, each a :class:`Problem` with its location.

Supported field types: ``str``, ``int``, ``float``, ``bool``, ``Any``, ``Literal[...]``,
``list[X]``, ``dict[str, X]``, models, and unions of these (``X | None`` included). Annotations
are resolved on first use, so a model may name models defined after it.
"""

from __future__ import annotations

import datetime
import math
import sys
import types
from collections.abc import Callable
from typing import Any, ClassVar, Literal, NamedTuple, TypeVar, Union, get_args, get_origin

_M = TypeVar("_M", bound="Model")


class Problem(NamedTuple):
    """One validation problem: where, what kind (pydantic's names), a message, and the input."""

    loc: tuple[str | int, ...]
    kind: str
    message: str
    input: Any
    #: For an unknown key ("extra_forbidden"): the keys the model accepts there.
    accepted: tuple[str, ...] = ()


class ValidationError(ValueError):
    """Every problem found validating one input (a ValueError, as pydantic's is)."""

    def __init__(self, title: str, problems: list[Problem]):
        self.problems = problems
        parts = []
        for problem in problems:
            where = ".".join(map(str, problem.loc)) or "(the whole input)"
            got = "" if problem.kind in _NO_INPUT else f" (got {problem.input!r})"
            parts.append(f"{where}: {problem.message}{got}")
        count = len(problems)
        super().__init__(f"{count} validation error{'s' * (count != 1)} for {title}: "
                         + "; ".join(parts))


_NO_INPUT = ("missing", "extra_forbidden")
#: A validator: (value, location, problems) -> the validated value, or _BAD after recording why.
_Validator = Callable[[Any, tuple, list], Any]
_BAD: Any = object()
_REQUIRED: Any = object()


class FieldInfo:
    """A declared field: its default or factory, its bounds, and (once resolved) its validator."""

    __slots__ = ("default", "default_factory", "gt", "ge", "module", "annotation", "validate",
                 "floaty")

    def __init__(self, default: Any, default_factory: Callable[[], Any] | None,
                 gt: float | None, ge: float | None):
        self.default = default
        self.default_factory = default_factory
        self.gt = gt
        self.ge = ge
        #: The declaring module, whose names a string annotation is resolved against.
        self.module = ""
        self.annotation: Any = None
        self.validate: _Validator = _any
        #: A float field: an int in it (a default such as ``0``) is dumped as a float in JSON.
        self.floaty = False


def Field(default: Any = _REQUIRED, *, default_factory: Callable[[], Any] | None = None,
          gt: float | None = None, ge: float | None = None) -> Any:
    """A field's default (or ``default_factory``) and bounds; ``gt``/``ge`` bound a number,
    including the numeric member of a union (``int | ReplicateRange``)."""
    return FieldInfo(default, default_factory, gt, ge)


class Model:
    """A strict model: declared fields only, validated on construction and ``model_validate``."""

    __slots__ = ("__dict__", "_fields_set")
    #: Field name -> FieldInfo, in declaration order (base classes' fields first).
    model_fields: ClassVar[dict[str, FieldInfo]] = {}
    _resolved: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields: dict[str, FieldInfo] = {}
        for base in reversed(cls.__bases__):
            fields.update(getattr(base, "model_fields", {}))
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():
            declared = cls.__dict__.get(name, _REQUIRED)
            info = (declared if isinstance(declared, FieldInfo)
                    else FieldInfo(declared, None, None, None))
            info.module, info.annotation = cls.__module__, annotation
            fields[name] = info
            if name in cls.__dict__:
                delattr(cls, name)  # the instance holds the value; the default lives in the field
        cls.model_fields = fields
        cls._resolved = False

    def __init__(self, **data: Any):
        problems: list[Problem] = []
        if not type(self)._fill(self, data, (), problems):
            raise ValidationError(type(self).__name__, problems)

    # -- validation ------------------------------------------------------------------------

    @classmethod
    def model_validate(cls: type[_M], obj: Any) -> _M:
        """``obj`` (a mapping, or an instance, returned as is) as a model; ValidationError lists
        every problem."""
        problems: list[Problem] = []
        result = cls._coerce(obj, (), problems)
        if result is _BAD:
            raise ValidationError(cls.__name__, problems)
        return result

    def _check(self) -> None:
        """Rules across fields, run once every field is valid: raise ValueError to refuse."""

    @classmethod
    def _coerce(cls, value: Any, loc: tuple, problems: list[Problem]) -> Any:
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            return _fail(problems, loc, "model_type",
                         f"Input should be a valid dictionary or instance of {cls.__name__}", value)
        obj = cls.__new__(cls)
        return obj if cls._fill(obj, value, loc, problems) else _BAD

    @classmethod
    def _fill(cls, obj: Model, data: dict, loc: tuple, problems: list[Problem]) -> bool:
        """Validate ``data`` into ``obj``'s fields; False (with problems recorded) when invalid."""
        if not cls._resolved:
            cls._resolve()
        before = len(problems)
        values = {}
        for name, info in cls.model_fields.items():
            if name in data:
                values[name] = info.validate(data[name], (*loc, name), problems)
            elif info.default_factory is not None:
                values[name] = info.default_factory()
            elif info.default is not _REQUIRED:
                values[name] = info.default
            else:
                problems.append(Problem((*loc, name), "missing", "Field required", data))
        accepted = tuple(cls.model_fields)
        for key, value in data.items():
            if key not in cls.model_fields:
                problems.append(Problem((*loc, key), "extra_forbidden",
                                        "Extra inputs are not permitted", value, accepted))
        if len(problems) > before:
            return False
        obj.__dict__.update(values)
        obj._fields_set = set(data)
        try:
            obj._check()
        except ValueError as exc:
            problems.append(Problem(loc, "value_error", str(exc), data))
            return False
        return True

    @classmethod
    def _resolve(cls) -> None:
        """Turn the annotations into validators (on first use, once every model is defined)."""
        for info in cls.model_fields.values():
            annotation = info.annotation
            if isinstance(annotation, str):
                annotation = eval(annotation, vars(sys.modules[info.module]))
            info.annotation = annotation
            info.validate = _bounded(_validator(annotation), info.gt, info.ge)
            info.floaty = annotation is float or annotation == float | None
        cls._resolved = True

    # -- the rest of pydantic's surface ----------------------------------------------------

    @property
    def model_fields_set(self) -> set[str]:
        """The fields given explicitly (on validation, or by a copy's ``update``)."""
        return self._fields_set

    def model_dump(self, *, mode: Literal["python", "json"] = "python", exclude_none: bool = False,
                   exclude: set[str] | None = None) -> dict[str, Any]:
        """The fields as a dict in declaration order, nested models as dicts; ``mode="json"``
        makes every value JSON-ready, as pydantic's does (tuples and sets as lists, dates as
        ISO text, an int in a float field as a float)."""
        if not type(self)._resolved:
            type(self)._resolve()
        json = mode == "json"
        out = {}
        for name, info in self.model_fields.items():
            value = self.__dict__[name]
            if (exclude and name in exclude) or (value is None and exclude_none):
                continue
            if json and info.floaty and type(value) is int:
                value = float(value)
            out[name] = _dump(value, json, exclude_none)
        return out

    def model_copy(self: _M, *, update: dict[str, Any] | None = None) -> _M:
        """A shallow copy with ``update`` applied as given (not validated, as in pydantic)."""
        copy = type(self).__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy._fields_set = set(self._fields_set)
        if update:
            copy.__dict__.update(update)
            copy._fields_set.update(update)
        return copy

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # mutable, like a non-frozen pydantic model

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={self.__dict__[name]!r}" for name in self.model_fields)
        return f"{type(self).__name__}({fields})"


def _dump(value: Any, json: bool, exclude_none: bool) -> Any:
    if isinstance(value, Model):
        return value.model_dump(mode="json" if json else "python", exclude_none=exclude_none)
    if isinstance(value, dict):
        return {key: _dump(item, json, exclude_none) for key, item in value.items()}
    if isinstance(value, list) or (json and isinstance(value, (tuple, set, frozenset))):
        return [_dump(item, json, exclude_none) for item in value]
    if json and isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if json and isinstance(value, bytes):
        return value.decode()
    return value


def _fail(problems: list[Problem], loc: tuple, kind: str, message: str, value: Any) -> Any:
    problems.append(Problem(loc, kind, message, value))
    return _BAD


# -- validators per type -------------------------------------------------------------------


def _any(value: Any, loc: tuple, problems: list[Problem]) -> Any:
    return value


def _str(value: Any, loc: tuple, problems: list[Problem]) -> Any:
    if isinstance(value, str):
        return value
    return _fail(problems, loc, "string_type", "Input should be a valid string", value)


def _int(value: Any, loc: tuple, problems: list[Problem]) -> Any:
    if isinstance(value, bool):
        return _fail(problems, loc, "int_type", "Input should be a valid integer, not a boolean",
                     value)
    if isinstance(value, int):
        return value
    number = _number(value)
    if isinstance(number, float):
        if not math.isfinite(number):
            return _fail(problems, loc, "finite_number", "Input should be a finite number", value)
        if number.is_integer():
            return int(number)
        if not isinstance(value, str):
            return _fail(problems, loc, "int_from_float",
                         "Input should be a valid integer, got a number with a fractional part",
                         value)
    if isinstance(value, str):
        return _fail(problems, loc, "int_parsing",
                     "Input should be a valid integer, unable to parse string as an integer", value)
    return _fail(problems, loc, "int_type", "Input should be a valid integer", value)


def _float(value: Any, loc: tuple, problems: list[Problem]) -> Any:
    if isinstance(value, bool):
        return _fail(problems, loc, "float_type", "Input should be a valid number, not a boolean",
                     value)
    number = _number(value)
    if number is not None:
        return number
    if isinstance(value, str):
        return _fail(problems, loc, "float_parsing",
                     "Input should be a valid number, unable to parse string as a number", value)
    return _fail(problems, loc, "float_type", "Input should be a valid number", value)


def _number(value: Any) -> float | None:
    """``value`` (an int, float or numeric text) as a float; None when it is none of these."""
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_BOOLS = _TRUE | {"0", "off", "f", "false", "n", "no"}


def _bool(value: Any, loc: tuple, problems: list[Problem]) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in _BOOLS:
        return value.lower() in _TRUE
    if isinstance(value, (int, float, str)):
        return _fail(problems, loc, "bool_parsing",
                     "Input should be a valid boolean, unable to interpret input", value)
    return _fail(problems, loc, "bool_type", "Input should be a valid boolean", value)


_SCALARS: dict[Any, tuple[_Validator, str]] = {
    Any: (_any, "anything"), str: (_str, "a valid string"), int: (_int, "a valid integer"),
    float: (_float, "a valid number"), bool: (_bool, "a valid boolean"),
}


def _validator(tp: Any) -> _Validator:
    """The validator of type ``tp`` (one of those the module docstring lists)."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Union or origin is types.UnionType:
        return _union(args)
    if origin is Literal:
        return _literal(args)
    if origin is list:
        return _list(_validator(args[0]))
    if origin is dict and args[0] is str:
        return _dict(_validator(args[1]))
    if isinstance(tp, type) and issubclass(tp, Model):
        return tp._coerce
    if tp in _SCALARS:
        return _SCALARS[tp][0]
    raise TypeError(f"a model field cannot be of type {tp!r}")


def _describe(tp: Any) -> str:
    """What a union member accepts, for the error when no member does."""
    if isinstance(tp, type) and issubclass(tp, Model):
        return f"a mapping of {', '.join(tp.model_fields)}"
    origin = get_origin(tp)
    if origin is Literal:
        return f"one of {_choices(get_args(tp))}"
    return {list: "a list", dict: "a mapping"}.get(origin) or _SCALARS[tp][1]


def _owns(tp: Any) -> tuple[type, ...]:
    """The input types that belong to union member ``tp``, whose errors are then the ones shown."""
    if isinstance(tp, type) and issubclass(tp, Model):
        return (dict, tp)
    origin = get_origin(tp)
    if origin is Literal:
        return tuple({type(choice) for choice in get_args(tp)})
    return {list: (list, tuple), dict: (dict,)}.get(origin) or (tp,)


def _union(members: tuple) -> _Validator:
    if type(None) in members:
        rest = tuple(member for member in members if member is not type(None))
        inner = _validator(rest[0]) if len(rest) == 1 else _union(rest)

        def optional(value: Any, loc: tuple, problems: list[Problem]) -> Any:
            return None if value is None else inner(value, loc, problems)
        return optional

    branches = [(_owns(member), _validator(member)) for member in members]
    expected = " or ".join(_describe(member) for member in members)

    def union(value: Any, loc: tuple, problems: list[Problem]) -> Any:
        for owned, validate in branches:
            if type(value) in owned:  # e.g. a mapping for a model: its precise errors are shown
                return validate(value, loc, problems)
        for _, validate in branches:  # lax coercions, first success wins ("5" for an int)
            result = validate(value, loc, [])
            if result is not _BAD:
                return result
        return _fail(problems, loc, "union_type", f"Input should be {expected}", value)
    return union


def _choices(choices: tuple) -> str:
    texts = [repr(choice) for choice in choices]
    return texts[0] if len(texts) == 1 else f"{', '.join(texts[:-1])} or {texts[-1]}"


def _literal(choices: tuple) -> _Validator:
    message = f"Input should be {_choices(choices)}"

    def literal(value: Any, loc: tuple, problems: list[Problem]) -> Any:
        for choice in choices:
            if type(value) is type(choice) and value == choice:
                return choice
        return _fail(problems, loc, "literal_error", message, value)
    return literal


def _list(item: _Validator) -> _Validator:
    def list_of(value: Any, loc: tuple, problems: list[Problem]) -> Any:
        if not isinstance(value, (list, tuple, set, frozenset)):
            return _fail(problems, loc, "list_type", "Input should be a valid list", value)
        if item is _any:
            return list(value)
        out = [item(entry, (*loc, index), problems) for index, entry in enumerate(value)]
        return _BAD if any(entry is _BAD for entry in out) else out
    return list_of


def _dict(item: _Validator) -> _Validator:
    def dict_of(value: Any, loc: tuple, problems: list[Problem]) -> Any:
        if not isinstance(value, dict):
            return _fail(problems, loc, "dict_type", "Input should be a valid dictionary", value)
        out, bad = {}, False
        for key, entry in value.items():
            if not isinstance(key, str):
                bad = _fail(problems, (*loc, key), "key_type",
                            "is a key here and should be text (quote it)", key) is _BAD
                continue
            out[key] = item(entry, (*loc, key), problems)
            bad = bad or out[key] is _BAD
        return _BAD if bad else out
    return dict_of


def _bounded(validate: _Validator, gt: float | None, ge: float | None) -> _Validator:
    if gt is None and ge is None:
        return validate

    def bounded(value: Any, loc: tuple, problems: list[Problem]) -> Any:
        result = validate(value, loc, problems)
        if isinstance(result, (int, float)) and not isinstance(result, bool):
            if gt is not None and not result > gt:
                return _fail(problems, loc, "greater_than", f"Input should be greater than {gt}",
                             value)
            if ge is not None and not result >= ge:
                return _fail(problems, loc, "greater_than_equal",
                             f"Input should be greater than or equal to {ge}", value)
        return result
    return bounded
