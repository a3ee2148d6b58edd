"""The `bench` fixture: ordinary tests run benchmark files and Domains and assert on results."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pytest_benchmark_agent.domains.api import Domain, StageCall, measure
from pytest_benchmark_agent.engine.fixture import BenchSessionError


class Doubling(Domain):
    """A one-stage domain defined in this test module (run by file path in the subprocess)."""

    manifest = {"factor": {"default": 2, "why": "what the value is multiplied by"}}
    metrics = {"value": {"direction": "higher", "primary": True}}

    @measure(params=["factor"], metrics=["value"])
    def compute(self, call: StageCall) -> dict[str, float]:
        return {"value": 21.0 * call.params["factor"]}


def shell_bench(folder: Path) -> Path:
    path = folder / "bench.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "shell",
                "params": {"mode": "a", "size": 3},
                "treatment_variable": "mode",
                "treatments": ["a", "b"],
                "replicates": 3,
                "stages": [
                    {
                        "name": "measure",
                        "kind": "measure",
                        "cmd": "echo score=$(( {size} * 2 )); echo mode={mode}",
                        "metrics_from": {"stdout": True, "fields": ["score"]},
                    }
                ],
                "metrics": {"score": {"direction": "higher", "primary": True}},
            },
            sort_keys=False,
        )
    )
    return path


def test_run_a_file_with_params_and_fields(bench, tmp_path: Path) -> None:
    path = shell_bench(tmp_path)
    before = path.read_text()
    result = bench.run(path, params={"size": 5}, replicates=1)
    assert result.exit_code == 0 and result.state == "complete"
    assert result.counts == {"passed": 2}
    assert result.samples("score") == {"a": [10.0], "b": [10.0]}
    assert result.stats("score")["b"]["median"] == 10.0
    assert path.read_text() == before
    assert not list(tmp_path.glob("*.tmp.yaml"))  # the temporary copy is gone
    with pytest.raises(KeyError, match="no verdict on 'nope' for treatment 'b'"):
        result.verdict("nope", "b")


def test_relative_paths_resolve_against_the_test_file(bench) -> None:
    result = bench.run(
        "../examples/sqlite-fts5/bench.yaml",
        params={"corpus.n_docs": 200, "n_queries": 20},
        replicates=1,
    )
    assert result.counts == {"passed": 2}, result.output


def test_run_domain_with_a_class(bench) -> None:
    result = bench.run_domain(
        Doubling, params={"factor": 2}, treatment_variable="factor", treatments=[2, 3], replicates=1
    )
    assert result.samples("value") == {"2": [42.0], "3": [63.0]}, result.output


def test_a_session_that_records_no_run_raises_with_its_output(bench) -> None:
    with pytest.raises(BenchSessionError) as excinfo:
        bench.run_domain(Doubling, params={}, treatment_variable="factor", treatments=[2, 3])
    assert excinfo.value.exit_code == 2
    assert "params.factor: is required by the manifest" in excinfo.value.output
