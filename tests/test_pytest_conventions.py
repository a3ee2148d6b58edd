"""pytest's conventions in benchmark sessions (issue 22, part A): ini options with the command
line winning, the registered ``bench`` marker, ``-k`` on whole words of a trial id, ``--lf``
re-running only the failed trials, and ``plan``'s challenge status outside pytest's codes."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchhelpers import BenchProject, simple_bench

import pytest_benchmark_agent.stats.analysis  # noqa: F401  (numpy, loaded before any pytester)
from pytest_benchmark_agent.cli.session import EXIT_CHALLENGED


def numbered(**overrides) -> dict:
    """Treatments 1, 10 and 2, two replicates: ids ``measure[mode=10-rep1]`` and the like."""
    return simple_bench(params={"mode": 1, "size": 3}, treatments=[1, 10, 2], **overrides)


def collected(result: pytest.RunResult) -> list[str]:
    return [line.split("::", 1)[1] for line in result.outlines if line.startswith("bench.yaml::")]


def test_k_selects_a_treatment_value_and_a_replicate_by_whole_words(
    project: BenchProject,
) -> None:
    project.bench(numbered())
    only_1 = collected(project.run("--collect-only", "-q", "-k", "1"))
    assert sorted(only_1) == ["measure[mode=1-rep0]", "measure[mode=1-rep1]"]  # not rep1
    rep1 = collected(project.run("--collect-only", "-q", "-k", "rep1"))
    assert sorted(rep1) == [f"measure[mode={m}-rep1]" for m in (1, 10, 2)]
    one = collected(project.run("--collect-only", "-q", "-k", "10 and rep0"))
    assert one == ["measure[mode=10-rep0]"]
    negated = collected(project.run("--collect-only", "-q", "-k", "not 1"))
    assert len(negated) == 4 and "measure[mode=10-rep0]" in negated
    by_id = collected(project.run("--collect-only", "-q", "-k", "2-rep1]"))
    assert by_id == ["measure[mode=2-rep1]"]
    # The stage and the file still match on substrings, as pytest's -k does.
    assert len(collected(project.run("--collect-only", "-q", "-k", "meas"))) == 6
    bad = project.run("--collect-only", "-q", "-k", "mode=1")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "Wrong expression passed to '-k'" in bad.stderr.str()


def test_the_bench_marker_is_registered_and_carried_by_every_trial(
    project: BenchProject,
) -> None:
    project.bench(numbered(replicates=1))
    markers = project.pytester.runpytest_inprocess("--markers")
    assert any(line.startswith("@pytest.mark.bench:") for line in markers.outlines)
    strict = project.run("--collect-only", "-q", "--strict-markers", "-m", "bench")
    assert strict.ret == pytest.ExitCode.OK and len(collected(strict)) == 3
    assert project.run("--collect-only", "-q", "-m", "not bench").ret == (
        pytest.ExitCode.NO_TESTS_COLLECTED
    )


def test_ini_options_set_a_session_and_the_command_line_wins(project: BenchProject) -> None:
    project.bench(simple_bench(treatments=["a", "b"], replicates=1))
    project.write(
        "pyproject.toml",
        """
        [tool.pytest.ini_options]
        bench_home = "data/from-ini"
        bench_isolation = "none"
        bench_set = ["size=5"]
        """,
    )
    assert project.run().ret == 0
    runs = sorted((project.path / "data" / "from-ini" / "runs").iterdir())
    assert len(runs) == 1 and not project.home.exists()
    from pytest_benchmark_agent.records.reader import load_results

    record = load_results(runs[0])
    assert record["trials"][0]["metrics"]["score"] == 10  # size=5 from the ini file
    assert "isolation 'none'" in str(record)  # its caveat
    # The command line wins over the ini file, an override over the ini file's override.
    elsewhere = project.path / "cli-home"
    assert project.run("--bench-home", str(elsewhere), "--bench-set", "size=7").ret == 0
    (run,) = (elsewhere / "runs").iterdir()
    assert load_results(run)["trials"][0]["metrics"]["score"] == 14


def test_a_bad_ini_value_is_a_usage_error_naming_the_file_and_key(
    project: BenchProject,
) -> None:
    project.bench(simple_bench(replicates=1))
    project.write("pytest.ini", "[pytest]\nbench_fail_on = regresion\n")
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "pytest.ini: bench_fail_on = 'regresion'" in err and "regression" in err
    project.write("pytest.ini", "[pytest]\nbench_isolation = full\n")
    err = project.run().stderr.str()
    assert "pytest.ini: bench_isolation = 'full': give host or none" in err


def test_last_failed_reruns_only_the_failed_trials(pytester: pytest.Pytester) -> None:
    project = BenchProject(pytester)
    document = numbered(replicates=1)
    document["stages"][1]["cmd"] = "test {mode} != 10 || exit 1; echo score=1"
    project.bench(document)
    first = pytester.runpytest_inprocess("--bench", "-p", "no:randomly", "bench.yaml")
    assert first.ret == pytest.ExitCode.TESTS_FAILED
    again = pytester.runpytest_inprocess("--bench", "-p", "no:randomly", "bench.yaml", "--lf")
    again.assert_outcomes(failed=1, deselected=2)
    assert "rerun previous 1 failure" in again.stdout.str()
    first_ff = pytester.runpytest_inprocess(
        "--bench", "-p", "no:randomly", "bench.yaml", "--ff", "--collect-only", "-q"
    )
    assert collected(first_ff)[0] == "measure[mode=10-rep0]"


def test_plans_challenge_status_is_not_one_of_pytests_codes() -> None:
    assert EXIT_CHALLENGED not in {int(code) for code in pytest.ExitCode}
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    assert f"| {EXIT_CHALLENGED} |" in readme  # documented with the exit codes
