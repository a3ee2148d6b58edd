"""The `bench` fixture: ordinary tests run benchmark files and Domains and assert on results."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pytest_benchmark_agent.domains.api import Domain, StageCall, measure
from pytest_benchmark_agent.engine.fixture import (
    FINISH_GRACE_S,
    BenchSessionError,
    BenchTimeoutError,
    default_timeout,
)
from pytest_benchmark_agent.errors import ConfigError
from pytest_benchmark_agent.records.record import RunRecord, load_run
from pytest_benchmark_agent.stats.comparability import Refusal, Verdict


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
    assert isinstance(result, RunRecord) and result.dir is not None
    assert result.session is not None and result.session.exit_code == 0
    assert result.state == "complete"
    assert result.counts == {"passed": 2}
    assert result.samples("score") == {"a": [10.0], "b": [10.0]}
    assert result.stats("score")["b"]["median"] == 10.0
    assert path.read_text() == before
    assert not list(tmp_path.glob("*.tmp.yaml"))  # the temporary copy is gone
    with pytest.raises(KeyError, match="no verdict on 'nope' in run"):
        result.verdict("nope", "b")


def test_relative_paths_resolve_against_the_test_file(bench) -> None:
    result = bench.run(
        "../examples/sqlite-fts5/bench.yaml",
        params={"corpus.n_docs": 200, "n_queries": 20},
        replicates=1,
    )
    assert result.counts == {"passed": 2}, result.session.output


def test_run_domain_with_a_class(bench) -> None:
    result = bench.run_domain(
        Doubling, params={"factor": 2}, treatment_variable="factor", treatments=[2, 3], replicates=1
    )
    assert result.samples("value") == {"2": [42.0], "3": [63.0]}, result.session.output


def test_a_session_that_records_no_run_raises_with_its_output(bench) -> None:
    with pytest.raises(BenchSessionError) as excinfo:
        bench.run_domain(Doubling, params={}, treatment_variable="factor", treatments=[2, 3])
    assert excinfo.value.exit_code == 2
    assert "params.factor: is required by the manifest" in excinfo.value.output


def doubled_bench(folder: Path, **fields: object) -> Path:
    """``b`` scores twice what ``a`` does, every replicate: gate 2 calls it improved."""
    path = shell_bench(folder)
    document = yaml.safe_load(path.read_text())
    document["stages"][0]["cmd"] = (
        "if [ {mode} = b ]; then echo score=$(( {size} * 4 )); else echo score=$(( {size} * 2 )); "
        "fi; echo mode={mode}"
    )
    document.update(fields)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_a_verdict_is_a_typed_record(bench, tmp_path: Path) -> None:
    result = bench.run(doubled_bench(tmp_path), replicates=6)
    assert result.counts == {"passed": 12}, result.session.output
    verdict = result.verdict("score", "b")
    assert isinstance(verdict, Verdict)
    assert verdict.improved and not (verdict.regressed or verdict.no_change), verdict
    assert verdict.ratio == 2.0
    assert verdict.interval is not None and verdict.interval == verdict.ci
    assert verdict.n == (6, 6)
    assert verdict == load_run(result.dir).verdicts["score"]["b"]  # as results.yaml holds it
    with pytest.raises(AttributeError):
        verdict.verdict = "regressed"  # type: ignore[misc]  # frozen: no test changes it


def test_a_verdict_record_reads_back_as_written() -> None:
    written = Verdict(
        "not_comparable",
        ratio=1.5,
        ci=(1.1, 2.0),
        n=(3, 4),
        reason="too few replicates",
        refused=Refusal.TOO_SMALL,
    )
    record = {**written.to_dict(), "against": {"run": "earlier", "label": "a"}}
    read = Verdict.from_dict(record)
    assert read.not_comparable and read.interval == (1.1, 2.0) and read.to_dict() == record
    assert read.extra == {"against": {"run": "earlier", "label": "a"}}  # kept, not dropped


def test_the_default_timeout_is_the_wall_clock_budget_and_a_grace() -> None:
    assert default_timeout({"budget": {"wall_clock_s": 30}}) == 30 + FINISH_GRACE_S
    assert default_timeout({"budget": {"trials": 4}}) is None
    assert default_timeout({}) is None
    for refused_by_gate_1 in ("30", True, -5, float("nan"), None):
        assert default_timeout({"budget": {"wall_clock_s": refused_by_gate_1}}) is None


def test_a_session_past_its_timeout_is_stopped_with_its_records_kept(bench, tmp_path: Path) -> None:
    path = doubled_bench(tmp_path, replicates=1)
    document = yaml.safe_load(path.read_text())
    document["stages"][0]["cmd"] = "touch started; sleep 600; echo score=1; echo mode={mode}"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(BenchTimeoutError) as excinfo:
        bench.run(path, timeout=20)
    error = excinfo.value
    assert "was still running at its timeout of 20s and was stopped" in str(error)
    assert (tmp_path / "started").exists(), error.output
    record = load_run(error.run_dir)
    assert record.state == "interrupted", error.output
    assert {t.status for t in record.trials} == {"interrupted", "not_run"}


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), "600", True])
def test_a_timeout_that_is_not_seconds_is_refused_before_any_session(
    bench, tmp_path: Path, timeout: object
) -> None:
    runs = bench.home / "runs"
    before = set(runs.iterdir()) if runs.exists() else set()
    with pytest.raises(ConfigError, match="timeout: .* is not a positive number of seconds"):
        bench.run(shell_bench(tmp_path), timeout=timeout)
    assert (set(runs.iterdir()) if runs.exists() else set()) == before
