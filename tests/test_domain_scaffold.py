"""`benchmark-agent domain NAME [--recipe R]`: what it writes plans at once (once the params
without a default are given: until then gate 1 names each placeholder), and the Python Domain
skeleton's own test passes."""

from __future__ import annotations

import subprocess
import sys

import pytest
from benchhelpers import BenchProject
from nvml_double import FakeDevice, FakeNvml

from pytest_benchmark_agent.cli.main import main
from pytest_benchmark_agent.config.recipe import available_recipes, load_recipe
from pytest_benchmark_agent.guards import gpu as nvml

GPU_RECIPES = ("llm-finetune-eval", "llm-eval-only")


@pytest.mark.parametrize("recipe", available_recipes())
def test_recipe_scaffold_passes_collect_only(
    project: BenchProject, recipe: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["domain", "mine", "--recipe", recipe, "--dir", str(project.path)]) == 0
    out = capsys.readouterr().out
    assert "wrote" in out
    bench = project.path / "mine" / "bench.yaml"
    assert f"recipe: {recipe}" in bench.read_text()
    unset = [n for n, e in load_recipe(recipe, bench).manifest.items() if e.default is None]
    told = f"replace CHANGE-ME with the value you use for {', '.join(unset)}"
    assert (told in out) == bool(unset), out  # the next step names what the user must fill in
    if unset:  # a param without a default is a placeholder until given, then it plans
        refused = project.run("--collect-only", "-q", str(bench)).stdout.str()
        assert all(f"params.{name}: is a placeholder" in refused for name in unset), refused
        text = bench.read_text()
        for name in unset:
            text = text.replace(f"  {name}: CHANGE-ME", f"  {name}: a-real-{name}")
        bench.write_text(text)
    if recipe in GPU_RECIPES:  # preflight asks NVML for the GPU stages: a double answers here
        with nvml.use_backend(FakeNvml([FakeDevice()])):
            result = project.run("--collect-only", "-q", str(bench))
    else:
        result = project.run("--collect-only", "-q", str(bench))
    assert result.ret == 0, result.stdout.str()
    assert "tests collected" in result.stdout.str()
    assert "RetypedValueWarning" not in result.stdout.str()  # reads back as the recipe wrote it


def test_recipe_stage_scripts_take_the_flags_their_commands_pass(project: BenchProject) -> None:
    main(["domain", "ret", "--recipe", "retrieval-index", "--dir", str(project.path)])
    script = project.path / "ret" / "search.py"
    done = subprocess.run(
        [sys.executable, str(script), "--corpus", "c", "--index", "i", "--k", "10"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert "stage search is not written yet" in done.stderr
    assert "must print p50_ms=<number>, p95_ms=<number>, recall_at_k=<number>" in done.stderr


def test_python_domain_skeleton_collects_and_its_test_passes(project: BenchProject) -> None:
    assert main(["domain", "sorting", "--dir", str(project.path)]) == 0
    folder = project.path / "sorting"
    assert sorted(p.name for p in folder.iterdir()) == [
        "bench.yaml",
        "sorting_domain.py",
        "test_sorting.py",
    ]
    assert project.run("--collect-only", "-q", str(folder / "bench.yaml")).ret == 0
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(folder / "test_sorting.py"),
        ],
        capture_output=True,
        text=True,
        cwd=project.path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_scaffold_refuses_to_overwrite_and_bad_names(project: BenchProject) -> None:
    main(["domain", "twice", "--dir", str(project.path)])
    with pytest.raises(SystemExit, match="already holds"):
        main(["domain", "twice", "--dir", str(project.path)])
    with pytest.raises(SystemExit, match="not a usable name"):
        main(["domain", "../escape", "--dir", str(project.path)])
    with pytest.raises(SystemExit, match="no recipe 'nope'"):
        main(["domain", "x", "--recipe", "nope", "--dir", str(project.path)])
