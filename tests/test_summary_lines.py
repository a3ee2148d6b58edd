"""The terminal summary, in real sessions: every judged metric (primaries first), user and
system CPU beside cpu_s, outliers by Tukey's fences, a hyperfine line per comparison and the
geometric mean of ratios within a run and across a session's files."""

from __future__ import annotations

import pytest
import yaml
from benchhelpers import BenchProject, simple_bench
from gate2helpers import lazy_imports_done_outside_runs, run_as, scored  # noqa: F401

from pytest_benchmark_agent.cli.main import main
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.report import terminal
from pytest_benchmark_agent.stats.describe import tukey_outliers
from pytest_benchmark_agent.stats.geomean import geometric_mean

#: ``score`` (primary) and ``bonus``, declared bonus first: the summary still lists score first.
TWO_METRICS = {
    "stages": [
        {
            "name": "measure",
            "kind": "measure",
            "cmd": "sh code/measure.sh {mode} {size}",
            "metrics_from": {"stdout": True, "fields": ["score", "bonus"]},
        }
    ],
    "metrics": {
        "bonus": {"direction": "higher"},
        "score": {"direction": "higher", "primary": True},
    },
    "replicates": 7,
}


def two_metrics(project: BenchProject, b: int = 3, name: str = "scored") -> None:
    scored(project, b=b, name=name, **TWO_METRICS)
    project.write(
        "code/measure.sh",
        'read v < "data/$1.txt"; echo score=$(( v * $2 )); echo bonus=$(( v * $2 * 2 ))\n',
    )


def summary(result: pytest.RunResult) -> list[str]:
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "benchmark summary" in line)
    return lines[start + 1 :]


def test_the_summary_lists_primaries_first_user_sys_and_a_line_per_comparison(
    project: BenchProject,
) -> None:
    two_metrics(project)
    result = project.run()
    assert result.ret == pytest.ExitCode.OK
    lines = summary(result)
    table = [
        line.split()[0]
        for line in lines
        if line.startswith("  score ") or line.startswith("  bonus ")
    ]
    assert table[:2] == ["score", "bonus"]
    split = next(line for line in lines if line.startswith("  cpu_s (medians)"))
    assert "a: " in split and "= user " in split and " + sys " in split
    assert "  b: score 1.5x higher than a (x1.5, 95% [1.5, 1.5]) - improved" in lines
    assert "  b: bonus 1.5x higher than a (x1.5, 95% [1.5, 1.5]) - improved" in lines
    assert (
        "  geometric mean of 2 higher-is-better ratios b/a (score, bonus): x1.5 [x1.5, x1.5]"
        in lines
    )
    trial = project.results()["trials"][0]
    assert trial["cpu_s"] == pytest.approx(trial["user_s"] + trial["sys_s"], abs=2e-6)


def test_a_secondary_metrics_verdict_against_the_baseline_is_listed(
    project: BenchProject,
) -> None:
    two_metrics(project)
    run_as(project, "r1")
    two_metrics(project, b=1)
    result = project.run("--bench-baseline", "r1")
    lines = summary(result)
    against = [line.split()[0] for line in lines if line.startswith("    `")]
    assert against[:2] == ["`score`", "`score`"] and "`bonus`" in against  # primary first
    bonus_b = next(line for line in lines if line.startswith("    `bonus` [b] "))
    assert "regressed x0.333" in bonus_b
    # report.md opens with the primary's verdicts against the baseline too, in the same words
    (run_dir,) = [path for path in project.runs() if path.name != "r1"]
    report = (run_dir / "report.md").read_text()
    answer = report.split("## Answer", 1)[1].split("## Run", 1)[0]
    assert "- **this session [b]: score 3x lower than baseline r1 (x0.333" in answer


def test_outliers_beyond_tukeys_fences_are_counted_per_metric(project: BenchProject) -> None:
    scored(project)
    # the third trial of the session scores 100 where every other scores 6 or 9
    project.write(
        "code/measure.sh",
        "n=$(cat count 2>/dev/null || echo 0); n=$((n + 1)); echo $n > count\n"
        'if [ $n -eq 3 ]; then echo score=100; else read v < "data/$1.txt"; '
        "echo score=$(( v * $2 )); fi\n",
    )
    result = project.run()
    lines = summary(result)
    outliers = next(line for line in lines if "outliers (Tukey's fences)" in line)
    assert outliers.split() == [
        "score",
        "outliers",
        "(Tukey's",
        "fences):",
        "a",
        "0/6,",
        "b",
        "1/6",
    ]


def test_a_refused_baseline_line_names_no_none(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    scored(project)
    run_as(project, "r1")
    assert main(["--home", str(project.home), "reclassify", "r1", "UNRELIABLE", "--why", "t"]) == 0
    result = project.run("--bench-baseline", "r1")
    line = next(line for line in summary(result) if line.startswith("  baseline r1"))
    assert "None" not in line and line.startswith("  baseline r1 (r1): code (not read) -> ")


def test_the_session_gives_the_geometric_mean_across_its_files(project: BenchProject) -> None:
    scored(project)
    document = yaml.safe_load((project.path / "bench.yaml").read_text())
    project.bench({**document, "name": "again"}, "bench_again.yaml")
    result = project.run()
    assert result.ret == pytest.ExitCode.OK
    lines = summary(result)
    assert (
        "geometric mean of 2 higher-is-better ratios across the session's files "
        "(scored:score[b], again:score[b]): x1.5 [x1.5, x1.5]" in lines
    )


def test_tukeys_fences_count_only_what_lies_beyond_them() -> None:
    assert tukey_outliers([1.0, 1.1, 0.9, 1.0, 1.05, 5.0]) == 1
    assert tukey_outliers([1.0, 1.1, 0.95, 1.05]) == 0
    assert tukey_outliers([1.0, 9.0, 1.0]) == 0  # too few to have quartiles


def test_the_geometric_means_interval_is_that_of_its_parts_ends() -> None:
    mean = geometric_mean([("x", 2.0, [1.0, 4.0]), ("y", 0.5, [0.25, 1.0])])
    assert mean is not None and mean.ratio == pytest.approx(1.0)
    assert mean.ci == pytest.approx((0.5, 2.0))
    assert geometric_mean([("x", 2.0, [1.0, 4.0])]) is None  # one ratio is its own summary
    partial = geometric_mean([("x", 2.0, None), ("y", 8.0, [4.0, 16.0])])
    assert partial is not None and partial.ratio == pytest.approx(4.0) and partial.ci is None


def test_the_baseline_lines_show_the_verdicts_the_ci_gate_judged() -> None:
    """Against a recorded baseline the gate judges the session-level verdicts (``judged``); the
    trial-level ones (``verdicts``) are kept for the report, never shown as the gate's."""
    trial_level = {"verdict": "regressed", "ratio": 0.9, "against": "r1 `b`"}
    session_level = {"verdict": "no_change", "ratio": 0.9, "against": "r1 `b`"}
    record = RunRecord.from_dict(
        {
            "run_id": "r2",
            "treatment_variable": "mode",
            "control": "a",
            "treatments": ["a", "b"],
            "baseline": {
                "run_id": "r1",
                "verdicts": {"score": {"b": trial_level}},
                "judged": {"score": {"b": session_level}},
                "code": {"baseline": "abc1234", "this": "def5678"},
            },
        },
        config=simple_bench(),
    )
    lines = terminal._baseline_lines(record)
    assert lines[0] == "  baseline r1: code abc1234 -> def5678"
    assert lines[1:] == ["    `score` [b] no_change x0.9 against r1 `b`"]
