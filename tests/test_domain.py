"""Python Domains end to end: compiled stages run through the engine (real subprocesses, real
cache), signatures follow each method's source, manifests gate collection, registration."""

from __future__ import annotations

import json

import pytest
import yaml
from benchhelpers import BenchProject

from pytest_benchmark_agent.domains.api import (
    Domain,
    DomainDefinitionError,
    StageCall,
    available_domains,
    domain_class,
    measure,
    prep,
    register_domain,
    stage_source,
)
from pytest_benchmark_agent.domains.runner import decode, result_lines

COUNTER_DOMAIN = """
from pathlib import Path

from pytest_benchmark_agent.domains.api import Domain, measure, prep

SCALE = 2


def scaled(value):
    return value * SCALE


class Counter(Domain):
    manifest = {
        "size": {"default": 3, "why": "how much data the prep writes"},
        "mode": {"default": "a", "why": "the treatment"},
    }
    metrics = {"score": {"direction": "higher", "primary": True}}

    @prep(produces=["data"], params=["size"])
    def build(self, call):
        with open("builds.txt", "a") as log:
            log.write("built\\n")
        print("noise on stdout: score=-1")
        call.artifacts["data"].write_text(str(scaled(call.params["size"])))

    @measure(needs=["build"], params=["mode", "size"], metrics=["score"])
    def run(self, call):
        call.effective["mode"] = call.params["mode"]
        return {"score": float(call.artifacts["data"].read_text()) + len(call.params["mode"])}
"""


def counter_bench(**overrides) -> dict:
    document = {
        "domain": "counter.py:Counter",
        "name": "counter",
        "params": {"size": 3, "mode": "a"},
        "treatment_variable": "mode",
        "treatments": ["a", "bb"],
        "replicates": 2,
    }
    document.update(overrides)
    return document


def builds(project: BenchProject) -> int:
    log = project.path / "builds.txt"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_domain_stages_run_as_cached_command_stages(project: BenchProject) -> None:
    project.write("counter.py", COUNTER_DOMAIN)
    project.bench(counter_bench())
    result = project.run("--setup-show")
    assert result.ret == 0, result.stdout.str()
    assert result.stdout.str().count("SETUP    S bench_prep_build_") == 1
    record = project.results()
    by_treatment = {(t["treatment"], t["replicate"]): t for t in record["trials"]}
    assert [by_treatment[(m, r)]["metrics"]["score"] for r in (0, 1) for m in ("a", "bb")] == [
        7.0,
        8.0,
        7.0,
        8.0,
    ]
    assert by_treatment[("bb", 0)]["effective"] == {"mode": "bb"}
    assert builds(project) == 1
    assert project.run().ret == 0
    assert builds(project) == 1  # the next session reuses the cached prep
    assert [p["action"] for p in project.results()["preps"]] == ["reused"]


def test_editing_a_method_rebuilds_only_what_it_changes(project: BenchProject) -> None:
    project.write("counter.py", COUNTER_DOMAIN)
    project.bench(counter_bench())
    project.run()
    edited = COUNTER_DOMAIN.replace('+ len(call.params["mode"])', '+ 10 * len(call.params["mode"])')
    project.write("counter.py", edited)
    assert project.run().ret == 0
    assert builds(project) == 1  # the measure changed; the prep's signature did not
    assert project.results()["trials"][0]["metrics"]["score"] == 16.0
    project.write("counter.py", edited.replace("SCALE = 2", "SCALE = 3"))
    assert project.run().ret == 0
    assert builds(project) == 2  # a module constant the prep uses (through scaled()) changed
    assert project.results()["trials"][0]["metrics"]["score"] == 19.0


def test_reading_an_undeclared_param_fails_with_the_fix(project: BenchProject) -> None:
    project.write(
        "counter.py",
        COUNTER_DOMAIN.replace(
            'float(call.artifacts["data"].read_text())',
            'float(call.params["size"]) * 0 + float(call.params["extra"])',
        ).replace(
            '"mode": {"default"', '"extra": {"default": 1, "why": "x"},\n        "mode": {"default"'
        ),
    )
    project.bench(counter_bench(params={"size": 3, "mode": "a", "extra": 1}))
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    reason = project.results()["trials"][0]["reason"]
    assert "stage 'run' reads param 'extra', which it does not declare" in reason


