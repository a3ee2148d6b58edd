"""Small things a user of other benchmark tools saw (issue 39, point 7), each checked here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from benchhelpers import BenchProject, simple_bench

from pytest_benchmark_agent.stats.units import human, unit_of

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("metric", "value", "shown"),
    [
        ("tokens_per_s", 1234.5, "1234/s"),
        ("queries/s", 12.0, "12/s"),
        ("requests_per_sec", 0.5, "0.5/s"),
        ("latency_s", 0.5, "500 ms"),  # a time still reads as one
    ],
)
def test_a_rate_is_shown_per_second_never_as_a_time(metric: str, value: float, shown: str) -> None:
    assert human(value, metric) == shown
    assert unit_of(metric) == ("s" if metric == "latency_s" else "per second")


def test_jsonschema_is_in_the_test_extra_so_the_schema_test_runs_on_a_fresh_install() -> None:
    tomllib = pytest.importorskip("tomllib", reason="TOML parsing needs Python 3.11")
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["test"]
    assert any(re.match(r"jsonschema\b", requirement) for requirement in extra)


def test_the_readme_says_how_long_this_test_suite_takes() -> None:
    """The README's time is of this suite: the count of tests it was measured on is within a
    tenth of what pytest collects now (a suite grown or shrunk past that needs a new timing)."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Run the tests", 1)[1].split("\n## ", 1)[0]
    timing = re.search(r"takes\s+about \d+ minutes on \d+ quiet cores \(([\d,]+) tests", section)
    assert timing, "README.md, Run the tests: no 'takes about N minutes on C quiet cores (T tests'"
    stated = int(timing.group(1).replace(",", ""))
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:randomly"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    count = re.search(r"^(\d+)(?:/\d+)? tests? collected", collected, re.MULTILINE)
    assert count, collected[-2000:]
    assert abs(stated - int(count.group(1))) <= int(count.group(1)) / 10, (
        f"README.md says the suite has {stated} tests; pytest collects {count.group(1)}: "
        "time the suite again and update the sentence"
    )


def test_a_collection_error_leaves_no_record_of_the_files_that_never_started(
    project: BenchProject,
) -> None:
    project.bench(simple_bench(), "ok/bench.yaml")
    project.bench({"name": "broken", "stages": []}, "broken/bench.yaml")
    result = project.run()  # no file named: every benchmark file below is collected
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR broken/bench.yaml*"])
    assert project.runs() == []  # not an `interrupted` run for ok/bench.yaml, which never ran


def test_the_data_home_is_never_walked_for_benchmark_files(project: BenchProject) -> None:
    project.bench(simple_bench(), "bench.yaml")
    # a bisect worktree in the data home holds a copy of the project's benchmark file
    project.bench(simple_bench(name="copy"), "benchmark_data/bisect/b1/worktree/bench.yaml")
    result = project.run("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    collected = [line for line in result.stdout.lines if "::" in line]
    assert collected and all(line.startswith("bench.yaml::") for line in collected)


def test_testpaths_and_norecursedirs_are_respected(project: BenchProject) -> None:
    project.bench(simple_bench(), "benchmarks/bench.yaml")
    project.bench(simple_bench(name="scratch"), "scratch/bench.yaml")
    project.bench(simple_bench(name="vendored"), "benchmarks/vendor/bench.yaml")
    project.write("pytest.ini", "[pytest]\ntestpaths = benchmarks\nnorecursedirs = vendor\n")
    result = project.run("--collect-only", "-q")
    collected = {line.split("::")[0] for line in result.stdout.lines if "::" in line}
    assert collected == {"benchmarks/bench.yaml"}
