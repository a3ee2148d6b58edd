"""Reliability tags: every transition, from the rule itself and from real runs, the reclassify
cascade, and results_index.md grouped by tag."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from benchhelpers import BenchProject
from gate2helpers import lazy_imports_done_outside_runs, run_as, scored  # noqa: F401
from support.records import constant, recorded

from pytest_benchmark_agent.cli.main import main
from pytest_benchmark_agent.config.models import load_config
from pytest_benchmark_agent.engine.reclassify import ReclassifyError, reclassify
from pytest_benchmark_agent.judge.reproduce import Reproduction
from pytest_benchmark_agent.judge.review import accept_deviation, review
from pytest_benchmark_agent.judge.tags import compute_tag
from pytest_benchmark_agent.records.reader import load_results
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.records.run import CAVEAT_NONE
from pytest_benchmark_agent.report.reclassified import reclassified_lines, tag_line

#: What the scored benchmark measures: b at x1.5 of a.
SCORES = {"score": constant({"a": 6, "b": 9})}


def reference(
    kind: str = "reproduction",
    problems: tuple[str, ...] = (),
    tag: str = "EXPLORATORY",
    caveats: tuple[str, ...] = (),
) -> Reproduction:
    return Reproduction("prior", kind, ["`score` [b]: line"], list(problems), tag, list(caveats))


# -- the rule -------------------------------------------------------------------------------------


def test_a_failed_gate_is_unreliable_whatever_else_holds() -> None:
    tag, why = compute_tag(["no trial passed"], ["too few"], ["a caveat"], reference())
    assert (tag, why) == ("UNRELIABLE", ["no trial passed"])


def test_too_little_data_keeps_a_run_exploratory_even_when_it_has_a_reference() -> None:
    limit = "gate 2 refused `score` [b]: too few replicates (n=2, needed 5)"
    tag, why = compute_tag([], [limit], [], reference())
    assert tag == "EXPLORATORY" and why == [limit]


def test_a_first_run_is_exploratory_and_lists_its_caveats_without_rising() -> None:
    tag, why = compute_tag([], [], [CAVEAT_NONE], None)
    assert tag == "EXPLORATORY"
    assert why[0].startswith("no earlier run of this frozen config")
    assert why[1] == f"caveat: {CAVEAT_NONE}"


def test_a_reproduction_without_caveat_is_reliable() -> None:
    tag, why = compute_tag([], [], [], reference())
    assert tag == "RELIABLE" and "reproduces prior" in why[0]


@pytest.mark.parametrize(
    "caveat",
    [
        CAVEAT_NONE,
        "preflight: disk at /data headroom 4.0% under the 10% margin; ran with --bench-accept-risk",
        "comparability limited: deviation accepted at plan time: smaller corpus",
        "2 of 10 trials did not pass (failed: 2)",
    ],
)
def test_a_reproduction_with_a_caveat_is_qualified(caveat: str) -> None:
    assert compute_tag([], [], [caveat], reference()) == ("QUALIFIED", [caveat])


def test_a_qualified_reference_carries_its_caveat() -> None:
    carried = "relies on QUALIFIED run prior: isolation 'none'"
    tag, why = compute_tag([], [], [], reference(tag="QUALIFIED", caveats=(carried,)))
    assert (tag, why) == ("QUALIFIED", [carried])


def test_an_anchor_to_a_baseline_is_qualified_not_reliable() -> None:
    tag, why = compute_tag([], [], [], reference(kind="anchor"))
    assert tag == "QUALIFIED" and why[0].startswith("anchored to baseline prior")


def test_a_contradicted_reproduction_is_unreliable() -> None:
    problem = "`score` [b]: no_change x1 here, improved x1.5 in prior"
    tag, why = compute_tag([], [], [], reference(problems=(problem,)))
    assert tag == "UNRELIABLE" and why == [f"contradicts prior: {problem}"]


# -- real runs ------------------------------------------------------------------------------------


def test_tags_follow_reproduction_caveats_and_contradiction(project: BenchProject) -> None:
    scored(project)
    first = run_as(project, "r1")
    assert first["tag"] == "EXPLORATORY" and first["reproduces"] is None
    assert first["verdicts"]["score"]["b"]["verdict"] == "improved"
    second = run_as(project, "r2")
    assert second["tag"] == "RELIABLE"
    assert second["reproduces"]["run_id"] == "r1" and second["reproduces"]["ok"]
    third = run_as(project, "r3", "--bench-isolation", "none")
    assert third["tag"] == "QUALIFIED"
    assert third["tag_reasons"][0].startswith("isolation 'none'")
    project.write("data/b.txt", "4\n")  # the same config now measures x2 where it measured x1.5
    fourth = run_as(project, "r4")
    # the same verdict, but intervals that exclude each other: evidence against r3 (issue 23)
    assert fourth["tag"] == "UNRELIABLE" and not fourth["reproduces"]["ok"]
    assert fourth["tag_reasons"] == [
        "contradicts r3: `score` [b]: improved x2 [2, 2] here, improved x1.5 [1.5, 1.5] in r3: "
        "the 95% intervals exclude each other"
    ]
    project.write("data/b.txt", "2\n")  # now b is no better than a: the verdict flips
    fifth = run_as(project, "r5")
    assert fifth["tag"] == "UNRELIABLE"  # an UNRELIABLE run (r4) is no reference: r3 is
    assert fifth["tag_reasons"] == [
        "contradicts r3: `score` [b]: no_change x1 [1, 1] here, improved x1.5 [1.5, 1.5] in r3: "
        "the 95% intervals exclude each other"
    ]
    report = (project.home / "runs" / "r5" / "report.md").read_text()
    assert "Gate failed (the run is UNRELIABLE): contradicts r3" in report
    index = (project.home / "results_index.md").read_text()
    sections = {part.split("\n", 1)[0]: part for part in index.split("## ")[1:]}
    assert "r2" in sections["RELIABLE (1)"] and "r3" in sections["QUALIFIED (1)"]
    assert "r5" in sections["UNRELIABLE (2)"] and "r1" in sections["EXPLORATORY (1)"]
    assert "score: b=1.5 improved" in sections["RELIABLE (1)"]


def test_preflight_accepted_risk_qualifies_a_reproduced_run(project: BenchProject) -> None:
    stats = os.statvfs(project.path)
    free_mb = stats.f_bavail * stats.f_frsize / 2**20
    scored(project, resources={"disk_mb": int(free_mb / 1.05)})  # 5% headroom: tight
    refused = project.run("--bench-run-id", "r0")
    assert refused.ret == pytest.ExitCode.INTERRUPTED  # a collection error without the flag
    run_as(project, "r1", "--bench-accept-risk")
    second = run_as(project, "r2", "--bench-accept-risk")
    assert second["tag"] == "QUALIFIED"
    assert second["tag_reasons"][0].startswith("preflight:")


def test_an_accepted_deviation_qualifies_a_reproduced_run(project: BenchProject) -> None:
    scored(project)
    run_as(project, "r1")
    assert run_as(project, "r2")["tag"] == "RELIABLE"
    config = load_config(project.path / "bench.yaml", {"size": 4})  # a control changed
    challenged = review(project.home, config)
    assert challenged.challenges
    accept_deviation(project.home, challenged, "a larger size is what production uses")
    first = run_as(project, "r3", "--bench-set", "size=4")
    assert first["tag"] == "EXPLORATORY"  # another config: nothing to reproduce yet
    second = run_as(project, "r4", "--bench-set", "size=4")
    assert second["reproduces"]["run_id"] == "r3"
    assert second["tag"] == "QUALIFIED"
    assert "comparability limited" in second["tag_reasons"][0]


# -- reclassify: on records of a data home, as the sessions above leave them ----------------------


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A data home holding one run of the scored benchmark, r1 (b measured at x1.5 of a)."""
    folder = tmp_path / "benchmark_data"
    recorded(folder, "r1", SCORES)
    return folder