def test_effective_value_differing_from_declared_is_not_comparable(project: BenchProject) -> None:
    project.write(
        "counter.py",
        COUNTER_DOMAIN.replace(
            'call.effective["mode"] = call.params["mode"]', 'call.effective["mode"] = "other"'
        ),
    )
    project.bench(counter_bench())
    project.run()
    trial = project.results()["trials"][0]
    assert trial["status"] == "not_comparable"
    assert "mode: declared 'a', effective 'other'" in trial["reason"]


def test_missing_manifest_param_is_a_collection_error_saying_why(project: BenchProject) -> None:
    project.write("counter.py", COUNTER_DOMAIN)
    project.bench(counter_bench(params={"mode": "a"}))
    result = project.run()
    assert result.ret == 2  # a collection error
    out = result.stdout.str()
    assert (
        "params.size: is required by the manifest of domain 'counter.py:Counter': how much "
        "data the prep writes; its default is '3'."
    ) in out
    assert "declare it under params: (even at its default), e.g. size: 3" in out


def test_missing_manifest_param_suggests_the_latest_reliable_value(project: BenchProject) -> None:
    project.write("counter.py", COUNTER_DOMAIN)
    run = project.home / "runs" / "2026-01-01T00-00-00-counter-0000"
    run.mkdir(parents=True)
    (run / "results.yaml").write_text(
        yaml.safe_dump({"run_id": run.name, "name": "counter", "tag": "RELIABLE", "trials": []})
    )
    (run / "config.yaml").write_text(
        yaml.safe_dump(
            {"config": {"params": {"size": 7, "mode": "a"}, "treatment_variable": "mode"}}
        )
    )
    project.bench(counter_bench(params={"mode": "a"}))
    out = project.run().stdout.str()
    assert f"the latest RELIABLE run {run.name} used '7'" in out


def test_a_domain_file_may_not_list_stages(project: BenchProject) -> None:
    project.write("counter.py", COUNTER_DOMAIN)
    project.bench(
        counter_bench(
            stages=[
                {
                    "name": "x",
                    "kind": "measure",
                    "cmd": "true",
                    "metrics_from": {"fields": ["wall_s"]},
                }
            ]
        )
    )
    out = project.run().stdout.str()
    assert "stages: domain 'counter.py:Counter' defines its own stages (build, run)" in out


def test_registered_domain_is_picked_by_name(project: BenchProject) -> None:
    project.write("counter.py", COUNTER_DOMAIN)
    project.write(
        "conftest.py",
        """
        from counter import Counter
        from pytest_benchmark_agent.domains.api import register_domain

        register_domain("counter-registered", Counter)
    """,
    )
    project.bench(counter_bench(domain="counter-registered"))
    result = project.run()
    assert result.ret == 0, result.stdout.str()
    assert project.results()["trials"][0]["metrics"]["score"] == 7.0


def test_unknown_domain_names_the_known_ones(project: BenchProject) -> None:
    project.bench(counter_bench(domain="sqlite_fst5"))
    out = project.run().stdout.str()
    assert "domain: 'sqlite_fst5' is not a known domain (did you mean 'sqlite_fts5'?)" in out


def test_seeded_prep_is_bound_per_seed(project: BenchProject) -> None:
    project.write(
        "seeded.py",
        """
        from pytest_benchmark_agent.domains.api import Domain, measure, prep

        class Seeded(Domain):
            manifest = {"mode": {"default": "a", "why": "the treatment"},
                        "seeds": {"default": [1, 2], "why": "training is random"}}
            metrics = {"value": {"direction": "higher"}}

            @prep(produces=["model"], seed=True)
            def train(self, call):
                call.artifacts["model"].write_text(str(call.seed))

            @measure(needs=["train"], params=["mode"], metrics=["value"])
            def score(self, call):
                return {"value": int(call.artifacts["model"].read_text())}
    """,
    )
    project.bench(
        {
            "domain": "seeded.py:Seeded",
            "name": "seeded",
            "params": {"mode": "a"},
            "treatment_variable": "mode",
            "treatments": ["a", "b"],
            "seeds": [1, 2],
            "replicates": 1,
        }
    )
    assert project.run().ret == 0
    record = project.results()
    assert {(t["seed"], t["metrics"]["value"]) for t in record["trials"]} == {(1, 1.0), (2, 2.0)}
    assert len([p for p in record["preps"] if p["action"] == "built"]) == 2


