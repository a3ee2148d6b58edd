"""Issue 45, point 3: recorded numbers whose arithmetic overflows a float.

A stage may print any finite float: the mean of two ``1e308`` overflows (the session ended in a
raw ``OverflowError`` and left its record ``running``), and so does the ratio of ``1e150`` to
``1e-300``. A trial refuses a value beyond ``MAX_MAGNITUDE`` with the reason; the summaries
compute what fits a float and record none for what does not; the session finishes its record
either way, and ``status`` counts the trials recorded.
"""

from __future__ import annotations

from benchhelpers import BenchProject
from hostilehelpers import agent, assert_clean_exit, assert_trials_on_disk, tiny_bench

from pytest_benchmark_agent.stats.describe import describe, median_ratio
from pytest_benchmark_agent.stats.geomean import geometric_mean


def finished(project: BenchProject, exits: set[int]) -> dict:
    """The record of the project's one run, asserted finished: a state, a report, an index
    entry, every journalled trial recorded, and ``status`` counting them."""
    assert_clean_exit(project.run(), exits)
    [run_dir] = project.runs()
    results = project.results()
    assert results["state"] == "complete"
    assert (run_dir / "report.md").is_file() and (run_dir / "index.json").is_file()
    assert len(assert_trials_on_disk(run_dir)) == len(results["trials"])
    status = assert_clean_exit(agent(project, "status"), {0})
    assert f"{run_dir.name}: complete ({len(results['trials'])} trials recorded)" in status
    return results


def test_a_value_beyond_the_largest_magnitude_fails_its_trial_saying_why(
    project: BenchProject,
) -> None:
    document = tiny_bench(replicates=2)
    del document["treatment_variable"], document["treatments"]
    document["stages"][1]["cmd"] = "echo score=1e308; echo mode={mode}"
    project.bench(document)
    results = finished(project, {1})
    assert [t["status"] for t in results["trials"]] == ["failed", "failed"]
    for trial in results["trials"]:
        assert "metric 'score' on stdout is '1e308', beyond ±1e+150" in trial["reason"]
        assert "in a larger unit" in trial["reason"]


def test_values_whose_ratio_overflows_finish_the_record_without_a_ratio(
    project: BenchProject,
) -> None:
    """Both values are recorded (each is within the bound); their ratio, 1e450, is not a float:
    the summary records none, gate 2 refuses the comparison saying why (it said ``xinf +-
    nan``), and the plots and the report still finish."""
    document = tiny_bench(replicates=6)
    document["stages"][1]["cmd"] = (
        "if [ {mode} = a ]; then echo score=1e-300; else echo score=1e150; fi; echo mode={mode}"
    )
    project.bench(document)
    results = finished(project, {0, 1})
    assert {t["status"] for t in results["trials"]} == {"passed"}
    row = results["summary"]["score"]["b"]
    assert row["median"] == 1e150 and row["ratio_to_control"] is None
    verdict = results["verdicts"]["score"]["b"]
    assert verdict["verdict"] == "not_comparable" and verdict["ratio"] is None
    assert "relative effect beyond a float" in verdict["reason"]
    report = (project.runs()[0] / "report.md").read_text()
    assert "xinf" not in report and "1.000e+150" in report  # not 151 digits


def test_the_summary_of_values_near_the_float_limit_cannot_overflow() -> None:
    """An older record or an import may hold 1e308: its mean, median and stdev are computed
    without overflowing, and a stdev or ratio beyond a float is none, not ``inf``."""
    row = describe([1e308, 1e308])
    assert row["mean"] == row["median"] == 1e308 and row["stdev"] == 0.0
    spread = describe([-1.7e308, 1.7e308])
    assert spread["mean"] == spread["median"] == 0.0 and spread["stdev"] is None
    assert spread["cv"] is None
    assert describe([1.0, 2.0, 4.0])["stdev"] == 1.52753  # unchanged for everyday values
    assert median_ratio({"n": 1, "median": 1e150}, {"n": 1, "median": 1e-300}) is None


def test_status_of_a_run_left_running_counts_its_recorded_trials(project: BenchProject) -> None:
    """A session that died while finishing (as the overflow made it) leaves its record
    ``running``: ``status`` counts the trials recorded, not its last heartbeat's count."""
    document = tiny_bench(replicates=2)
    del document["treatment_variable"], document["treatments"]
    project.bench(document)
    assert_clean_exit(project.run(subprocess=True), {0})
    [run_dir] = project.runs()
    record = run_dir / "results.yaml"
    record.write_text(record.read_text().replace("state: complete", "state: running", 1))
    status = assert_clean_exit(agent(project, "status"), {1})
    assert "2 trial(s) recorded are kept" in status and "trials done" not in status


def test_a_run_left_running_with_1e308_in_its_journal_is_finalized(project: BenchProject) -> None:
    """The record an earlier version left: its trials hold ``1e308`` (no trial refused it) and
    its session died summarizing them. A later verb finalizes it: summaries, gate 2 and the
    report computed without overflowing (no plot: matplotlib's ticks overflow on it), where
    every verb said the run "could not be finalized"."""
    document = tiny_bench(replicates=2)
    document["stages"][1]["cmd"] = "echo score=1e100; echo mode={mode}"
    project.bench(document)
    assert_clean_exit(project.run(subprocess=True), {0})
    [run_dir] = project.runs()
    journal, record = run_dir / "trials.jsonl", run_dir / "results.yaml"
    journal.write_text(journal.read_text().replace("1e+100", "1e+308"))
    text = record.read_text().replace("1.0e+100", "1.0e+308")
    record.write_text(text.replace("state: complete", "state: running", 1))
    for leftover in ("report.md", "index.json", "plot-score.png"):
        (run_dir / leftover).unlink()
    history = assert_clean_exit(agent(project, "history"), {0})
    assert "could not be finalized" not in history and "overflow" not in history
    results = project.results()
    assert results["state"] == "interrupted"
    assert results["summary"]["score"]["b"]["median"] == 1e308
    assert results["summary"]["score"]["b"]["ratio_to_control"] == 1.0
    assert (run_dir / "report.md").is_file() and (run_dir / "index.json").is_file()
    assert not (run_dir / "plot-score.png").exists()


def test_a_ratio_past_a_floats_range_is_left_out_of_the_geometric_mean() -> None:
    """A ratio (or an interval end) that overflowed to ``inf`` made the session's geometric
    mean ``inf``: it is left out, as a ratio of none is."""
    inf = float("inf")
    both = geometric_mean([("a", inf, (1.0, inf)), ("b", 2.0, (1.0, 3.0)), ("c", 8.0, (4.0, 16.0))])
    assert both is not None and both.ratio == 4.0 and both.names == ("b", "c")
    assert both.ci is not None and both.ci[1] < inf
    unbounded = geometric_mean([("a", 2.0, (1.0, inf)), ("b", 2.0, (1.0, 3.0))])
    assert unbounded is not None and unbounded.ratio == 2.0 and unbounded.ci is None
