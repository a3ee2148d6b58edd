"""``benchmark-agent compare``, ``history`` and ``analyze`` on recorded runs: records the
engine's writers wrote to a data home (tests/support/records.py), as sessions leave them; the
verbs read only the home."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.records import constant, recorded, scored_config

from pytest_benchmark_agent.cli.main import main
from pytest_benchmark_agent.records.record import load_run
from pytest_benchmark_agent.records.run import CAVEAT_NONE

#: What the scored benchmark measures (gate2helpers.scored): b at x1.5 of a.
SCORES = {"score": constant({"a": 6, "b": 9})}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The data home of the runs."""
    return tmp_path / "benchmark_data"


def cli(home: Path, capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str]:
    capsys.readouterr()  # what the runs before printed
    code = main(["--home", str(home), *words])
    return code, capsys.readouterr().out


def test_compare_two_runs_of_one_config_shows_b_against_a_and_the_reproduction(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded(home, "r1", SCORES)
    recorded(home, "r2", SCORES)
    code, out = cli(home, capsys, "compare", "r1", "r2")
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
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded(home, "r1", SCORES)
    other = scored_config(treatments=["a", "c"])
    recorded(home, "r2", {"score": constant({"a": 6, "c": 9})}, config=other)
    code, out = cli(home, capsys, "compare", "r1", "r2")
    assert code == 0
    row = next(line.split() for line in out.splitlines() if line.startswith("  c "))
    assert row[1:4] == ["6", "9", "improved"]  # c of B against a, A's control
    assert "Same frozen config" not in out


def test_compare_refuses_runs_that_differ_in_a_control_naming_it(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded(home, "r1", SCORES)
    larger = scored_config(params={"mode": "a", "size": 4})  # --bench-set size=4
    recorded(home, "r2", {"score": constant({"a": 8, "b": 12})}, config=larger)
    code, out = cli(home, capsys, "compare", "r1", "r2")
    assert code == 1
    assert "not_comparable: the runs differ in more than the treatment variable's values" in out
    assert "  - params.size: '3' (A) vs '4' (B)" in out
    assert "not_comparable" in next(line for line in out.splitlines() if line.startswith("  b "))


def test_compare_across_code_names_both_sides_and_checks_no_reproduction(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded(home, "r1", SCORES)
    recorded(home, "r2", SCORES, code="v2")  # the code edited
    code, out = cli(home, capsys, "compare", "r1", "latest")
    assert code == 0  # a difference of code is what is compared, not a refusal
    labels = [load_run(home / "runs" / run).code for run in ("r1", "r2")]
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
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    declared = scored_config(env_vars=["BENCH_FLAVOUR"])
    for run_id, flavour in (("r1", "plain"), ("r2", "spicy")):  # $BENCH_FLAVOUR at each run
        fingerprint = {"vars": {"BENCH_FLAVOUR": flavour}}
        recorded(home, run_id, SCORES, config=declared, fingerprint=fingerprint)
    code, out = cli(home, capsys, "compare", "r1", "r2")
    assert code == 1
    assert "  - fingerprints differ in fields that matter: vars[BENCH_FLAVOUR]" in out
    assert "fingerprint difference that matters: vars[BENCH_FLAVOUR]: plain -> spicy" in out


def test_compare_says_what_it_searched_when_a_ref_names_no_run(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded(home, "r1", SCORES)
    code = main(["--home", str(home), "compare", "r1", "nope"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(
        "benchmark-agent compare: unjudged: `nope` is no run id or unique "
        "prefix of one among 1 recorded run(s)"
    )


def test_history_lists_runs_with_tag_and_primary_verdicts_filtered_by_name(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded(home, "r1", SCORES)
    recorded(home, "r2", SCORES)
    recorded(home, "r3", SCORES, config=scored_config(name="other"))
    code, out = cli(home, capsys, "history", "--name", "scored")
    assert code == 0
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == ["r1", "r2"]
    assert lines[1].split()[1:4] == ["complete", "RELIABLE", "scored"]
    assert lines[1].endswith("primary: score b improved")
    assert len(cli(home, capsys, "history")[1].splitlines()) == 3


def test_analyze_prints_the_report_and_the_skeptical_outline(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded(home, "r1", SCORES, caveats=[CAVEAT_NONE])  # --bench-isolation none
    code, out = cli(home, capsys, "analyze", "latest")
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
