"""Recipes: YAML templates of common pipelines (``pytest_benchmark_agent/recipes/*.yaml``, package
data, so a checkout and an installed wheel find the same files).

A recipe pre-fills stages (with ``resources`` for GPU stages), metric specs, resources and a
provenance **manifest**: the params a fair comparison depends on, each with its default and why.
A benchmark file with ``recipe: NAME`` (or ``recipe: path/to/recipe.yaml``, relative to the
file) inherits all of it and may override:

- a file stage with a recipe stage's name overrides the fields it sets (``kind`` is restated);
  when it sets ``cmd`` but not ``inputs``, the recipe's inputs (the recipe command's scripts)
  are dropped with it; stages with new names are appended;
- metric specs and resources override field by field; manifest entries are added or replaced;
- ``replicates`` is the recipe's unless the file sets it.

Manifest params are never filled in: gate 1 requires the file to declare each (even at its
default) and says why, so a run's record always states them. A ``must_match`` param (the ML
recipes' ``eval_suite``) can never be what varies; across runs, a baseline or comparison that
differs in any param but the treatment variable is refused (``baseline.py``), so runs of
different evaluation suites are never compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from pytest_benchmark_agent.config.fields import FileModel
from pytest_benchmark_agent.config.metric import MetricSpec
from pytest_benchmark_agent.config.models import (
    BenchmarkConfig,
    ManifestEntry,
    Replicates,
)
from pytest_benchmark_agent.config.resources import Resources
from pytest_benchmark_agent.config.safe_yaml import read_yaml_input
from pytest_benchmark_agent.config.stage import Stage
from pytest_benchmark_agent.errors import ConfigError

RECIPES_DIR = Path(__file__).resolve().parents[1] / "recipes"


class Recipe(FileModel):
    """One recipe file."""

    description: str
    #: Training recipes replicate over seeds by default (their manifest requires ``seeds``).
    training: bool = False
    manifest: dict[str, ManifestEntry] = Field(default_factory=dict)
    stages: list[Stage]
    #: What each stage's command must do (shown by the scaffold in the scripts it writes).
    stage_notes: dict[str, str] = Field(default_factory=dict)
    metrics: dict[str, MetricSpec] = Field(default_factory=dict)
    resources: Resources = Field(default_factory=Resources)
    replicates: Replicates | None = None
    #: Fields a scaffolded benchmark file starts from (hypothesis, treatment_variable, ...).
    example: dict[str, Any] = Field(default_factory=dict)


#: What a scaffold writes for a manifest param with no default: gate 1 names it until replaced.
SCAFFOLD_PLACEHOLDER = "CHANGE-ME"
#: Values left to mean "fill this in" (compared stripped and case-folded): never provenance.
PLACEHOLDER_VALUES = frozenset({"", "?", "??", "change-me", "changeme", "todo", "tbd", "fixme"})


def placeholder_problems(config: BenchmarkConfig) -> list[tuple[str, str, str]]:
    """Gate 1's refusal of a manifest param declared with a placeholder value (``CHANGE-ME``,
    ``TODO``, empty, ``?``): the key is there, but the record would state no provenance."""
    owner = f"recipe '{config.recipe}'" if config.recipe else f"domain '{config.domain}'"
    problems = []
    for name, entry in config.manifest.items():
        if name == "seeds" or name not in config.params:
            continue
        value = config.params[name]
        if not (value is None or (isinstance(value, str) and _is_placeholder(value))):
            continue
        looks = (
            f"a real value looks like {entry.example!r}"
            if entry.example is not None
            else f"e.g. its default {entry.default!r}"
            if entry.default is not None
            else "name the one you use"
        )
        problems.append(
            (
                f"params.{name}",
                f"is a placeholder ({'empty' if value is None else repr(value)}), not a value; "
                f"the manifest of {owner} requires it: {entry.why.rstrip('.')}.",
                f"give the value you use ({looks}).",
            )
        )
    return problems


def params_to_set(manifest: Mapping[str, ManifestEntry]) -> list[str]:
    """The manifest params a scaffold cannot fill (no default): the user names each value."""
    return [n for n, e in manifest.items() if n != "seeds" and e.default is None]


def _is_placeholder(value: str) -> bool:
    return value.strip().casefold() in PLACEHOLDER_VALUES


def available_recipes() -> list[str]:
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def recipe_path(name: str, base: Path) -> Path:
    """The file ``recipe: name`` stands for: a path ending in .yaml, else the packaged
    ``recipes/NAME.yaml``."""
    if name.endswith((".yaml", ".yml")):
        return (base / name).resolve()
    return RECIPES_DIR / f"{name}.yaml"


def load_recipe(name: str, path: Path) -> Recipe:
    """The recipe ``name`` used by the benchmark file at ``path``; ConfigError when unusable."""
    file = recipe_path(name, path.parent)
    if not file.is_file():
        known = ", ".join(available_recipes()) or "none"
        raise ConfigError(
            path,
            [
                (
                    "recipe",
                    f"'{name}' is not a recipe (no {file}).",
                    f"use one of: {known}, or a path to a recipe .yaml file.",
                )
            ],
        )
    try:
        return Recipe.model_validate(read_yaml_input(file))  # a regular file, YAML refusals
    except ValidationError as exc:
        raise ConfigError(
            path,
            [("recipe", f"the recipe file {file} is not valid ({exc}).", "fix the recipe file.")],
        ) from None


def apply_recipe(config: BenchmarkConfig, path: Path) -> BenchmarkConfig:
    """``config`` with its recipe's stages, manifest, metrics and resources merged in."""
    if not config.recipe:
        return config
    recipe = load_recipe(config.recipe, path)
    update: dict[str, Any] = {
        "stages": merge_stages(recipe.stages, config.stages),
        "manifest": {**recipe.manifest, **config.manifest},
        "metrics": merge_metrics(recipe.metrics, config),
        "resources": merge_resources(recipe.resources, config),
    }
    if recipe.replicates is not None and "replicates" not in config.model_fields_set:
        update["replicates"] = recipe.replicates
    return config.model_copy(update=update)


def merge_stages(inherited: list[Stage], own: list[Stage]) -> list[Stage]:
    """Recipe stages overridden field by field by same-named file stages, then the new ones."""
    by_name = {stage.name: stage for stage in own}
    merged = []
    for stage in inherited:
        override = by_name.pop(stage.name, None)
        if override is None:
            merged.append(stage)
            continue
        fields = {f: getattr(override, f) for f in override.model_fields_set if f != "name"}
        if "cmd" in fields and "inputs" not in fields:
            fields["inputs"] = []
        merged.append(stage.model_copy(update=fields))
    return merged + list(by_name.values())


def merge_metrics(
    defaults: Mapping[str, MetricSpec],
    config: BenchmarkConfig,
) -> dict[str, MetricSpec]:
    """Default metric specs (a recipe's or a Domain's) with the file's own: the fields a file
    sets override the default's."""
    merged = dict(defaults)
    for name, spec in config.metrics.items():
        base = merged.get(name)
        merged[name] = (
            spec
            if base is None
            else base.model_copy(update={f: getattr(spec, f) for f in spec.model_fields_set})
        )
    return merged


def merge_resources(defaults: Resources, config: BenchmarkConfig) -> Resources:
    """Default resources with the fields the file's ``resources:`` sets overriding them."""
    own = config.resources
    return defaults.model_copy(update={f: getattr(own, f) for f in own.model_fields_set})