def test_reclassify_downgrades_and_cascades_to_every_run_that_cited_it(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for run_id in ("r2", "r3"):
        recorded(home, run_id, SCORES)
    assert [load_results(home / "runs" / r)["tag"] for r in ("r1", "r2", "r3")] == [
        "EXPLORATORY",
        "RELIABLE",
        "RELIABLE",
    ]
    code = main(
        [
            "--home",
            str(home),
            "reclassify",
            "r1",
            "unreliable",
            "--why",
            "the machine was swapping during r1",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "r1: EXPLORATORY -> UNRELIABLE (the machine was swapping during r1)" in printed
    assert "flagged r2: it cited r1; RELIABLE -> QUALIFIED" in printed
    assert "flagged r3: it cited r2; RELIABLE -> QUALIFIED" in printed
    r1, r2, r3 = (load_results(home / "runs" / r) for r in ("r1", "r2", "r3"))
    assert r1["tag"] == "UNRELIABLE" and r1["reclassified"][0]["why"].startswith("the machine")
    assert r2["tag"] == r3["tag"] == "QUALIFIED"
    assert r2["flags"][0]["run"] == "r1" and r3["flags"][0]["run"] == "r2"
    assert json.loads((home / "runs" / "r3" / "index.json").read_text())["tag"] == "QUALIFIED"
    report = (home / "runs" / "r2" / "report.md").read_text()
    assert "- **Tag:** QUALIFIED (was RELIABLE" in report and "it cited r1" in report
    assert "flagged x1" in (home / "results_index.md").read_text()
    # a later run relying on a flagged run carries the flag as a caveat
    fourth = recorded(home, "r4", SCORES)
    assert fourth.reproduces is not None
    assert fourth.reproduces.run_id == "r3" and fourth.tag == "QUALIFIED"
    assert any("flagged: it cited r2" in reason for reason in fourth.tag_reasons)


def test_the_report_renders_reclassifications_and_flags_from_the_record_alone() -> None:
    """In the order they happened, escaped, an entry of the wrong shape left out."""
    run = RunRecord.from_dict(
        {
            "run_id": "r2",
            "tag": "QUALIFIED",
            "flags": [
                {
                    "run": "r1",
                    "to": "UNRELIABLE",
                    "why": "swap\n# forged",
                    "at": "2026-01-02",
                    "tag": {"from": "RELIABLE", "to": "QUALIFIED"},
                }
            ],
            "reclassified": [
                {
                    "from": "EXPLORATORY",
                    "to": "RELIABLE",
                    "why": "w",
                    "at": "2026-01-01",
                    "evidence": "reproduced by r3",
                },
                "not an entry",
            ],
        }
    )
    assert tag_line(run) == (
        "- **Tag:** QUALIFIED (was RELIABLE; see Reclassifications and flags below)"
    )
    lines = reclassified_lines(run)
    assert lines[:3] == ["", "## Reclassifications and flags", ""] and len(lines) == 5
    assert lines[3] == "- Reclassified EXPLORATORY -> RELIABLE on 2026-01-01: w (reproduced by r3)"
    assert lines[4].startswith(
        "- Flagged on 2026-01-02: it cited r1, since reclassified UNRELIABLE"
    )
    assert lines[4].endswith("; RELIABLE -> QUALIFIED") and "\n" not in lines[4]
    plain = RunRecord.from_dict({"run_id": "r3", "tag": "RELIABLE"})
    assert tag_line(plain) == "- **Tag:** RELIABLE" and reclassified_lines(plain) == []


def test_reclassify_raises_a_tag_only_with_a_reproduction(home: Path) -> None:
    recorded(home, "r2", SCORES)
    reclassify(home, home / "runs" / "r2", "QUALIFIED", "a noisy neighbour was running")
    with pytest.raises(ReclassifyError, match="may only be lowered without a new run"):
        reclassify(home, home / "runs" / "r2", "RELIABLE", "it looked fine")
    # r2 reproduced r1, so r1 may rise, and the evidence is recorded
    reclassify(home, home / "runs" / "r1", "QUALIFIED", "reproduced by r2")
    record = load_results(home / "runs" / "r1")
    assert record["tag"] == "QUALIFIED"
    assert record["reclassified"][-1]["evidence"] == "reproduced by r2"


@pytest.mark.parametrize(
    ("tag", "why", "message"),
    [
        ("QUALIFIED", "   ", "state the reason"),
        ("EXPLORATORY", "same again", "already EXPLORATORY"),
        ("GOLDEN", "why not", "use one of RELIABLE"),
    ],
)
def test_reclassify_refusals_name_the_fix(home: Path, tag: str, why: str, message: str) -> None:
    with pytest.raises(ReclassifyError, match=message):
        reclassify(home, home / "runs" / "r1", tag, why)


def test_reclassify_cli_needs_a_reason(home: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--home", str(home), "reclassify", "r1", "UNRELIABLE"])
    assert exit_info.value.code == 2  # argparse: --why is required
    with pytest.raises(SystemExit, match="raises the tag"):
        main(["--home", str(home), "reclassify", "r1", "RELIABLE", "--why", "sure"])
    assert yaml.safe_load((home / "runs" / "r1" / "results.yaml").read_text())["tag"] == (
        "EXPLORATORY"
    )
