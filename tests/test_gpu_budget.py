"""Stage-level ``resources: {gpus, vram_mb, est_gpu_hours}``: preflight refuses a plan whose
estimated GPU-hours or cost exceed the budget, showing the arithmetic; the tuner refuses a round
on the same estimate before any trial has measured one."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from benchhelpers import BenchProject, simple_bench

from pytest_benchmark_agent.config.models import BenchmarkConfig, load_config
from pytest_benchmark_agent.errors import ConfigError
from pytest_benchmark_agent.tune.budget import Spent, overrun


def _estimated(budget: dict, **resources: float) -> dict:
    """The simple benchmark (2 treatments x 2 replicates) whose measure declares 5 GPU-hours
    per trial, through its own ``resources:`` (no GPU is asked for: the estimate alone)."""
    document = simple_bench(budget=budget, resources=resources or {"mem_mb": 64})
    document["stages"][1]["resources"] = {"est_gpu_hours": 5}
    document["stages"][0]["resources"] = {"est_gpu_hours": 0.5}
    return document


def test_a_plan_over_its_gpu_hour_budget_is_refused_with_the_arithmetic(
    project: BenchProject,
) -> None:
    project.bench(_estimated({"gpu_hours": 1}))
    result = project.run("--collect-only")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, out
    assert "estimated 20.5 GPU-hours > budget.gpu_hours 1" in out
    estimate = "(stage measure's resources.est_gpu_hours)"
    assert f"measure: 4 trial(s) x 5 GPU-hours {estimate} = 20 GPU-hours." in out
    assert "build: 1 build(s), if none is cached, x 0.5 GPU-hours" in out
    assert not (project.home / "runs").exists()


def test_the_cost_budget_is_the_estimate_times_the_price(project: BenchProject) -> None:
    project.bench(_estimated({"cost_usd": 40}, price_per_gpu_hour=2.5))
    out = project.run("--collect-only").stdout.str()
    assert (
        "estimated 20.5 GPU-hours x $2.5/GPU-hour (resources.price_per_gpu_hour) = $51.25 > "
        "budget.cost_usd $40" in out
    )


def test_a_trials_budget_caps_the_estimate_and_a_plan_that_fits_runs(
    project: BenchProject,
) -> None:
    """budget.trials: 2 of the 4 planned trials: 2 x 5 + 1 build x 0.5 = 10.5 GPU-hours."""
    project.bench(_estimated({"gpu_hours": 10.4, "trials": 2}))
    refused = project.run("--collect-only")
    out = refused.stdout.str()
    assert refused.ret == pytest.ExitCode.INTERRUPTED, out
    assert "estimated 10.5 GPU-hours > budget.gpu_hours 10.4" in out
    assert "budget.trials stops the run after 2 of 4 trials" in out
    assert "measure: 2 trial(s) x 5 GPU-hours" in out
    project.bench(_estimated({"gpu_hours": 10.5, "trials": 2}))
    result = project.run()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    ran = [t for t in project.results()["trials"] if t["status"] == "passed"]
    assert len(ran) == 2


def test_stage_resources_and_the_flat_fields_are_one_declaration(tmp_path: Path) -> None:
    document = simple_bench()
    document["stages"][1].update(gpus=2, resources={"gpus": 1})
    path = tmp_path / "bench.yaml"
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(ConfigError, match=r"gpus is given twice.*keep one"):
        load_config(path)


def test_the_tuner_refuses_a_round_on_the_declared_estimate() -> None:
    document = simple_bench(budget={"gpu_hours": 10}, resources={"gpus": 1, "est_gpu_hours": 0.5})
    config = BenchmarkConfig.model_validate(document)
    why = overrun(config, Spent(), needed=30)
    assert why is not None and why.startswith(
        "budget.gpu_hours: 0 GPU-hours spent and the next round is estimated at 15 more (of 10)"
    )
    assert "30 trials x 0.5 GPU-hours" in why
    assert overrun(config, Spent(), needed=20) is None
