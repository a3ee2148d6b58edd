"""Issue 19, class 5: nothing a benchmark names leaves the data home, overflows a file name or
forges a line of a report.

Run ids (``--bench-run-id``: a usage error), the benchmark's name, stage names, ``produces:``
entries and ``metrics_from.file`` (gate 1: exit 2, naming the field and the fix) are refused
when they would leave the home or the stage's folders or are too long to be a file name; user
text that reaches Markdown (a treatment label, a hypothesis, an imported record's name) is
escaped, so ``report.md`` and ``results_index.md`` keep their own sections only. Real sessions;
every file under the project folder is compared before and after.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from benchhelpers import BenchProject
from hostilehelpers import (
    agent,
    assert_clean_exit,
    assert_nothing_outside,
    snapshot,
    tiny_bench,
)

#: The headings the engine writes in ``results_index.md`` and ``report.md``.
INDEX_HEADINGS = {"# Benchmark results", "## RELIABLE", "## QUALIFIED", "## UNRELIABLE"}
REPORT_HEADINGS = {
    "## Answer",
    "## Run",
    "## Controls",
    "## Results",
    "## What Went Wrong",
    "## Hosts and isolation",
    "## Preps",
    "## Environment",
}
FORGED = "x\n## RELIABLE (7)\n| [forged](https://example.invalid) | `<b>` |\n"


def refused(project: BenchProject, document: dict, *args: str, code: int = 2) -> str:
    """Run ``document``; assert it was refused cleanly with ``code`` and nothing was written
    outside the home; the output."""
    project.bench(document)
    before = snapshot(project.path)
    output = assert_clean_exit(project.run(*args), {code})
    assert_nothing_outside(project.home, before, project.path)
    runs = project.home / "runs"
    assert not runs.exists() or not any(runs.iterdir()), "a refused file made a run"
    return output


def with_stage(**changes) -> dict:
    document = tiny_bench()
    document["stages"][1].update(changes)
    return document


@pytest.mark.parametrize(
    "run_id", ["../../x", "../escaped", "/tmp/absolute-run", "..", ".", "a/b", "x" * 300, "-x"]
)
def test_a_run_id_outside_the_home_is_a_usage_error(bench_folder: BenchProject, run_id) -> None:
    output = refused(bench_folder, tiny_bench(), f"--bench-run-id={run_id}", code=4)
    assert (
        "--bench-run-id" in output
        and "folder name inside the data home" in output
        or ("at most" in output)
    )


def test_a_plain_run_id_is_used(bench_folder: BenchProject) -> None:
    assert_clean_exit(bench_folder.run("--bench-run-id", "nightly-2026.01_a"), {0})
    assert [p.name for p in bench_folder.runs()] == ["nightly-2026.01_a"]


@pytest.mark.parametrize("name", ["../../escape", "a/b", "..", "x" * 300, "two\nlines"])
def test_a_stage_name_that_is_no_folder_name_is_refused(project: BenchProject, name) -> None:
    output = refused(project, with_stage(name=name))
    assert re.search(r"stages\[1\] \(.*\)\.name: .*(must be letters|characters long)", output)
    assert "Fix: rename the stage" in output


@pytest.mark.parametrize("artifact", ["../../../outside", "/tmp/absolute", "a/b", "x" * 300])
def test_a_produces_entry_outside_the_cache_folder_is_refused(
    project: BenchProject, artifact
) -> None:
    document = tiny_bench()
    document["stages"][0]["produces"] = [artifact]
    document["stages"][0]["cmd"] = "echo 1 > out.txt"
    document["stages"][1]["cmd"] = "echo score=1; echo {mode}"
    output = refused(project, document)
    assert "stages[0] (build).produces:" in output and "Fix: name the artifact" in output


@pytest.mark.parametrize(
    "source", ["../../metrics.json", "/etc/hostname", "~/m.json", "{size}/m.json", "a/../../m"]
)
def test_a_metrics_file_outside_the_stage_folders_is_refused(project: BenchProject, source) -> None:
    document = with_stage(metrics_from={"file": source, "fields": ["score"]})
    output = refused(project, document)
    assert "stages[1] (measure).metrics_from.file:" in output
    assert "Fix: give a path relative to the stage's folder" in output


def test_a_metrics_file_a_treatment_takes_outside_is_refused(project: BenchProject) -> None:
    document = with_stage(metrics_from={"file": "m_{mode}.json", "fields": ["score"]})
    document["treatments"] = ["a", "../../../../tmp/x"]
    output = refused(project, document)
    assert "metrics_from.file: 'm_{mode}.json' takes a path from {mode} ('../../../../tmp/x')" in (
        output
    )


def test_metrics_files_in_the_stage_folders_are_read(project: BenchProject) -> None:
    document = with_stage(
        cmd="cat {data} > /dev/null; echo score=3 > {out}/m.txt; echo {mode}",
        metrics_from={"file": "{out}/m.txt", "fields": ["score"]},
    )
    project.bench(document)
    assert_clean_exit(project.run(), {0})
    assert [t["metrics"]["score"] for t in project.results()["trials"]] == [3.0, 3.0]


@pytest.mark.parametrize("name", ["n" * 300, "two\nlines", ""])
def test_a_benchmark_name_that_is_no_bounded_line_is_refused(project: BenchProject, name) -> None:
    output = refused(project, tiny_bench(name=name))
    assert "name: " in output and "must be one line of 1 to 100 characters" in output


@pytest.mark.parametrize("metric", ["m" * 300, "two\nlines"])
def test_a_metric_name_that_is_no_bounded_line_is_refused(project: BenchProject, metric) -> None:
    document = with_stage(metrics_from={"stdout": True, "fields": [metric]})
    document["metrics"] = {metric: {"direction": "higher", "primary": True}}
    output = refused(project, document)
    assert "a metric's name must be one line of 1 to 100 characters" in output


def test_a_detached_run_of_a_long_name_ends_cleanly(project: BenchProject) -> None:
    """The verb names the run before gate 1 reads the file: the id stays a valid file name,
    and the session's refusal is the run's marker."""
    project.bench(tiny_bench(name="n" * 300))
    before = snapshot(project.path)
    started = agent(project, "run", "bench.yaml", "--detach")
    output = assert_clean_exit(started, {0, 2})
    assert "File name too long" not in output
    assert_nothing_outside(project.home, before, project.path)


def test_user_text_cannot_forge_a_section(project: BenchProject) -> None:
    """A treatment label and a hypothesis holding newlines and a heading stay inside their
    cell and line, in the report, the index and the terminal."""
    document = tiny_bench(treatments=["a", f"b{FORGED}"], hypothesis=f"one{FORGED}two")
    project.bench(document)
    output = assert_clean_exit(project.run(), {0})
    assert "\n## RELIABLE (7)" not in output
    report = (project.runs()[-1] / "report.md").read_text()
    headings = {line for line in report.splitlines() if line.startswith("## ")}
    assert headings == REPORT_HEADINGS
    assert "<b>" not in report.replace("`<b>`", "")  # raw HTML only inside a code span
    index = (project.home / "results_index.md").read_text()
    assert {re.sub(r" \(\d+\)$", "", h) for h in index.splitlines() if h.startswith("#")} == (
        INDEX_HEADINGS | {"## EXPLORATORY"}
    )


def test_an_imported_record_cannot_forge_the_index(bench_folder: BenchProject) -> None:
    """A record from elsewhere never passed gate 1: a name that is no printable line is refused
    by import (issue 45, the typed loader), naming the field, so it forges no index line."""
    assert_clean_exit(bench_folder.run(), {0})
    exported = bench_folder.path / "run.json"
    assert_clean_exit(agent(bench_folder, "export", "latest", "-o", str(exported)), {0})
    document = json.loads(exported.read_text())
    document["record"]["name"] = FORGED
    document["run_id"] = document["record"]["run_id"] = document["config"]["run_id"] = "foreign-1"
    exported.write_text(json.dumps(document))
    other = bench_folder.path / "other"
    imported = subprocess.run(
        ["benchmark-agent", "--home", str(other), "import", str(exported)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    shown = assert_clean_exit(imported, {2})
    assert "record.name: 'x\\n## RELIABLE (7)" in shown and "is no benchmark name" in shown
    assert not [line for line in shown.splitlines() if line.startswith(("## ", "| [forged]"))]
    assert not (other / "results_index.md").exists() and not (other / "runs").exists()
