"""``benchmark-agent compare A B --fail-on``: the session's CI gate outside pytest, with what
REF resolved to, the code's differences on one line and the geometric mean of the ratios."""

from __future__ import annotations

import pytest
from benchhelpers import BenchProject
from gate2helpers import lazy_imports_done_outside_runs, run_as, scored  # noqa: F401

from pytest_benchmark_agent.cli.compare_gate import code_difference_line
from pytest_benchmark_agent.cli.main import main


def cli(project: BenchProject, capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str]:
    capsys.readouterr()  # what the runs before printed
    code = main(["--home", str(project.home), *words])
    return code, capsys.readouterr().out


def two_metrics(project: BenchProject, b: int = 3) -> None:
    """``score`` (primary) and ``bonus`` (twice it), both higher-is-better."""
    scored(
        project,
        b=b,
        replicates=7,  # two metrics: Holm's first step needs 7 blocks
        stages=[
            {
                "name": "measure",
                "kind": "measure",
                "cmd": "sh code/measure.sh {mode} {size}",
                "metrics_from": {"stdout": True, "fields": ["score", "bonus"]},
            }
        ],
        metrics={
            "score": {"direction": "higher", "primary": True},
            "bonus": {"direction": "higher"},
        },
    )
    project.write(
        "code/measure.sh",
        'read v < "data/$1.txt"; echo score=$(( v * $2 )); echo bonus=$(( v * $2 * 2 ))\n',
    )


def test_a_regressed_pair_fails_the_gate_with_exit_1(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    scored(project)
    run_as(project, "r1")
    scored(project, b=1)  # the data, not the code: b now scores 3 where it scored 9
    run_as(project, "r2")
    code, out = cli(project, capsys, "compare", "r1", "r2", "--fail-on", "regression")
    assert code == 1
    assert "CI gate: REGRESSED: `score` [b] regressed x0.333 against" in out
    plain, _ = cli(project, capsys, "compare", "r1", "r2")
    assert plain == 0  # without --fail-on a regression is reported, not an exit status


def test_an_unregressed_pair_passes_the_gate(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    scored(project)
    run_as(project, "r1")
    run_as(project, "r2")
    code, out = cli(project, capsys, "compare", "r1", "r2", "--fail-on", "regression,unjudged")
    assert code == 0 and "CI gate: passed" in out


def test_a_ref_naming_no_run_is_unjudged_and_fails_only_when_asked(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    scored(project)
    run_as(project, "r1")
    code, out = cli(project, capsys, "compare", "r1", "nope", "--fail-on", "regression,unjudged")
    assert code == 1 and "CI gate: UNJUDGED: `nope` is no run id" in out
    code, out = cli(project, capsys, "compare", "r1", "nope", "--fail-on", "regression")
    assert code == 0 and "CI gate: UNJUDGED" in out


def test_fail_on_refuses_an_unknown_word(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    scored(project)
    run_as(project, "r1")
    with pytest.raises(SystemExit) as exited:
        main(["--home", str(project.home), "compare", "r1", "r1", "--fail-on", "slower"])
    assert exited.value.code == 2
    assert "give a comma list of regression, unjudged" in capsys.readouterr().err


def test_compare_says_which_run_each_ref_resolved_to_and_why(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    scored(project)
    run_as(project, "r1")
    run_as(project, "r2")
    code, out = cli(project, capsys, "compare", "r1", "latest")
    assert code == 0
    lines = out.splitlines()
    assert lines[1:3] == ["A: `r1` -> r1 (run id)", "B: `latest` -> r2 (latest)"]


def test_the_geometric_mean_of_two_metrics_ratios_has_its_interval(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    two_metrics(project)
    run_as(project, "r1")
    two_metrics(project, b=1)
    run_as(project, "r2")
    code, out = cli(project, capsys, "compare", "r1", "r2")
    assert code == 0
    assert (
        "  geometric mean of 2 higher-is-better ratios [b] B/A (score, bonus): "
        "x0.333 [x0.333, x0.333]" in out
    )


def test_code_differences_are_one_line_with_the_identity_first() -> None:
    paths = [f"code[/wt/bisect/{k}/src].tree: a{k} -> b{k}" for k in range(12)]
    identity = ["code_identity.commit: 1111 -> 2222", "code_identity.short: 111 -> 222"]
    (line,) = code_difference_line(paths + identity)
    assert line == (
        "  code differences: code_identity.commit: 1111 -> 2222; code_identity.short: "
        "111 -> 222 (and 12 more code field(s))"
    )
    assert code_difference_line([]) == []
