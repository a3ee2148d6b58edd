"""The ``benchmark-agent`` console script over a real data directory."""

from __future__ import annotations

import subprocess

from benchhelpers import BenchProject, simple_bench


def agent(project: BenchProject, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["benchmark-agent", "--home", str(project.home), *args],
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_plan_run_history_status_analyze(project: BenchProject) -> None:
    project.bench(simple_bench())
    plan = agent(project, "plan", "bench.yaml")
    assert plan.returncode == 0 and "measure[mode=b-rep1]" in plan.stdout
    assert not project.home.exists()
    run = agent(project, "run", "bench.yaml", "--", "-p", "no:cacheprovider")
    assert run.returncode == 0, run.stdout
    (run_dir,) = project.runs()
    history = agent(project, "history")
    assert run_dir.name in history.stdout and "complete" in history.stdout
    status = agent(project, "status")
    assert f"{run_dir.name}: complete (4 trials recorded)" in status.stdout
    analyze = agent(project, "analyze", run_dir.name[:22])
    assert "## What Went Wrong" in analyze.stdout


def test_unknown_run_is_a_clear_error(project: BenchProject) -> None:
    project.bench(simple_bench())
    agent(project, "run", "bench.yaml")
    result = agent(project, "analyze", "no-such-run")
    assert result.returncode != 0
    assert "no unique run 'no-such-run'" in result.stderr


def test_plan_reports_gate_errors_with_exit_2(project: BenchProject) -> None:
    project.bench(simple_bench(treatment_variable="nope"))
    result = agent(project, "plan", "bench.yaml")
    assert result.returncode == 2
    assert "'nope' is not a declared param" in result.stdout
