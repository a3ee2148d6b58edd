"""Issue 23's verdict rules through real sessions, on synthetic metrics of known truth.

A tiny Python stage prints ``t=<value>`` drawn from a generator seeded by the treatment, the
block and the position in the block (counted from the calls as run), so each test knows the
truth it measures: a position effect under the balanced order, +0.5% under a 1% threshold,
exact ties, a run too small to ever decide, and reproduction by evidence. Each asks for the
fewest blocks at which its point can be decided (6 for one comparison). Reproduction is the
judge's reading of two records: its tests draw the same values in the session's order into
records (tests/support/records.py) and judge those, with no session.
"""

from __future__ import annotations

import inspect
import json
import math
import random
import sys
from pathlib import Path

from benchhelpers import BenchProject
from gate2helpers import lazy_imports_done_outside_runs, run_as  # noqa: F401
from support.records import recorded

from pytest_benchmark_agent.records.reader import load_results
from pytest_benchmark_agent.stats.analysis import Observation, PlainMetricRule, analyze_run


def draw(truth: dict, mode: str, block: int, position: int, extra: list) -> float:
    """The generator's value of ``mode`` at ``position`` of ``block`` (``extra``: the stage's
    other arguments): one definition, run by the stage and by the tests on records."""
    rng = random.Random(f"{truth.get('salt', 0)}:{mode}:{block}:{position}:{extra}")
    if "values" in truth:
        return truth["values"][mode][block]
    value = truth.get("base", 10.0) * truth.get("effect", {}).get(mode, 1.0)
    value *= math.exp(rng.gauss(0.0, truth.get("cv", 0.0)))
    return value * (1 + truth.get("position", 0.0) * (position == 0))


GENERATOR = (
    "import json, math, random, sys\nfrom pathlib import Path\n\n"
    + inspect.getsource(draw)
    + """
mode = sys.argv[1]
truth = json.loads(Path("data/truth.json").read_text())
log = Path("data/calls.txt")
calls = log.read_text().split() if log.exists() else []
log.write_text("".join(f"{c}\\n" for c in [*calls, mode]))
block, position = divmod(len(calls), 2)  # two treatments: two trials a block, as run
print(f"t={draw(truth, mode, block, position, sys.argv[2:])!r}")
"""
)


def synthetic_config(threshold: float = 0.01, **overrides: object) -> dict:
    """The two-treatment benchmark of the generator, ``t`` lower is better."""
    document = {
        "name": "synthetic",
        "hypothesis": "b changes t",
        "params": {"mode": "a"},
        "treatment_variable": "mode",
        "treatments": ["a", "b"],
        "replicates": 6,
        "code": ["code"],
        "stages": [
            {
                "name": "measure",
                "kind": "measure",
                "cmd": f"{sys.executable} -S code/gen.py {{mode}}",
                "metrics_from": {"stdout": True, "fields": ["t"]},
            }
        ],
        "metrics": {"t": {"direction": "lower", "primary": True, "noise_threshold": threshold}},
    }
    document.update(overrides)
    return document


def synthetic(project: BenchProject, truth: dict, *, threshold: float = 0.01, **overrides) -> None:
    """A two-treatment benchmark of the generator; ``truth`` is its data (outside the code, so a
    new truth is a faithful rerun of the same config and code)."""
    project.write("code/gen.py", GENERATOR)
    project.write("data/truth.json", json.dumps(truth))
    (project.path / "data" / "calls.txt").unlink(missing_ok=True)
    project.bench(synthetic_config(threshold, **overrides))


def measured(home: Path, run_id: str, truth: dict) -> dict:
    """A rerun of the synthetic benchmark drawing ``truth`` in the session's order (six blocks,
    ``a, b`` then ``b, a``), judged against the runs in ``home`` and written there, without a
    session: its results.yaml, as ``run_as`` returns it."""
    values = {
        label: [draw(truth, label, k, (k + i) % 2, []) for k in range(6)]
        for i, label in enumerate(("a", "b"))
    }
    recorded(home, run_id, {"t": values}, config=synthetic_config())
    return load_results(home / "runs" / run_id)


def verdict_of(record: dict) -> dict:
    return record["verdicts"]["t"]["b"]


def test_a_position_effect_under_the_balanced_order_is_no_change(project: BenchProject) -> None:
    truth = {"cv": 0.002, "position": 0.03}  # A/A; the first run of every block 3% slower
    synthetic(project, truth)
    record = run_as(project, "position")
    assert (project.path / "data" / "calls.txt").read_text().split() == ["a", "b", "b", "a"] * 3
    positions = {(t["treatment"], t["replicate"]): t["position"] for t in record["trials"]}
    assert all(positions[("a", k)] == k % 2 == 1 - positions[("b", k)] for k in range(6))
    assert verdict_of(record)["verdict"] == "no_change"
    # the same generator with the control always first: the position effect becomes a "change"
    obs = [
        Observation(label, k, None, v)
        for k in range(6)
        for label, v in (("a", 10.3), ("b", 10.0 * (1 + 0.002 * (-1) ** k)))
    ]
    fixed = analyze_run({"t": obs}, {"t": PlainMetricRule()}, ["a", "b"], "a").verdicts["t"]["b"]
    assert fixed.verdict == "improved"


