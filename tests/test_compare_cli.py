"""``benchmark-agent compare``, ``history`` and ``analyze`` on real recorded runs."""

from __future__ import annotations

import pytest
from benchhelpers import BenchProject
from gate2helpers import lazy_imports_done_outside_runs, run_as, scored  # noqa: F401

from pytest_benchmark_agent.cli.main import main
from pytest_benchmark_agent.records.record import load_run


def cli(project: BenchProject, capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str]:
    capsys.readouterr()  # what the runs before printed
    code = main(["--home", str(project.home), *words])
    return code, capsys.readouterr().out


def test_compare_two_runs_of_one_config_shows_b_against_a_and_the_reproduction(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    scored(project)
    run_as(project, "r1")
    run_as(project, "r2")
    code, out = cli(project, capsys, "compare", "r1", "r2")
    assert code == 0
    assert (
        "gate 1: they differ in the treatment variable's values only; gate 2: fingerprints "
        "equal where it matters" in out
    )
    rows = {
        line.split()[0]: line.split()
        for line in out.splitlines()
        if line.startswith("  a ") or line.startswith("  b ")
    }
    assert rows["a"][1:4] == ["6", "6", "no_change"] and rows["b"][1:4] == ["9", "9", "no_change"]
    assert "code: content:" in out and "(the same code)" in out
    assert "Same frozen config and code: does B reproduce A's verdicts? yes" in out
    assert (
        "`score` [b]: improved x1.5 [1.5, 1.5] here, improved x1.5 [1.5, 1.5] in r1: "
        "reproduced (the same direction, intervals overlap)" in out
    )


def test_compare_against_other_treatments_uses_a_s_control(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    scored(project)
    run_as(project, "r1")
    scored(project, treatments=["a", "c"])
    run_as(project, "r2")
    code, out = cli(project, capsys, "compare", "r1", "r2")
    assert code == 0
    row = next(line.split() for line in out.splitlines() if line.startswith("  c "))
    assert row[1:4] == ["6", "9", "improved"]  # c of B against a, A's control
    assert "Same frozen config" not in out


def test_compare_refuses_runs_that_differ_in_a_control_naming_it(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    scored(project)
    run_as(project, "r1")
    run_as(project, "r2", "--bench-set", "size=4")
    code, out = cli(project, capsys, "compare", "r1", "r2")
    assert code == 1
    assert "not_comparable: the runs differ in more than the treatment variable's values" in out
    assert "  - params.size: '3' (A) vs '4' (B)" in out
    assert "not_comparable" in next(line for line in out.splitlines() if line.startswith("  b "))


def test_compare_across_code_names_both_sides_and_checks_no_reproduction(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    scored(project)
    run_as(project, "r1")
    project.write("code/measure.sh", '# v2\nread v < "data/$1.txt"; echo score=$(( v * $2 ))\n')
    run_as(project, "r2")
    code, out = cli(project, capsys, "compare", "r1", "latest")
    assert code == 0  # a difference of code is what is compared, not a refusal
    labels = [load_run(project.home / "runs" / run).code for run in ("r1", "r2")]
    assert labels[0] != labels[1] and all(label.startswith("content:") for label in labels)
    assert (
        f"code: {labels[0]} -> {labels[1]} (B measured other code: this is a comparison of "
        "code)" in out
    )
    assert f"B against A ({labels[0]} -> {labels[1]})" in out
    (code_line,) = [line for line in out.splitlines() if line.startswith("  code difference")]
    assert code_line.startswith("  code differences: code_identity.content_hash: ")  # one line
    assert "Same frozen config, other code: B is compared with A across code, not a rerun" in out


def test_compare_refuses_a_differing_declared_variable_naming_it(
    project: BenchProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_FLAVOUR", "plain")
    scored(project, env_vars=["BENCH_FLAVOUR"])
    run_as(project, "r1")
    monkeypatch.setenv("BENCH_FLAVOUR", "spicy")
    run_as(project, "r2")
    code, out = cli(project, capsys, "compare", "r1", "r2")
    assert code == 1
    assert "  - fingerprints differ in fields that matter: vars[BENCH_FLAVOUR]" in out
    assert "fingerprint difference that matters: vars[BENCH_FLAVOUR]: plain -> spicy" in out


def test_compare_says_what_it_searched_when_a_ref_names_no_run(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    scored(project)
    run_as(project, "r1")
    code = main(["--home", str(project.home), "compare", "r1", "nope"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(
        "benchmark-agent compare: unjudged: `nope` is no run id or unique "
        "prefix of one among 1 recorded run(s)"
    )


def test_history_lists_runs_with_tag_and_primary_verdicts_filtered_by_name(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    scored(project)
    run_as(project, "r1")
    run_as(project, "r2")
    scored(project, name="other")
    run_as(project, "r3")
    code, out = cli(project, capsys, "history", "--name", "scored")
    assert code == 0
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == ["r1", "r2"]
    assert lines[1].split()[1:4] == ["complete", "RELIABLE", "scored"]
    assert lines[1].endswith("primary: score b improved")
    assert len(cli(project, capsys, "history")[1].splitlines()) == 3


def test_analyze_prints_the_report_and_the_skeptical_outline(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    scored(project)
    run_as(project, "r1", "--bench-isolation", "none")
    code, out = cli(project, capsys, "analyze", "latest")
    assert code == 0
    report, outline = out.split("## Skeptical reading (outline)")
    assert "## What Went Wrong" in report and "| `b` | **improved** |" in report
    headings = [line for line in outline.splitlines() if line.startswith("### ")]
    assert headings == [
        "### 1. What was claimed",
        "### 2. Why it might be wrong (check each)",
        "### 3. What Went Wrong",
        "### 4. What it means",
    ]
    claimed, why, wrong, means = outline.split("### ")[1:]
    assert "- `score` [b against a]: improved, ratio 1.5, 95% CI [1.5, 1.5]" in claimed
    assert (
        "- Noise against the effect, `score` [b]: effect +50.0% against the noise threshold "
        "1.0%" in why
    )
    assert "- Control drift across sessions: not checked (no baseline)." in why
    assert "isolation 'none'" in wrong  # the run's caveat, never an empty section
    assert means.splitlines()[2].startswith("- EXPLORATORY: a lead, not a conclusion")
