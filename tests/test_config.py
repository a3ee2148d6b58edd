"""The benchmark file's models: unknown keys, wrong types and bad YAML get readable errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from benchhelpers import simple_bench

from pytest_benchmark_agent.config import load_config
from pytest_benchmark_agent.errors import ConfigError


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
