"""``benchmark-agent export --format csv|json|markdown`` and ``--junitxml``'s properties, on real
recorded runs: every trial's every metric round-trips, the portable default still imports, and
the JUnit XML carries each trial's metrics and the run's verdicts."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from benchhelpers import BenchProject
from gate2helpers import lazy_imports_done_outside_runs, run_as, scored  # noqa: F401

from pytest_benchmark_agent.cli.main import main
from pytest_benchmark_agent.report.exports import CSV_COLUMNS


def export(project: BenchProject, capsys: pytest.CaptureFixture[str], *words: str) -> str:
    capsys.readouterr()
    assert main(["--home", str(project.home), "export", *words]) == 0
    return capsys.readouterr().out


@pytest.fixture
def recorded(project: BenchProject) -> dict:
    """A finished run whose control ``b`` sorts after ``a``: scores 9 (b) against 6 (a)."""
    scored(project, params={"mode": "b", "size": 3}, treatments=["b", "a"], replicates=7)
    return run_as(project, "r1")


def test_csv_is_one_row_per_trial_and_metric_with_every_value_as_recorded(
    project: BenchProject, recorded: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = list(csv.DictReader(io.StringIO(export(project, capsys, "r1", "--format", "csv"))))
    assert tuple(rows[0]) == CSV_COLUMNS
    expected = [
        (trial["id"], metric, value)
        for trial in recorded["trials"]
        for metric, value in trial["metrics"].items()
    ]
    assert [(r["trial"], r["metric"], float(r["value"])) for r in rows] == [
        (t, m, float(v)) for t, m, v in expected
    ]
    scores = {(r["treatment"], r["replicate"]): r["value"] for r in rows if r["metric"] == "score"}
    assert float(scores[("a", "0")]) == 6 and float(scores[("b", "6")]) == 9
    assert {r["run_id"] for r in rows} == {"r1"} and {r["status"] for r in rows} == {"passed"}


def test_json_is_one_file_with_the_run_its_verdicts_and_every_trial(
    project: BenchProject, recorded: dict, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "r1.json"
    export(project, capsys, "r1", "--format", "json", "-o", str(out))
    document = json.loads(out.read_text())
    assert document["run"]["run_id"] == "r1" and document["run"]["tag"] == recorded["tag"]
    assert document["treatments"] == ["b", "a"]  # the control first
    assert document["verdicts"] == recorded["verdicts"]
    assert document["summary"]["score"]["a"]["median"] == 6
    assert [t["metrics"] for t in document["trials"]] == [t["metrics"] for t in recorded["trials"]]
    assert all("command" not in t for t in document["trials"])  # samples, not the commands


def test_markdown_is_a_table_per_metric_with_the_control_first(
    project: BenchProject, recorded: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    text = export(project, capsys, "r1", "--format", "markdown")
    section = text.split("## `score`", 1)[1].split("##", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert rows[0].startswith("| `b` (control) | 7 | 9 |")
    verdict = recorded["verdicts"]["score"]["a"]
    assert rows[1].startswith("| `a` | 7 | 6 |")
    assert f"x{verdict['ratio']:.4g}" in rows[1] and rows[1].endswith(f"{verdict['verdict']} |")


def test_the_default_export_is_still_the_portable_record_that_imports(
    project: BenchProject, recorded: dict, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "portable.json"
    export(project, capsys, "r1", "-o", str(out))
    assert json.loads(out.read_text())["format"] == "pytest-benchmark-agent/run"
    other = tmp_path / "other-home"
    other.mkdir()
    assert main(["--home", str(other), "import", str(out)]) == 0
    assert (other / "runs" / "r1" / "results.yaml").is_file()


def test_an_unknown_format_is_a_usage_error(
    project: BenchProject, recorded: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--home", str(project.home), "export", "r1", "--format", "xlsx"])
    assert exc.value.code == 2
    assert "invalid choice: 'xlsx'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "workers",
    [(), ("-n", "2", "-p", "no:benchmark")],
    ids=["serial", "xdist"],
)
def test_junit_xml_carries_each_trials_metrics_and_the_runs_verdicts(
    project: BenchProject, tmp_path: Path, workers: tuple[str, ...]
) -> None:
    """Under ``-n 2`` too: the workers run the trials, the controller writes the XML from the
    reports xdist carries back (their ``user_properties``); each trial's test case was empty."""
    scored(project, replicates=7)
    report = tmp_path / "junit.xml"
    result = project.run(
        "--bench-run-id", "j1", f"--junitxml={report}", *workers, subprocess=bool(workers)
    )
    assert result.ret == 0, result.stdout.str()
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None
    suite_properties = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert suite_properties["bench.run_id"] == "j1"
    verdict = suite_properties["bench.verdict.score.b"]
    assert verdict.startswith("improved x1.5 [1.5, 1.5]")
    cases = suite.findall("testcase")
    assert len(cases) == 14
    for case in cases:
        properties = {p.get("name"): p.get("value") for p in case.find("properties")}
        treatment = properties["bench.treatment"]
        assert properties["bench.status"] == "passed"
        assert float(properties["bench.metric.score"]) == {"a": 6, "b": 9}[treatment]
        assert f"mode={treatment}" in case.get("name")
