"""pydantic's validation errors as (field, message, fix) triples a user can act on: the field
as the file spells it, a close match for an unknown key, refused values shown redacted.
"""

from __future__ import annotations

import difflib
import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ValidationError,
)

from pytest_benchmark_agent.config.fields import FORMAT_DOC


def readable_errors(
    exc: ValidationError, raw: Any, model: type[BaseModel]
) -> list[tuple[str, str, str]]:
    """pydantic's errors (every one) as (field, message, fix) triples a user can act on;
    ``model`` is the one ``raw`` was validated by."""
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
            if owner is model:  # the file's top level: a stage's or a metric's key misplaced
                hint = _belongs_elsewhere(str(loc[-1])) or hint
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


def _belongs_elsewhere(key: str) -> str:
    """Where a top-level key that is a measure stage's or a metric's field belongs (a top-level
    ``warmup: 2`` is a measure stage's), as the start of its fix; "" otherwise."""
    from pytest_benchmark_agent.config.metric import MetricSpec
    from pytest_benchmark_agent.config.stage import Stage

    if key in Stage.model_fields:
        return (
            f"'{key}' belongs on a stage, not at the top level: indent it under the stage it "
            f"is for (stages: - name: ..., kind: measure, {key}: ...). "
        )
    if key in MetricSpec.model_fields:
        return f"'{key}' belongs on a metric: metrics: NAME: {{{key}: ...}}. "
    return ""


def _shown(loc: tuple[str | int, ...], value: Any) -> Any:
    """A refused value as its error may quote it: ``<redacted>`` under a secret's name (its
    key, or a key inside it), a URL without its credentials, a token-looking text hidden."""
    from pytest_benchmark_agent.util.redact import redact_mapping

    name = next((str(part) for part in reversed(loc) if isinstance(part, str)), "")
    return redact_mapping({name: value})[name]


def _walk(
    loc: tuple[str | int, ...], raw: Any, model: type[BaseModel]
) -> tuple[str, type[BaseModel] | None]:
    """The field pydantic's ``loc`` names, as a user reads it, and the model holding its key.

    The path reads ``stages[1] (merge).kind``: list entries by their ``name`` when they have
    one, union tags (:func:`by_shape`) left out. The model is the one whose mapping holds the
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
