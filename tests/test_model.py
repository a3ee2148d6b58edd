"""The strict-model layer: lax coercions, unions, every problem with its location, and the
pydantic-like surface (dump, copy, fields set) the rest of the package uses."""

from __future__ import annotations

import datetime
import subprocess
import sys
from typing import Any, Literal

import pytest

from pytest_benchmark_agent.model import Field, Model, Problem, ValidationError


class Span(Model):
    lo: int = Field(ge=1)
    hi: int = Field(ge=1)

    def _check(self) -> None:
        if self.hi < self.lo:
            raise ValueError("hi must be >= lo")


class Item(Model):
    name: str
    kind: Literal["a", "b"] = "a"
    size: float | None = Field(default=None, gt=0)
    on: bool = False
    later: Later | None = None  # defined below: annotations resolve on first use


class Later(Model):
    x: int = 0


class Doc(Model):
    title: str
    count: int = 3
    ratio: float = 0
    tags: list[str] = Field(default_factory=list)
    items: list[Item] = Field(default_factory=list)
    spans: dict[str, Span] = Field(default_factory=dict)
    reps: int | Span = Field(5, ge=1)
    who: str | list[str] | None = None
    space: dict[str, list[Any] | Span] | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


def problems(data: dict[str, Any]) -> list[Problem]:
    with pytest.raises(ValidationError) as excinfo:
        Doc.model_validate(data)
    return excinfo.value.problems


def only(data: dict[str, Any]) -> Problem:
    found = problems(data)
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize(("given", "expected"), [("5", 5), (" 7 ", 7), ("7.0", 7), (5.0, 5)])
def test_int_accepts_integral_numbers_and_text(given: Any, expected: int) -> None:
    value = Doc.model_validate({"title": "t", "count": given}).count
    assert value == expected and type(value) is int


@pytest.mark.parametrize(("given", "kind"), [(5.5, "int_from_float"), ("x", "int_parsing"),
                                             (True, "int_type"), (None, "int_type"),
                                             (float("inf"), "finite_number")])
def test_int_refuses_the_rest(given: Any, kind: str) -> None:
    problem = only({"title": "t", "count": given})
    assert (problem.loc, problem.kind, problem.input) == (("count",), kind, given)


def test_float_takes_ints_and_text_but_not_booleans() -> None:
    assert type(Doc.model_validate({"title": "t", "ratio": 2}).ratio) is float
    assert Doc.model_validate({"title": "t", "ratio": "1.5"}).ratio == 1.5
    assert only({"title": "t", "ratio": True}).kind == "float_type"
    assert only({"title": "t", "ratio": "fast"}).kind == "float_parsing"


@pytest.mark.parametrize(("given", "expected"), [("yes", True), ("Off", False), (1, True),
                                                 (0.0, False), (True, True)])
def test_bool_coercions(given: Any, expected: bool) -> None:
    assert Item.model_validate({"name": "n", "on": given}).on is expected


def test_bool_and_str_refusals() -> None:
    with pytest.raises(ValidationError) as excinfo:
        Item.model_validate({"name": 5, "on": "maybe"})
    assert [(p.loc, p.kind) for p in excinfo.value.problems] == [
        (("name",), "string_type"), (("on",), "bool_parsing")]


def test_literal_lists_the_choices() -> None:
    problem = only({"title": "t", "items": [{"name": "i", "kind": "c"}]})
    assert problem.loc == ("items", 0, "kind")
    assert problem.message == "Input should be 'a' or 'b'"


def test_every_problem_is_collected_with_its_location() -> None:
    found = problems({"count": "x", "items": [{"name": "ok"}, {"size": 0, "bogus": 1}],
                      "spans": {"s": {"lo": 0, "hi": 2}}, "typo": 1})
    assert [(p.loc, p.kind) for p in found] == [
        (("title",), "missing"), (("count",), "int_parsing"),
        (("items", 1, "name"), "missing"), (("items", 1, "size"), "greater_than"),
        (("items", 1, "bogus"), "extra_forbidden"), (("spans", "s", "lo"), "greater_than_equal"),
        (("typo",), "extra_forbidden")]
    assert found[3].message == "Input should be greater than 0"
    assert found[5].message == "Input should be greater than or equal to 1"
    assert found[-1].accepted == tuple(Doc.model_fields)


def test_model_check_runs_once_the_fields_are_valid() -> None:
    problem = only({"title": "t", "spans": {"s": {"lo": 3, "hi": 2}}})
    assert (problem.loc, problem.kind, problem.message) == (("spans", "s"), "value_error",
                                                             "hi must be >= lo")
    found = problems({"title": "t", "spans": {"s": {"lo": 0, "hi": -1}}})
    assert [p.kind for p in found] == ["greater_than_equal"] * 2  # and no "hi must be >= lo"


