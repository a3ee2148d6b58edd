"""The benchmark file's models: unknown keys, wrong types and bad YAML get readable errors,
every problem at once; the JSON Schema generated from them is the one shipped, and the examples
pass it."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from benchhelpers import simple_bench
from pydantic import ValidationError

from pytest_benchmark_agent.cli import main as cli
from pytest_benchmark_agent.config.metric import MetricSpec
from pytest_benchmark_agent.config.models import (
    BenchmarkConfig,
    ReplicateRange,
    json_schema,
    load_config,
)
from pytest_benchmark_agent.config.stage import Stage
from pytest_benchmark_agent.config.tuning import Range, TuneSettings
from pytest_benchmark_agent.domains.load import load_benchmark
from pytest_benchmark_agent.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "docs" / "benchmark" / "bench.schema.json"
EXAMPLES = ROOT / "examples"


def write(tmp_path: Path, document: dict | str) -> Path:
    path = tmp_path / "bench.yaml"
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    return path


def problems(path: Path) -> str:
    with pytest.raises(ConfigError) as excinfo:
        load_config(path)
    return str(excinfo.value)


def test_valid_file_loads_with_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, simple_bench()))
    assert config.domain == "command"
    assert config.metrics["score"].noise_threshold == 0.01
    assert config.metrics["score"].min_replicates == 5
    assert config.stages[0].kind == "prep"


def test_unknown_top_level_key_is_an_error_with_a_suggestion(tmp_path: Path) -> None:
    document = simple_bench()
    document["replicats"] = 3
    text = problems(write(tmp_path, document))
    assert str(tmp_path / "bench.yaml") in text
    assert "replicats: is not a known key" in text
    assert "did you mean 'replicates'?" in text


def test_unknown_stage_key_names_the_stage(tmp_path: Path) -> None:
    document = simple_bench()
    document["stages"][1]["metrics_from"]["feilds"] = ["score"]
    text = problems(write(tmp_path, document))
    assert "stages[1] (measure).metrics_from.feilds: is not a known key" in text
    assert "did you mean 'fields'?" in text


def test_wrong_literal_shows_what_is_accepted(tmp_path: Path) -> None:
    document = simple_bench()
    document["stages"][0]["kind"] = "mesure"
    document["metrics"]["score"]["direction"] = "up"
    text = problems(write(tmp_path, document))
    assert "stages[0] (build).kind: Input should be 'prep' or 'measure'" in text
    assert "metrics.score.direction: Input should be 'lower', 'higher' or 'equal'" in text


def test_replicate_range_error_is_precise(tmp_path: Path) -> None:
    text = problems(write(tmp_path, simple_bench(replicates={"min": 5})))
    assert "replicates.max: is required" in text
    assert "valid integer" not in text  # the union's other branch is not shown as noise


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    text = problems(write(tmp_path, "name: x\nparams: [unclosed\n"))
    assert "not valid YAML" in text and "line" in text


def test_not_a_mapping(tmp_path: Path) -> None:
    assert "must be a YAML mapping" in problems(write(tmp_path, "- a\n- b\n"))


def test_name_defaults_to_the_file_name(tmp_path: Path) -> None:
    document = simple_bench()
    del document["name"]
    path = tmp_path / "fts.bench.yaml"
    path.write_text(yaml.safe_dump(document))
    assert load_config(path).name == "fts"


def test_overrides_replace_declared_params_only(tmp_path: Path) -> None:
    path = write(tmp_path, simple_bench())
    assert load_config(path, {"size": 7}).params["size"] == 7
    with pytest.raises(ConfigError, match="params.sise: is set with --bench-set but not declared"):
        load_config(path, {"sise": 7})


# -- the models: lax where YAML users rely on it, never a bool for a number ----------------------


def valid(**fields: Any) -> BenchmarkConfig:
    return BenchmarkConfig.model_validate(simple_bench(**fields))


def errors(document: dict[str, Any], model: type = BenchmarkConfig) -> list[tuple[tuple, str]]:
    """(location, kind) of every problem pydantic finds in ``document``."""
    with pytest.raises(ValidationError) as excinfo:
        model.model_validate(document)
    return [(error["loc"], error["type"]) for error in excinfo.value.errors()]


@pytest.mark.parametrize(("given", "expected"), [("5", 5), (" 7 ", 7), ("7.0", 7), (5.0, 5)])
def test_an_int_takes_integral_numbers_and_text(given: Any, expected: int) -> None:
    value = MetricSpec.model_validate({"min_replicates": given}).min_replicates
    assert value == expected and type(value) is int


@pytest.mark.parametrize(
    ("given", "kind"),
    [
        (5.5, "int_from_float"),
        ("x", "int_parsing"),
        (True, "int_type"),
        (None, "int_type"),
        (float("inf"), "finite_number"),
    ],
)
def test_an_int_refuses_the_rest(given: Any, kind: str) -> None:
    assert errors({"min_replicates": given}, MetricSpec) == [(("min_replicates",), kind)]


def test_a_float_takes_ints_and_text_but_not_booleans() -> None:
    spec = MetricSpec.model_validate({"noise_threshold": 2, "floor": "1.5"})
    assert type(spec.noise_threshold) is float and spec.floor == 1.5
    assert errors({"noise_threshold": True, "floor": "fast"}, MetricSpec) == [
        (("floor",), "float_parsing"),
        (("noise_threshold",), "float_type"),
    ]
    assert errors({"seeds": [1, False], "name": "n"}) == [(("seeds", 1), "int_type")]


@pytest.mark.parametrize(
    ("given", "expected"), [("yes", True), ("Off", False), (1, True), (0.0, False), (True, True)]
)
def test_bool_coercions(given: Any, expected: bool) -> None:
    assert MetricSpec.model_validate({"primary": given}).primary is expected


def test_text_and_bool_refusals() -> None:
    assert errors({"name": 5, "kind": "prep", "cmd": 3}, Stage) == [
        (("name",), "string_type"),
        (("cmd",), "string_type"),
    ]
    assert errors({"primary": "maybe"}, MetricSpec) == [(("primary",), "bool_parsing")]


def test_every_problem_is_found_at_once_with_its_location(tmp_path: Path) -> None:
    document = simple_bench(replicats=3, seeds=[1, "x"], budget={"trials": 0})
    document["stages"][0].update(kind="mesure", mem_mb=0, gpus=True)
    document["stages"][1]["metrics_from"]["feilds"] = ["score"]
    document["metrics"]["score"]["noise_threshold"] = -1
    text = problems(write(tmp_path, document))
    assert "8 problem(s)" in text
    for expected in (
        "seeds[1]: Input should be a valid integer, unable to parse string as an integer (got 'x')",
        "stages[0] (build).kind: Input should be 'prep' or 'measure' (got 'mesure')",
        "stages[0] (build).mem_mb: Input should be greater than 0 (got 0)",
        "stages[0] (build).gpus: Input should be a valid integer, not a boolean (got True)",
        "stages[1] (measure).metrics_from.feilds: is not a known key. Fix: did you mean "
        "'fields'? accepted keys here: fields, file, stdout.",
        "metrics.score.noise_threshold: Input should be greater than or equal to 0",
        "budget.trials: Input should be greater than or equal to 1 (got 0)",
        "replicats: is not a known key. Fix: did you mean 'replicates'?",
    ):
        assert expected in text
    assert "CONTRACT.md" not in text
    assert "Fix: see docs/benchmark/FORMAT.md for accepted values." in text


def test_an_unknown_key_lists_the_keys_of_the_model_it_is_in(tmp_path: Path) -> None:
    """A manifest entry named like a top-level field ('budget') is still a manifest entry."""
    text = problems(write(tmp_path, simple_bench(manifest={"budget": {"why": "w", "bogus": 1}})))
    assert (
        "manifest.budget.bogus: is not a known key. Fix: accepted keys here: default, "
        "example, must_match, secret, why." in text
    )


def test_a_key_that_is_not_text_says_quote_it(tmp_path: Path) -> None:
    text = problems(write(tmp_path, simple_bench(params={1: "a", "size": 3})))
    assert "params.1: is a key here and should be text. Fix: quote it ('1')." in text


def test_a_rule_across_fields_runs_once_the_fields_are_valid(tmp_path: Path) -> None:
    text = problems(write(tmp_path, simple_bench(replicates={"min": 3, "max": 2})))
    assert "replicates: max (2) must be >= min (3)" in text
    assert errors(simple_bench(replicates={"min": 0, "max": -1})) == [
        (("replicates", "range", "min"), "greater_than_equal"),
        (("replicates", "range", "max"), "greater_than_equal"),
    ]  # and no "max must be >= min"
    document = simple_bench()
    document["stages"][1]["metrics_from"] = {"stdout": True, "file": "m.json"}
    assert "metrics_from: give either stdout: true or file: PATH, not both" in problems(
        write(tmp_path, document)
    )


def test_replicates_is_a_count_or_a_range(tmp_path: Path) -> None:
    assert valid(replicates="4").replicates == 4
    config = valid(replicates={"min": 2, "max": 6})
    assert config.replicates == ReplicateRange(min=2, max=6)
    assert (config.min_replicates, config.max_replicates) == (2, 6)
    assert "replicates: Input should be greater than or equal to 1 (got 0)" in problems(
        write(tmp_path, simple_bench(replicates=0))
    )
    said = "replicates: Input should be a valid integer or a mapping of min, max, until (got [1])"
    assert said in problems(write(tmp_path, simple_bench(replicates=[1])))
    assert "replicates: Input should be a valid integer, not a boolean" in problems(
        write(tmp_path, simple_bench(replicates=True))
    )


def test_treatment_variable_is_a_name_or_a_list(tmp_path: Path) -> None:
    assert valid(treatment_variable="mode").treatment_variable == "mode"
    assert valid(treatment_variable=("mode", "size")).treatment_variable == ["mode", "size"]
    assert valid(treatment_variable=None).treatment_variable is None
    text = problems(write(tmp_path, simple_bench(treatment_variable=["mode", 1])))
    assert "1 problem(s)" in text
    assert "treatment_variable[1]: Input should be a valid string (got 1)" in text
    assert "treatment_variable: Input should be a valid string or a list (got 3)" in problems(
        write(tmp_path, simple_bench(treatment_variable=3))
    )


def test_search_space_dimensions_are_values_or_ranges(tmp_path: Path) -> None:
    config = valid(search_space={"a": [1, "x"], "b": {"min": 1, "max": 3, "steps": 3}})
    assert config.search_space == {"a": [1, "x"], "b": Range(min=1, max=3, steps=3)}
    text = problems(
        write(
            tmp_path,
            simple_bench(
                search_space={
                    "c": {"min": 1, "max": 2},
                    "d": 5,
                    "e": {"min": 0, "max": 1, "steps": 2, "scael": "log"},
                }
            ),
        )
    )
    assert "3 problem(s)" in text
    assert "search_space.c.steps: is required." in text
    assert "search_space.d: Input should be a list or a mapping of min, max, steps, scale" in text
    assert "search_space.e.scael: is not a known key. Fix: did you mean 'scale'?" in text


def test_containers_and_models_refuse_the_wrong_shape() -> None:
    assert errors(simple_bench(code="a.py")) == [(("code",), "list_type")]
    assert errors(simple_bench(metrics=[])) == [(("metrics",), "dict_type")]
    assert errors(simple_bench(stages=[5])) == [(("stages", 0), "model_type")]
    assert errors(["not", "a", "mapping"]) == [((), "model_type")]


def test_defaults_fresh_factories_and_the_fields_given() -> None:
    first, second = valid(), valid()
    assert (first.domain, first.resources.gpus, first.budget.trials, first.tune) == (
        "command",
        0,
        None,
        TuneSettings(max_noncomparable_streak=3),
    )
    first.code.append("x.py")
    assert second.code == []
    assert first.model_fields_set == set(simple_bench())  # what recipes and domains merge over
    assert list(BenchmarkConfig.model_fields)[:3] == ["domain", "recipe", "name"]


def test_a_dumped_config_validates_back_to_itself() -> None:
    """Records keep the config as JSON and rebuild it (baselines): the round trip is exact."""
    config = valid(
        replicates={"min": 2, "max": 4},
        treatment_variable=["mode"],
        search_space={"size": {"min": 1, "max": 9, "steps": 3, "scale": "log"}},
        params={"mode": "a", "size": 3, "when": datetime.date(2024, 1, 2)},
    )
    dumped = config.model_dump(mode="json", exclude_none=True)
    assert dumped["params"]["when"] == "2024-01-02"
    assert type(dumped["resources"]["vram_mb"]) is float  # the 0 default of a float field
    assert "recipe" not in dumped and list(dumped)[:2] == ["domain", "name"]
    again = BenchmarkConfig.model_validate(dumped)
    assert again == config.model_copy(update={"params": dumped["params"]})
    assert BenchmarkConfig.model_validate(again) is again  # an instance passes through


def test_the_plugin_imports_without_pydantic() -> None:
    """pydantic (~0.1 s) loads with the first benchmark file, never with the plugin."""
    code = (
        "import sys, pytest_benchmark_agent.plugin; "
        "assert 'pydantic' not in sys.modules, 'pydantic was imported'; "
        "assert 'pytest_benchmark_agent.config.models' not in sys.modules, "
        "'config was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the JSON Schema, for editors -----------------------------------------------------------


def test_the_shipped_schema_is_the_generated_one(tmp_path: Path) -> None:
    assert json.loads(SCHEMA.read_text()) == json_schema(), (
        "regenerate it: benchmark-agent schema -o docs/benchmark/bench.schema.json"
    )
    assert cli.main(["schema", "-o", str(tmp_path / "s.json")]) == 0
    assert (tmp_path / "s.json").read_text() == SCHEMA.read_text()
    schema = json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert "name" not in schema.get("required", [])  # a file is named after itself by default
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == set(BenchmarkConfig.model_fields)


def test_every_example_names_the_schema_and_loads() -> None:
    examples = sorted(EXAMPLES.glob("*/bench*.yaml"))
    assert examples
    for path in examples:
        first = path.read_text().splitlines()[0]
        assert first == "# yaml-language-server: $schema=../../docs/benchmark/bench.schema.json"
        assert (path.parent / first.split("$schema=")[1]).resolve() == SCHEMA.resolve()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an example reads as written: nothing retyped
            assert load_benchmark(path).name


def test_every_example_validates_against_the_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    for path in sorted(EXAMPLES.glob("*/bench*.yaml")):
        assert [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))] == []
    document = simple_bench(replicats=3)
    del document["name"]
    assert [e.validator for e in validator.iter_errors(document)] == ["additionalProperties"]


def test_a_threshold_may_be_written_as_a_percentage(tmp_path) -> None:
    path = tmp_path / "bench.yaml"
    path.write_text(
        'name: p\nmetrics:\n  t: {fail_threshold: "5%", noise_threshold: 2.5%,'
        " reproduce_tolerance: 0.1}\n"
    )
    spec = load_config(path).metrics["t"]
    assert (spec.fail_threshold, spec.noise_threshold, spec.reproduce_tolerance) == (
        pytest.approx(0.05),
        pytest.approx(0.025),
        0.1,
    )


def test_a_malformed_percentage_names_the_field_and_both_forms(tmp_path) -> None:
    path = tmp_path / "bench.yaml"
    path.write_text('name: p\nmetrics:\n  t: {fail_threshold: "five%"}\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "metrics.t.fail_threshold" in message and "'5%'" in message


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("warmup", 2, "'warmup' belongs on a stage, not at the top level"),
        ("counters", ["instructions"], "'counters' belongs on a stage"),
        ("fail_threshold", "5%", "'fail_threshold' belongs on a metric: metrics: NAME:"),
        ("replicatse", 3, "did you mean 'replicates'?"),  # a typo keeps its close match
    ],
)
def test_a_misplaced_top_level_key_says_where_it_belongs(
    tmp_path: Path, key: str, value: object, said: str
) -> None:
    path = tmp_path / "bench.yaml"
    path.write_text(yaml.safe_dump({**simple_bench(), key: value}))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert f"{key}: is not a known key. Fix: {said}" in str(caught.value)
    assert str(path) in str(caught.value)
