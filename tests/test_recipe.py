"""Recipes: valid templates, inheritance with overrides, the manifest gate, ML fairness."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from benchhelpers import BenchProject

from pytest_benchmark_agent.config.recipe import RECIPES_DIR, available_recipes, load_recipe
from pytest_benchmark_agent.domains.load import load_benchmark
from pytest_benchmark_agent.errors import ConfigError

ML_RECIPES = ("embedding-train-eval", "llm-finetune-eval", "llm-eval-only")
ML_REQUIRED = {"base_model", "dataset", "tokenizer", "precision", "eval_suite"}


def test_the_four_recipes_exist_and_validate(tmp_path: Path) -> None:
    assert available_recipes() == [
        "embedding-train-eval",
        "llm-eval-only",
        "llm-finetune-eval",
        "retrieval-index",
    ]
    for name in available_recipes():
        recipe = load_recipe(name, tmp_path / "bench.yaml")
        used = {n for stage in recipe.stages for n in _placeholders(stage.cmd or "")}
        artifacts = {a for stage in recipe.stages for a in stage.produces}
        params = used - artifacts - {"out", "seed"}
        assert params <= set(recipe.manifest), (name, params - set(recipe.manifest))
        assert set(recipe.stage_notes) == {stage.name for stage in recipe.stages}


@pytest.mark.parametrize("name", ML_RECIPES)
def test_ml_manifests_require_provenance_and_one_eval_suite(name: str, tmp_path: Path) -> None:
    recipe = load_recipe(name, tmp_path / "bench.yaml")
    assert ML_REQUIRED <= set(recipe.manifest)
    assert recipe.manifest["eval_suite"].must_match
    if recipe.training:
        assert recipe.manifest["seeds"].default == [1, 2, 3]
    else:
        assert "eval.seed" in recipe.manifest
    gpu_stages = [s.name for s in recipe.stages if s.gpus]
    assert (name == "embedding-train-eval") == (not gpu_stages)


def _placeholders(text: str) -> set[str]:
    from pytest_benchmark_agent.util.placeholders import names_in

    return set(names_in(text))


def _write(folder: Path, document: dict, name: str = "bench.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


RETRIEVAL_PARAMS = {
    "dataset": "synthetic",
    "corpus.seed": 1,
    "n_queries": 50,
    "k": 10,
    "index.variant": "baseline",
}


def test_a_file_inherits_and_overrides_stages_metrics_and_resources(tmp_path: Path) -> None:
    (tmp_path / "corpus.py").write_text("")
    (tmp_path / "index.py").write_text("")
    path = _write(
        tmp_path,
        {
            "recipe": "retrieval-index",
            "name": "r",
            "params": RETRIEVAL_PARAMS,
            "treatment_variable": "index.variant",
            "treatments": ["baseline", "hnsw"],
            "stages": [
                {"name": "search", "kind": "measure", "cmd": "python mine.py {index} {k}"},
                {
                    "name": "report",
                    "kind": "measure",
                    "cmd": "echo x=1",
                    "metrics_from": {"stdout": True, "fields": ["x"]},
                },
            ],
            "metrics": {"recall_at_k": {"floor": 0.9}, "x": {"direction": "lower"}},
            "resources": {"mem_mb": 512},
        },
    )
    config = load_benchmark(path)
    stages = {s.name: s for s in config.stages}
    assert list(stages) == ["corpus", "index", "search", "report"]
    assert stages["search"].cmd == "python mine.py {index} {k}"
    assert stages["search"].inputs == []  # the recipe's script went with its command
    assert stages["search"].needs == ["corpus", "index"]
    assert stages["search"].metrics_from.fields == ["p50_ms", "p95_ms", "recall_at_k"]
    assert stages["index"].inputs == ["index.py"]
    recall = config.metrics["recall_at_k"]
    assert (recall.floor, recall.guard, recall.direction) == (0.9, True, "higher")
    assert config.resources.mem_mb == 512 and config.replicates == 7
    assert config.manifest["k"].default == 10


def test_missing_manifest_params_are_collection_errors_with_why_and_default(
    project: BenchProject,
) -> None:
    project.write("data.py", "")
    project.write("train.py", "")
    project.write("eval.py", "")
    project.bench(
        {
            "recipe": "embedding-train-eval",
            "name": "emb",
            "params": {"train.learning_rate": 2e-5},
            "treatment_variable": "train.learning_rate",
            "treatments": [2e-5, 1e-4],
        }
    )
    result = project.run("--collect-only")
    assert result.ret == 2
    out = result.stdout.str()
    assert (
        "params.base_model: is required by the manifest of recipe 'embedding-train-eval': "
        "the model fine-tuned; another base model is another experiment; it has no "
        "default: name the one you use."
    ) in out
    assert "seeds: is required by the manifest" in out and "declare seeds: [1, 2, 3]" in out
    assert "e.g. precision: fp32" in out
    assert "uses {seed}" not in out  # the missing seeds are explained once, by the manifest


def _ml_document(**overrides) -> dict:
    document = {
        "recipe": "embedding-train-eval",
        "name": "emb",
        "params": {
            "base_model": "minilm",
            "tokenizer": "minilm",
            "dataset": "gen-v1",
            "precision": "fp32",
            "eval_suite": "recall@10-v1",
            "train.steps": 2,
            "train.learning_rate": 2e-5,
            "train.batch_size": 8,
        },
        "treatment_variable": "train.learning_rate",
        "treatments": [2e-5, 1e-4],
        "seeds": [1, 2, 3],
    }
    document.update(overrides)
    return document


def test_a_complete_ml_file_plans_one_trial_per_treatment_and_seed(project: BenchProject) -> None:
    for script in ("data.py", "train.py", "eval.py"):
        project.write(script, "")
    project.bench(_ml_document())
    result = project.run("--collect-only", "-q")
    assert result.ret == 0, result.stdout.str()
    assert "6 tests collected" in result.stdout.str()


def test_eval_suite_can_never_be_what_varies(project: BenchProject) -> None:
    for script in ("data.py", "train.py", "eval.py"):
        project.write(script, "")
    document = _ml_document(treatment_variable="eval_suite", treatments=["a-v1", "b-v1"])
    document["params"]["eval_suite"] = "a-v1"
    project.bench(document)
    out = project.run("--collect-only").stdout.str()
    assert (
        "manifest.eval_suite: must be the same in every compared run (scores from "
        "different evaluation suites measure different things), so it cannot be what "
        "varies."
    ) in out


def test_recipe_by_path_and_unknown_recipe(tmp_path: Path) -> None:
    recipe = yaml.safe_load((RECIPES_DIR / "retrieval-index.yaml").read_text())
    recipe["manifest"]["k"]["default"] = 5
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(recipe))
    path = _write(
        tmp_path,
        {
            "recipe": "mine.yaml",
            "name": "r",
            "params": RETRIEVAL_PARAMS,
            "treatment_variable": "index.variant",
            "treatments": ["baseline", "b"],
        },
    )
    assert load_benchmark(path).manifest["k"].default == 5
    path = _write(tmp_path, {"recipe": "retrieval-idx", "name": "r"})
    with pytest.raises(ConfigError, match="'retrieval-idx' is not a recipe"):
        load_benchmark(path)


def test_a_recipe_and_a_python_domain_do_not_combine(tmp_path: Path) -> None:
    path = _write(tmp_path, {"recipe": "retrieval-index", "domain": "sqlite_fts5", "name": "r"})
    with pytest.raises(ConfigError, match="a recipe supplies command stages"):
        load_benchmark(path)