class _Valid(Domain):
    manifest = {"n": {"default": 1, "why": "size"}}
    metrics = {"m": {"direction": "lower"}}

    @prep(produces=["a"], params=["n"])
    def make(self, call: StageCall) -> None:
        call.artifacts["a"].write_text("x")

    @measure(needs=["make"], metrics=["m"])
    def time_it(self, call: StageCall) -> dict[str, float]:
        return {"m": 1.0}


def test_domain_definition_errors_name_every_problem() -> None:
    class Broken(_Valid):
        @measure(needs=["nope"], params=["undeclared"], metrics=["unknown"])
        def time_it(self, call: StageCall) -> dict[str, float]:
            return {}

    with pytest.raises(DomainDefinitionError) as excinfo:
        register_domain("broken", Broken)
    text = str(excinfo.value)
    assert "time_it: needs unknown stage method 'nope'" in text
    assert "time_it: param 'undeclared' is not in the manifest" in text
    assert "time_it: metric 'unknown' has no spec in metrics" in text
    with pytest.raises(DomainDefinitionError, match="'command' is the shell-stage domain"):
        register_domain("command", _Valid)


def test_stage_methods_keep_definition_order_and_overrides() -> None:
    class Child(_Valid):
        @measure(needs=["make"], metrics=["m"])
        def time_it(self, call: StageCall) -> dict[str, float]:
            return {"m": 2.0}

    assert list(Child.stage_methods()) == ["make", "time_it"]
    assert "2.0" in stage_source(Child, "time_it")
    assert "1.0" in stage_source(_Valid, "time_it")


def test_reference_domains_are_installed_entry_points(tmp_path) -> None:
    assert {"command", "seismic", "sqlite_fts5", "postgres", "opensearch"} <= set(
        available_domains()
    )
    cls = domain_class("sqlite_fts5", tmp_path / "bench.yaml")
    assert set(cls.stage_methods()) == {"build", "merge", "search"}
    assert "fts.automerge" in cls.manifest_entries()


def test_runner_decodes_values_and_prints_one_json_line() -> None:
    assert [decode(t) for t in ("5000", "0.6", "true", "[1, 2]", "none", "1e-4", "")] == [
        5000,
        0.6,
        True,
        [1, 2],
        "none",
        1e-4,
        "",
    ]
    lines = result_lines({"p50_ms": 0.5, "ok": True}, {"heap_factor": 0.6})
    assert json.loads(lines[0]) == {"p50_ms": 0.5, "ok": 1}
    assert lines[1] == "BENCH_EFFECTIVE heap_factor=0.6"


def test_domain_stage_prints_go_to_stderr(project: BenchProject) -> None:
    project.write("counter.py", COUNTER_DOMAIN)
    project.bench(counter_bench(replicates=1))
    assert project.run().ret == 0
    prep_logs = next((project.runs()[-1] / "preps").iterdir())
    assert "noise on stdout" in (prep_logs / "stderr.txt").read_text()
    assert not (prep_logs / "stdout.txt").exists()  # only non-empty output is kept


def test_compiled_command_quotes_every_value(project: BenchProject) -> None:
    project.write("counter.py", COUNTER_DOMAIN)
    project.bench(counter_bench(treatments=["a", "$(touch pwned); 'x"], replicates=1))
    assert project.run().ret == 0
    assert not (project.path / "pwned").exists()
    assert project.results()["trials"][1]["effective"]["mode"] == "$(touch pwned); 'x"
