"""``benchmark-agent plan``: the matrix against the latest RELIABLE run, the lessons that apply,
the challenge of a misaligned request, and ``--accept-deviation`` reaching the run's record."""

from __future__ import annotations

import os
import subprocess

import yaml
from benchhelpers import BenchProject, simple_bench
from support.records import constant, judged, run_record, write_run

from pytest_benchmark_agent.cli.session import EXIT_CHALLENGED
from pytest_benchmark_agent.records.lessons import LESSONS, Note, add_note

#: Plugins these sessions never use, left out of the pytest runs plan and run start.
QUIET = {
    **os.environ,
    "PYTEST_ADDOPTS": "-p no:hypothesispytest -p no:benchmark -p no:cacheprovider",
}


def agent(project: BenchProject, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["benchmark-agent", "--home", str(project.home), *args],
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=120,
        env=QUIET,
    )


def reliable_baseline(project: BenchProject) -> str:
    """A recorded run of the simple benchmark in the data home (the records a session leaves,
    written by the engine's writers), tagged RELIABLE as gate 2 tags a reproduction."""
    project.bench(simple_bench())
    samples = {"score": constant({"a": 6, "b": 6}, replicates=2)}
    run_id = "2026-01-01T00-00-00-simple-base"  # an id as a session names it: older than any
    record = run_record(run_id, home=project.home, samples=samples, config=simple_bench())
    return write_run(judged(record).replace(tag="RELIABLE")).run_id


def test_plan_without_baseline_prints_the_matrix_and_applicable_lessons(
    project: BenchProject,
) -> None:
    project.bench(simple_bench())
    for note in (
        Note("mode b needs a warm cache", "T1", benchmark="simple"),
        Note("size above 100 swaps", "T2", params={"size": None}),
        Note("unrelated to this benchmark", "T3"),
    ):
        add_note(project.home / LESSONS, note)
    plan = agent(project, "plan", "bench.yaml")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    out = plan.stdout
    assert "measure[mode=b-rep1]" in out  # gate 1 and preflight ran through pytest
    assert "no RELIABLE run of 'simple'" in out
    assert [line.split() for line in out.splitlines() if line.startswith("  mode")] == [
        ["mode", "-", "a,", "b", "TREATMENT"]
    ]
    assert [line.split() for line in out.splitlines() if line.startswith("  size")] == [
        ["size", "-", "3", "CONTROL"]
    ]
    assert "mode b needs a warm cache" in out and "size above 100 swaps" in out
    assert "unrelated to this benchmark" not in out
    assert not (project.home / "runs").exists()  # planning executes nothing


def test_changed_control_is_challenged_and_an_accepted_deviation_is_a_caveat(
    project: BenchProject,
) -> None:
    baseline = reliable_baseline(project)
    aligned = agent(project, "plan", "bench.yaml")
    assert aligned.returncode == 0 and f"comparison with baseline {baseline}" in aligned.stdout
    assert "CHALLENGE" not in aligned.stdout

    challenged = agent(project, "plan", "bench.yaml", "--", "--bench-set", "size=4")
    assert challenged.returncode == EXIT_CHALLENGED
    out = challenged.stdout
    assert [line.split() for line in out.splitlines() if line.startswith("  size")] == [
        ["size", "3", "4", "CONTROL", "(changed)"]
    ]
    assert f"CHALLENGE 1: control size changed relative to the baseline {baseline} (3 -> 4)" in out
    assert "risk: " in out and "aligned alternative: set size: 3 as in the baseline" in out
    assert not (project.home / "deviations").exists()

    accepted = agent(
        project,
        "plan",
        "bench.yaml",
        "--accept-deviation",
        "size 4 is the production setting",
        "--",
        "--bench-set",
        "size=4",
    )
    assert accepted.returncode == 0, accepted.stdout
    assert "deviation accepted and recorded" in accepted.stdout
    again = agent(project, "plan", "bench.yaml", "--", "--bench-set", "size=4")
    assert again.returncode == 0 and "deviation accepted earlier" in again.stdout

    assert agent(project, "run", "bench.yaml", "--", "--bench-set", "size=4").returncode == 0
    assert agent(project, "run", "bench.yaml").returncode == 0
    deviating, plain = project.results(-2), project.results(-1)
    (caveat,) = [c for c in deviating["caveats"] if c.startswith("comparability limited")]
    assert "size 4 is the production setting" in caveat and baseline in caveat
    assert not any(c.startswith("comparability limited") for c in plain["caveats"])


def test_a_changed_treatment_variable_is_challenged(project: BenchProject) -> None:
    baseline = reliable_baseline(project)
    project.bench(simple_bench(treatment_variable="size", treatments=[3, 4]))
    plan = agent(project, "plan", "bench.yaml")
    assert plan.returncode == EXIT_CHALLENGED
    assert f"the treatment variable is size, but the baseline {baseline} varied mode" in plan.stdout
    assert "keep treatment_variable: mode" in plan.stdout


def test_a_request_against_a_lesson_is_challenged(project: BenchProject) -> None:
    project.bench(simple_bench())
    add_note(
        project.home / LESSONS,
        Note(
            "size 3 fits in cache and flatters mode b",
            "T1",
            benchmark="simple",
            params={"size": "50"},
        ),
    )
    plan = agent(project, "plan", "bench.yaml")
    assert plan.returncode == EXIT_CHALLENGED
    assert "size = 3 contradicts the lesson of" in plan.stdout
    assert "aligned alternative: set size: 50 as the lesson recommends." in plan.stdout
    assert agent(project, "plan", "bench.yaml", "--", "--bench-set", "size=50").returncode == 0


def test_hypothesis_is_set_in_place_keeping_the_rest_of_the_file(project: BenchProject) -> None:
    text = (project.path / project.bench(simple_bench()).name).read_text()
    text = "# my comment\n" + text.replace(
        "hypothesis: mode b is no different from mode a\n",
        "hypothesis: >-\n  an old\n  folded one\n\n",
    )
    (project.path / "bench.yaml").write_text(text)
    plan = agent(
        project,
        "plan",
        "bench.yaml",
        "--hypothesis",
        'mode b scores 2x mode a: "b" doubles the work',
    )
    assert plan.returncode == 0, plan.stdout + plan.stderr
    new = (project.path / "bench.yaml").read_text()
    assert new.startswith("# my comment\n") and "old" not in new
    assert yaml.safe_load(new)["hypothesis"] == 'mode b scores 2x mode a: "b" doubles the work'
    assert new.replace(
        'hypothesis: "mode b scores 2x mode a: \\"b\\" doubles the work"\n', ""
    ) == text.replace("hypothesis: >-\n  an old\n  folded one\n", "")