def test_union_of_int_and_model() -> None:
    assert Doc.model_validate({"title": "t", "reps": "4"}).reps == 4
    assert Doc.model_validate({"title": "t", "reps": {"lo": 1, "hi": 2}}).reps == Span(lo=1, hi=2)
    assert only({"title": "t", "reps": 0}).kind == "greater_than_equal"  # bounds the int member
    # A mapping belongs to the model member: its precise problem, not "not an integer".
    assert only({"title": "t", "reps": {"lo": 1}}).loc == ("reps", "hi")
    problem = only({"title": "t", "reps": [1]})
    assert problem.loc == ("reps",)
    assert problem.message == "Input should be a valid integer or a mapping of lo, hi"


def test_union_of_text_and_list_and_optional() -> None:
    assert Doc.model_validate({"title": "t", "who": "a"}).who == "a"
    assert Doc.model_validate({"title": "t", "who": ("a", "b")}).who == ["a", "b"]
    assert Doc.model_validate({"title": "t", "who": None}).who is None
    assert only({"title": "t", "who": ["a", 1]}).loc == ("who", 1)


def test_union_in_dict_values() -> None:
    doc = Doc.model_validate({"title": "t", "space": {"a": [1, "x"], "b": {"lo": 1, "hi": 3}}})
    assert doc.space == {"a": [1, "x"], "b": Span(lo=1, hi=3)}
    assert only({"title": "t", "space": {"c": {"lo": 1}}}).loc == ("space", "c", "hi")
    assert only({"title": "t", "space": {"d": 5}}).message == (
        "Input should be a list or a mapping of lo, hi")


def test_containers_and_models_refuse_the_wrong_shape() -> None:
    assert only({"title": "t", "tags": "a"}).kind == "list_type"
    assert only({"title": "t", "spans": []}).kind == "dict_type"
    assert only({"title": "t", "items": [5]}).message == (
        "Input should be a valid dictionary or instance of Item")
    assert only({"title": "t", "extra": {1: "x"}}).loc == ("extra", 1)
    with pytest.raises(ValidationError, match="instance of Doc"):
        Doc.model_validate(["not", "a", "mapping"])


def test_forward_references_resolve() -> None:
    assert Item.model_validate({"name": "n", "later": {"x": "2"}}).later == Later(x=2)


def test_construction_validates_too_and_the_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"2 validation errors for Item: name: Field required; "
                                         r"size: Input should be greater than 0 \(got -1\)"):
        Item(size=-1)


def test_defaults_and_fresh_factories() -> None:
    first, second = Doc(title="a"), Doc(title="b")
    assert (first.count, first.ratio, first.reps, first.who) == (3, 0, 5, None)
    first.tags.append("x")
    assert second.tags == []


def test_fields_set_and_model_fields() -> None:
    doc = Doc.model_validate({"title": "t", "who": None})
    assert doc.model_fields_set == {"title", "who"}
    assert list(Doc.model_fields)[:3] == ["title", "count", "ratio"]
    assert Item(name="n").model_fields_set == {"name"}


def test_dump_in_declaration_order_with_nested_models() -> None:
    doc = Doc.model_validate({"title": "t", "items": [{"name": "i"}], "reps": {"lo": 1, "hi": 2},
                              "extra": {"when": datetime.date(2024, 1, 2), "pair": (1, None)}})
    dumped = doc.model_dump(mode="json", exclude_none=True, exclude={"spans", "space"})
    assert list(dumped) == ["title", "count", "ratio", "tags", "items", "reps", "extra"]
    assert dumped["items"] == [{"name": "i", "kind": "a", "on": False}]
    assert dumped["reps"] == {"lo": 1, "hi": 2}
    assert dumped["extra"] == {"when": "2024-01-02", "pair": [1, None]}  # values kept, even None
    assert type(dumped["ratio"]) is float  # the int default of a float field, as pydantic dumps it
    python = doc.model_dump()
    assert python["who"] is None and python["extra"]["pair"] == (1, None)
    assert Doc.model_validate(dumped) == doc.model_copy(update={"extra": dumped["extra"]})


def test_copy_applies_the_update_unvalidated_and_shallow() -> None:
    doc = Doc.model_validate({"title": "t", "tags": ["a"]})
    copy = doc.model_copy(update={"count": "not validated"})
    assert copy.count == "not validated" and doc.count == 3
    assert copy.model_fields_set == {"title", "tags", "count"}
    assert doc.model_fields_set == {"title", "tags"}
    assert copy.tags is doc.tags
    assert copy != doc and doc.model_copy() == doc


def test_instances_pass_through_and_equality_is_by_value() -> None:
    span = Span(lo=1, hi=2)
    assert Doc.model_validate({"title": "t", "reps": span}).reps is span
    assert Span(lo=1, hi=2) == span and Span(lo=1, hi=3) != span
    assert Later() != Span(lo=1, hi=1)
    assert repr(span) == "Span(lo=1, hi=2)"


def test_config_imports_without_pydantic() -> None:
    code = ("import sys, pytest_benchmark_agent.recipe; "
            "assert 'pydantic' not in sys.modules, 'pydantic was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
