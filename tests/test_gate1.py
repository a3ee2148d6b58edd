"""Gate 1 at collection time: every fairness or structure problem is a collection error (exit 2)
whose message names the file, the field and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from benchhelpers import BenchProject, simple_bench

from pytest_benchmark_agent.config import gate1
from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.errors import ConfigError
from pytest_benchmark_agent.judge.review import latest_reliable_values


def collect_error(project: BenchProject, document: dict) -> str:
    project.bench(document)
    result = project.run("--collect-only")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # 2: collection errors
    text = result.stdout.str()
    assert "ERROR collecting bench.yaml" in text
    assert str(project.path / "bench.yaml") in text
    return text


def test_two_varying_parameters(project: BenchProject) -> None:
    text = collect_error(project, simple_bench(treatment_variable=["mode", "size"]))
    assert "treatment_variable: more than one parameter varies (mode, size)" in text
    assert "vary exactly one parameter" in text


def test_mapping_treatments_varying_two_parameters(project: BenchProject) -> None:
    document = simple_bench(treatments=[{"mode": "a"}, {"mode": "b", "size": 9}])
    text = collect_error(project, document)
    assert "more than one parameter varies (mode, size)" in text


def test_treatment_variable_not_declared(project: BenchProject) -> None:
    text = collect_error(project, simple_bench(treatment_variable="mdoe"))
    assert "treatment_variable: 'mdoe' is not a declared param (did you mean 'mode'?)" in text


def test_declared_value_must_be_the_control(project: BenchProject) -> None:
    text = collect_error(project, simple_bench(treatments=["b", "a"]))
    assert "params.mode: is 'a' but the control (the first treatment) is 'b'" in text


def test_treatment_variable_used_by_no_stage(project: BenchProject) -> None:
    document = simple_bench()
    document["stages"][1]["cmd"] = "echo score=1"
    text = collect_error(project, document)
    assert "'mode' is used by no stage, so the treatments cannot differ" in text


def test_unknown_placeholder(project: BenchProject) -> None:
    document = simple_bench()
    document["stages"][1]["cmd"] += " {sizee}"
    text = collect_error(project, document)
    assert "stages[1] (measure).cmd: unknown placeholder {sizee} (did you mean '{size}'?)" in text


def test_artifact_of_a_stage_not_needed(project: BenchProject) -> None:
    document = simple_bench()
    document["stages"][1]["needs"] = []
    text = collect_error(project, document)
    assert "uses artifact {data} of stage 'build', which this stage does not need" in text
    assert "add 'build' to needs" in text


@pytest.mark.parametrize(
    ("stage", "field", "value", "what"),
    [
        (1, "wdir", "{out}", "{out}, the trial's own folder,"),
        (1, "inputs", ["{out}/x"], "{out}, the trial's own folder,"),
        (1, "wdir", "{data}", "{data}, an artifact,"),
        (1, "inputs", ["{data}"], "{data}, an artifact,"),
        (0, "wdir", "{out}", "{out}, the trial's own folder,"),
    ],
)
def test_a_run_time_path_in_wdir_or_inputs_is_refused_by_name(
    project: BenchProject, stage: int, field: str, value: object, what: str
) -> None:
    """They are read when the session is planned, before any stage made its folders: without
    this check the session died with a KeyError (an INTERNALERROR for inputs)."""
    document = simple_bench()
    document["stages"][stage][field] = value
    text = collect_error(project, document)
    name = document["stages"][stage]["name"]
    where = f"stages[{stage}] ({name}).{field}" + ("[0]" if field == "inputs" else "")
    assert f"{where}: uses {what} which exists only once the stage runs" in text
    assert "KeyError" not in text and "Traceback" not in text


def test_wdir_and_inputs_may_use_params_and_seed(project: BenchProject) -> None:
    """Both are rendered with the trial's params and seed: the stage runs in w3-7 and reads
    in3.txt there (its score is the file's content), and the fingerprint's code is that file."""
    document = simple_bench(replicates=1, seeds=[7])
    (project.path / "w3-7").mkdir()
    (project.path / "w3-7" / "in3.txt").write_text("41\n")
    document["stages"][1].update(
        wdir="w{size}-{seed}",
        inputs=["in{size}.txt"],
        cmd="echo score=$(cat in{size}.txt); echo mode={mode}",
    )
    project.bench(document)
    result = project.run()
    assert result.ret == 0, result.stdout.str()
    record = project.results()
    assert [t["metrics"]["score"] for t in record["trials"]] == [41, 41]
    frozen = yaml.safe_load((project.runs()[-1] / "config.yaml").read_text())
    assert list(frozen["fingerprint"]["code"]) == [str(project.path / "w3-7" / "in3.txt")]


def test_unknown_need(project: BenchProject) -> None:
    document = simple_bench()
    document["stages"][1]["needs"] = ["biuld"]
    text = collect_error(project, document)
    assert "needs: names unknown stage 'biuld' (did you mean 'build'?)" in text


def test_cyclic_needs_show_the_cycle(project: BenchProject) -> None:
    document = simple_bench()
    document["stages"].insert(0, {"name": "a", "kind": "prep", "cmd": "true", "needs": ["b"]})
    document["stages"].insert(1, {"name": "b", "kind": "prep", "cmd": "true", "needs": ["a"]})
    text = collect_error(project, document)
    assert "form a cycle: a -> b -> a" in text


def test_stage_without_cmd(project: BenchProject) -> None:
    document = simple_bench()
    del document["stages"][0]["cmd"]
    text = collect_error(project, document)
    assert "stages[0] (build).cmd: is missing" in text


def test_duplicate_stage_names(project: BenchProject) -> None:
    document = simple_bench()
    document["stages"][0]["name"] = "measure"
    document["stages"][1]["needs"] = []
    text = collect_error(project, document)
    assert "stages (measure): two stages share this name" in text


def test_measure_stage_without_metrics(project: BenchProject) -> None:
    document = simple_bench()
    del document["stages"][1]["metrics_from"]
    text = collect_error(project, document)
    assert "stages[1] (measure).metrics_from: a measure stage must declare the metrics" in text


def test_metric_read_but_not_declared(project: BenchProject) -> None:
    document = simple_bench(metrics={})
    text = collect_error(project, document)
    assert "metric 'score' is read but not declared under metrics:" in text


def test_missing_input_file(project: BenchProject) -> None:
    document = simple_bench()
    document["stages"][0]["inputs"] = ["build.py"]
    text = collect_error(project, document)
    assert "inputs[0]: 'build.py' does not exist" in text


def test_every_problem_is_reported_at_once(project: BenchProject) -> None:
    document = simple_bench(treatments=["a"])
    document["stages"][1]["cmd"] += " {nope}"
    text = collect_error(project, document)
    assert "half a comparison" in text and "unknown placeholder {nope}" in text


def test_one_treatment_is_half_a_comparison_with_both_fixes(project: BenchProject) -> None:
    text = collect_error(project, simple_bench(treatments=["a"]))
    assert "treatments: lists 1 value(s) of 'mode': half a comparison" in text
    assert "list the control first, then at least one treatment" in text
    assert "to measure one configuration, remove treatment_variable: and treatments:" in text


def test_a_treatment_variable_without_treatments_is_half_a_comparison(
    project: BenchProject,
) -> None:
    document = simple_bench()
    del document["treatments"]
    text = collect_error(project, document)
    assert (
        "treatments: is missing: treatment_variable names 'mode' but gives it no values: "
        "half a comparison" in text
    )
    assert "remove treatment_variable: and treatments:" in text


def test_treatments_without_a_treatment_variable(project: BenchProject) -> None:
    document = simple_bench()
    del document["treatment_variable"]
    text = collect_error(project, document)
    assert "treatment_variable: is missing: treatments lists values but no param is named" in text
    assert "or, to measure one configuration, remove treatments:" in text


def one_config(**overrides) -> dict:
    document = simple_bench(**overrides)
    del document["treatment_variable"], document["treatments"]
    return document


def test_gate1_holds_a_file_of_one_configuration(project: BenchProject) -> None:
    """Nothing varies, yet stages, placeholders, metrics and the manifest are all checked."""
    metrics = {"score": {"direction": "higher"}, "ghost": {"direction": "lower"}}
    document = one_config(metrics=metrics, manifest={"eval_suite": {"why": "results depend on it"}})
    document["stages"][1]["cmd"] += " {nope}"
    document["stages"][0]["needs"] = ["biuld"]
    text = collect_error(project, document)
    assert "needs: names unknown stage 'biuld'" in text
    assert (
        "params.eval_suite: is required by the manifest of this file: results depend on it" in text
    )
    assert "half a comparison" not in text and "treatment_variable" not in text
    document["stages"][0]["needs"] = []  # a sound DAG: placeholders and metrics are checked too
    text = collect_error(project, document)
    assert "unknown placeholder {nope}" in text
    assert "metrics.ghost: is declared but no measure stage reports it" in text


def test_one_configuration_refuses_a_replicate_range(project: BenchProject) -> None:
    text = collect_error(project, one_config(replicates={"min": 3, "max": 8}))
    assert "replicates: is a range, which adds blocks until every in-run verdict is decided" in text
    assert "give a number, e.g. replicates: 8" in text


def test_one_configuration_plans_one_trial_per_replicate_and_seed(project: BenchProject) -> None:
    project.bench(one_config(seeds=[1, 2]))
    result = project.run("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "bench.yaml::measure[[]default-rep0-seed1[]]",
            "bench.yaml::measure[[]default-rep0-seed2[]]",
            "bench.yaml::measure[[]default-rep1-seed1[]]",
            "bench.yaml::measure[[]default-rep1-seed2[]]",
            "*4 tests collected*",
        ]
    )
    assert not project.home.exists()


def test_tuning_file_without_a_strategy(project: BenchProject) -> None:
    document = simple_bench(search_space={"size": [1, 2]})
    text = collect_error(project, document)
    assert "search_space: makes this a tuning file" in text


def test_a_clean_file_plans_its_trials(project: BenchProject) -> None:
    project.bench(simple_bench())
    result = project.run("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "bench.yaml::measure[[]mode=a-rep0[]]",
            "bench.yaml::measure[[]mode=b-rep0[]]",
            "bench.yaml::measure[[]mode=b-rep1[]]",  # the order alternates inside blocks
            "bench.yaml::measure[[]mode=a-rep1[]]",
        ]
    )
    assert not project.home.exists()  # planning writes nothing


def test_tuned_param_must_be_declared(project: BenchProject) -> None:
    document = simple_bench(search_space={"sise": [1, 2]})
    del document["treatment_variable"], document["treatments"]
    project.bench(document)
    project.write("round.json", '{"points": [{"sise": 1}]}')
    result = project.run("--collect-only", "--bench-round", "round.json")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "search_space.sise: is tuned but not declared under params" in result.stdout.str()


# -- what records and the machine say: passed in by the caller ------------------------------


def manifest_config(**params: object) -> BenchmarkConfig:
    """simple_bench with a manifest param ``threads`` (default 4); ``params`` are added."""
    document = simple_bench(
        manifest={"threads": {"why": "threads change the timing", "default": 4}}
    )
    document["params"].update(params)
    return BenchmarkConfig.model_validate(document)


def test_a_missing_manifest_param_shows_what_latest_gives(tmp_path: Path) -> None:
    asked: list[str] = []

    def latest(name: str) -> tuple[str, dict[str, Any]]:
        asked.append(name)
        return "r7", {"threads": 8, "mode": "a"}

    with pytest.raises(ConfigError) as caught:
        gate1.check(manifest_config(), tmp_path / "bench.yaml", latest=latest)
    assert asked == ["simple"]
    assert "params.threads: is required by the manifest of this file" in str(caught.value)
    assert "the latest RELIABLE run r7 used '8'" in str(caught.value)


def test_latest_is_not_asked_when_nothing_is_missing_and_none_gives_no_hint(
    tmp_path: Path,
) -> None:
    def refuse(name: str) -> None:
        raise AssertionError(f"latest asked for {name} with nothing missing")

    gate1.check(manifest_config(threads=4), tmp_path / "bench.yaml", latest=refuse)
    with pytest.raises(ConfigError) as caught:
        gate1.check(manifest_config(), tmp_path / "bench.yaml", latest=lambda name: None)
    assert "params.threads: is required" in str(caught.value)
    assert "RELIABLE" not in str(caught.value)


def test_what_the_machine_says_joins_gate_one_problems_in_one_error(tmp_path: Path) -> None:
    config = BenchmarkConfig.model_validate(simple_bench(treatments=["b", "a"]))

    def machine(given: BenchmarkConfig) -> list[tuple[str, str, str]]:
        assert given is config
        return [("stages (measure).counters", "has no backend here.", "install one.")]

    with pytest.raises(ConfigError) as caught:
        gate1.check(config, tmp_path / "bench.yaml", machine=machine)
    assert [field for field, _, _ in caught.value.problems] == [
        "params.mode",
        "stages (measure).counters",
    ]


def test_the_machine_is_not_asked_about_a_broken_stage_graph(tmp_path: Path) -> None:
    document = simple_bench()
    document["stages"][1]["needs"] = ["biuld"]
    asked: list[BenchmarkConfig] = []
    with pytest.raises(ConfigError) as caught:
        gate1.check(
            BenchmarkConfig.model_validate(document),
            tmp_path / "bench.yaml",
            machine=lambda config: asked.append(config) or [],
        )
    assert asked == []
    assert "names unknown stage 'biuld'" in str(caught.value)


def reliable_run(home: Path, run_id: str, config: dict[str, Any] | None) -> None:
    run = home / "runs" / run_id
    run.mkdir(parents=True)
    results = {"run_id": run_id, "name": "simple", "tag": "RELIABLE", "trials": []}
    (run / "results.yaml").write_text(yaml.safe_dump(results))
    if config is not None:
        (run / "config.yaml").write_text(yaml.safe_dump({"config": config}))


def test_latest_reliable_values_are_the_newest_reliable_runs_params_and_seeds(
    tmp_path: Path,
) -> None:
    reliable_run(tmp_path, "2026-01-01T00-00-00-simple-0000", {"params": {"threads": 2}})
    newest = "2026-01-02T00-00-00-simple-0000"
    reliable_run(tmp_path, newest, {"params": {"threads": 8}, "seeds": [1, 2]})
    assert latest_reliable_values(tmp_path, "simple") == (newest, {"threads": 8, "seeds": [1, 2]})
    assert latest_reliable_values(tmp_path, "other") is None


def test_latest_reliable_values_of_a_run_without_its_config_or_a_bare_home(tmp_path: Path) -> None:
    assert latest_reliable_values(tmp_path, "simple") is None
    reliable_run(tmp_path, "2026-01-01T00-00-00-simple-0000", None)
    assert latest_reliable_values(tmp_path, "simple") == ("2026-01-01T00-00-00-simple-0000", {})