def test_half_a_percent_under_a_one_percent_threshold_is_no_change(project: BenchProject) -> None:
    synthetic(project, {"cv": 0.0005, "effect": {"b": 1.005}})
    verdict = verdict_of(run_as(project, "small"))
    assert verdict["p"] <= 0.05  # the test alone sees it: the interval keeps it in the band
    assert verdict["verdict"] == "no_change"
    lo, hi = verdict["ci"]
    assert 1 < lo < hi < 1.01
    assert verdict["reason"].startswith("within the noise threshold 1.00%: ratio 1.005")
    assert f"interval [{lo:.4g}, {hi:.4g}]" in verdict["reason"]


def test_exact_ties_give_an_exact_p_never_zero(project: BenchProject) -> None:
    values = {"a": [10] * 6, "b": [11, 11, 11, 11, 10, 11]}  # one block tied, five +10%
    synthetic(project, {"values": values})
    verdict = verdict_of(run_as(project, "ties"))
    assert verdict["p"] == 2 / 2**5  # the tied block cannot flip: an exact test over five
    assert verdict["verdict"] == "no_change" and "does not pass Holm" in verdict["reason"]


def test_a_run_that_can_never_decide_says_so(project: BenchProject) -> None:
    synthetic(
        project,
        {"cv": 0.001, "effect": {"b": 2.0}},  # twice as slow, yet 3 seeds cannot show it
        seeds=[1, 2, 3],
        replicates=2,
        stages=[
            {
                "name": "measure",
                "kind": "measure",
                "cmd": f"{sys.executable} -S code/gen.py {{mode}} {{seed}}",
                "metrics_from": {"stdout": True, "fields": ["t"]},
            }
        ],
    )
    record = run_as(project, "seeds")
    verdict = verdict_of(record)
    assert verdict["verdict"] == "no_change" and verdict["mde"] == float("inf")
    why = (
        "could never decide: with 3 seeds the smallest two-sided p is 0.25 (2/2^3), above "
        "the level 0.05; deciding needs at least 6 seeds"
    )
    assert verdict["reason"] == why
    assert why in (project.home / "runs" / "seeds" / "report.md").read_text()


def test_one_decided_run_and_one_undecided_rerun_are_inconclusive(tmp_path: Path) -> None:
    first = verdict_of(measured(tmp_path, "r1", {"cv": 0.005, "effect": {"b": 1.2}}))
    assert first["verdict"] == "regressed"
    # the same, far noisier
    record = measured(tmp_path, "r2", {"cv": 0.2, "effect": {"b": 1.2}, "salt": 3})
    second = verdict_of(record)
    assert second["verdict"] == "no_change"
    assert second["ci"][0] < first["ci"][1] and first["ci"][0] < second["ci"][1]
    assert record["tag"] == "QUALIFIED"
    reproduces = record["reproduces"]
    assert reproduces["run_id"] == "r1" and reproduces["kind"] == "reproduction"
    mdes = f"MDE {second['mde']:.1%} here, {first['mde']:.1%} there"
    assert any(f"inconclusive (one decided, one not; {mdes})" in x for x in reproduces["lines"])
    assert any(x.startswith("inconclusive against r1") for x in record["tag_reasons"])


def test_two_quiet_no_change_runs_reproduce(tmp_path: Path) -> None:
    first = verdict_of(measured(tmp_path, "q1", {"cv": 0.0005}))  # A/A, far under the 1% band
    record = measured(tmp_path, "q2", {"cv": 0.0005, "salt": 1})
    second = verdict_of(record)
    assert first["verdict"] == second["verdict"] == "no_change"
    assert first["mde"] > 0.01 and second["mde"] > 0.01  # an MDE counts the band
    assert record["tag"] == "RELIABLE", record["tag_reasons"]
    (line,) = record["reproduces"]["lines"]
    assert "reproduced (no change; both intervals inside the noise band +-1%" in line


def test_decisions_in_opposite_directions_contradict(tmp_path: Path) -> None:
    first = measured(tmp_path, "o1", {"cv": 0.002, "effect": {"b": 1.2}})
    assert verdict_of(first)["verdict"] == "regressed"
    # the same config, the truth flipped
    record = measured(tmp_path, "o2", {"cv": 0.002, "effect": {"b": 0.8}})
    assert verdict_of(record)["verdict"] == "improved"
    assert record["tag"] == "UNRELIABLE"
    (line,) = record["reproduces"]["lines"]
    assert line.endswith("NOT reproduced (opposite directions)")
