"""``benchmark-agent plan DOMAIN|RECIPE "HYPOTHESIS"``: the hypothesis framed (the param it
names varies, the rest are controls), the benchmark file written as ``domain NAME --recipe R``
writes it, gate 1 and preflight run, the challenges printed; nothing executes. Placeholder
provenance values are gate-1 errors naming the field."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from benchhelpers import BenchProject

QUIET = {
    **os.environ,
    "PYTEST_ADDOPTS": "-p no:hypothesispytest -p no:benchmark -p no:cacheprovider",
}


def plan(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["benchmark-agent", "--home", str(folder / "data"), "plan", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        env=QUIET,
    )


def test_plan_from_a_recipe_frames_the_hypothesis_and_runs_nothing(tmp_path: Path) -> None:
    words = "The candidate index variant answers queries faster than the baseline"
    done = plan(tmp_path, "retrieval-index", words)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "treatment:  index.variant = baseline (control) against candidate" in out
    assert "controls:   dataset=synthetic, corpus.seed=1, n_queries=200, k=10" in out
    assert "search[index.variant=candidate-rep0]" in out  # gate 1 and preflight ran
    assert "TREATMENT" in out and "CONTROL" in out
    written = yaml.safe_load((tmp_path / "retrieval-index" / "bench.yaml").read_text())
    assert written["hypothesis"] == words and written["recipe"] == "retrieval-index"
    assert (written["treatment_variable"], written["treatments"]) == (
        "index.variant",
        ["baseline", "candidate"],
    )
    assert (tmp_path / "retrieval-index" / "search.py").is_file()
    assert not (tmp_path / "data" / "runs").exists()


def test_plan_from_a_domain_takes_the_values_the_hypothesis_names(tmp_path: Path) -> None:
    done = plan(
        tmp_path,
        "sqlite_fts5",
        "--name",
        "merge",
        "--hypothesis",
        "Merging the segments with optimize makes MATCH queries faster than none",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    written = yaml.safe_load((tmp_path / "merge" / "bench.yaml").read_text())
    assert written["domain"] == "sqlite_fts5"
    assert (written["treatment_variable"], written["treatments"]) == (
        "fts.merge",
        ["none", "optimize"],
    )
    assert written["params"]["corpus.n_docs"] == 5000  # a control at its default


def test_numbers_in_the_hypothesis_are_the_treatments_of_a_number(tmp_path: Path) -> None:
    done = plan(tmp_path, "retrieval-index", "Searching at k 20 is slower than at 10")
    assert done.returncode == 0, done.stdout + done.stderr
    written = yaml.safe_load((tmp_path / "retrieval-index" / "bench.yaml").read_text())
    assert (written["treatment_variable"], written["treatments"]) == ("k", [10, 20])


def test_placeholder_provenance_is_a_gate_one_error_naming_each_field(tmp_path: Path) -> None:
    done = plan(tmp_path, "llm-eval-only", "Scoring in precision int8 scores lower than bf16")
    assert done.returncode == 2, done.stdout + done.stderr
    for field in ("base_model", "tokenizer", "dataset", "eval_suite"):
        assert f"params.{field}: is a placeholder ('CHANGE-ME')" in done.stdout
    # the frame says which controls are still to set, not that they sit at a default
    assert "to set:     base_model, tokenizer, dataset, eval_suite (no default" in done.stdout
    assert "base_model=CHANGE-ME" not in done.stdout
    assert "a real value looks like 'lm-eval-harness" in done.stdout
    assert not (tmp_path / "data" / "runs").exists()


@pytest.mark.parametrize("value", ["TODO", "", "?", " change-me "])
def test_every_placeholder_spelling_is_refused(project: BenchProject, value: str) -> None:
    from pytest_benchmark_agent.cli.main import main

    assert main(["domain", "r", "--recipe", "retrieval-index", "--dir", str(project.path)]) == 0
    bench = project.path / "r" / "bench.yaml"
    bench.write_text(bench.read_text().replace("dataset: synthetic", f"dataset: '{value}'"))
    out = project.run("--collect-only", str(bench)).stdout.str()
    assert "params.dataset: is a placeholder" in out


def test_unknown_names_and_a_missing_hypothesis_are_clear(tmp_path: Path) -> None:
    unknown = plan(tmp_path, "retrieval-idx", "x is faster")
    assert unknown.returncode != 0 and "Traceback" not in unknown.stderr
    assert "retrieval-idx is no benchmark file, recipe or domain" in unknown.stderr
    assert "retrieval-index" in unknown.stderr  # the recipes it could have been
    bare = plan(tmp_path, "sqlite_fts5")
    assert "give the hypothesis" in bare.stderr and "Traceback" not in bare.stderr
    vague = plan(tmp_path, "sqlite_fts5", "it gets faster")
    assert "names none of domain sqlite_fts5's params" in vague.stderr
