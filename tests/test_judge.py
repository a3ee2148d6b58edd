"""judge: what gate 2 is fed and what it makes of a finished run, on fixed-value trial records
(the statistics themselves are test_analysis.py's): blocks per host, direction split between
hosts, sequential looks, gate failures against limits and caveats, regressions."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from pytest_benchmark_agent.config.metric import MetricSpec
from pytest_benchmark_agent.config.models import load_config
from pytest_benchmark_agent.engine.plan import build_plan
from pytest_benchmark_agent.judge import gate2 as judge
from pytest_benchmark_agent.judge.ci_gate import baseline_gate, ci_gate, regressions
from pytest_benchmark_agent.judge.evidence import could_never_decide
from pytest_benchmark_agent.judge.observations import observations
from pytest_benchmark_agent.judge.reproduce import reproduction
from pytest_benchmark_agent.judge.sequential import (
    blocks_done,
    planned_blocks,
    sequential_outcome,
    sequential_stop,
)
from pytest_benchmark_agent.judge.tags import compute_tag
from pytest_benchmark_agent.records.outcomes import GateRecord
from pytest_benchmark_agent.records.record import BaselineComparison, RunRecord
from pytest_benchmark_agent.records.run import CAVEAT_NONE, BenchRun
from pytest_benchmark_agent.stats.comparability import Refusal

Value = Callable[[str, int], float]  # (treatment, replicate) -> the metric's value


def make_run(
    tmp_path: Path, replicates: int | dict = 10, metrics: dict | None = None, **metric: object
) -> BenchRun:
    """A run of treatments a (the control) and b; metric ``t`` unless ``metrics`` are given."""
    metrics = metrics or {"t": {"direction": "lower", "primary": True, **metric}}
    document = {
        "name": "judged",
        "params": {"mode": "a"},
        "treatment_variable": "mode",
        "treatments": ["a", "b"],
        "replicates": replicates,
        "stages": [
            {
                "name": "m",
                "kind": "measure",
                "cmd": "echo {mode}",
                "metrics_from": {"stdout": True, "fields": list(metrics)},
            }
        ],
        "metrics": metrics,
    }
    path = tmp_path / "bench.yaml"
    tmp_path.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    plan = build_plan(load_config(path), path)
    run = BenchRun(plan=plan, home=tmp_path / "home", run_id="run-1")
    run.planned = list(plan.trials)
    run.state, run.started = "complete", "2026-12-02T10:00:00.000Z"
    return run


def record(
    run: BenchRun,
    value: Value,
    host: Callable[[int], str] = lambda r: "h",
    blocks: range | None = None,
    status: Callable[[str, int], str] = lambda t, r: "passed",
) -> None:
    """Append a trial record per planned trial (of the given blocks only); every declared
    metric gets ``value``."""
    for spec in run.planned:
        if blocks is not None and spec.replicate not in blocks:
            continue
        trial = run.blank_trial(spec, status(spec.treatment_label, spec.replicate))
        metrics = {m: value(spec.treatment_label, spec.replicate) for m in run.plan.config.metrics}
        run.trials.append(dataclasses.replace(trial, metrics=metrics, host=host(spec.replicate)))


def judged(run: BenchRun, sequential: object = None) -> RunRecord:
    """Judge ``run`` as the engine does (the Judgement put on the live run); its record."""
    run.judged(judge.judge_run(run.record(), sequential))  # type: ignore[arg-type]
    return run.record()


def twice_as_slow(treatment: str, replicate: int) -> float:
    base = 10.0 + replicate % 3
    return 2 * base if treatment == "b" else base


def split_hosts(replicate: int) -> str:
    """Two hosts of 8 blocks each: enough for each host's own verdict to decide (6 needed)."""
    return "host-a" if replicate < 8 else "host-b"


def test_the_judge_returns_its_judgement_and_never_writes_on_the_run(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    record(run, twice_as_slow)
    before = run.record().to_dict()
    judgement = judge.judge_run(run.record(), None)
    assert run.record().to_dict() == before  # the judge read a frozen record
    assert judgement.verdicts["t"]["b"].regressed and judgement.tag == "EXPLORATORY"
    run.judged(judgement)
    done = run.record()
    assert done.verdicts == judgement.verdicts and done.tag == judgement.tag
    assert done.ci_gate == judgement.ci_gate


# -- observations ---------------------------------------------------------------------------------


def test_blocks_are_numbered_per_host_so_pairs_never_cross_hosts(tmp_path: Path) -> None:
    run = make_run(tmp_path, replicates=4)
    record(run, twice_as_slow, host=lambda r: "host-a" if r % 2 else "host-b")
    trials = run.record().trials
    obs, caveats = observations(trials, ["t"], run.treatment_labels)
    by_treatment = {t: sorted(o.replicate for o in obs["t"] if o.treatment == t) for t in "ab"}
    # host-a ran replicates 1 and 3, host-b 0 and 2; host-b's blocks are moved past host-a's
    assert by_treatment["a"] == by_treatment["b"] == [1, 3, 4, 6]
    assert caveats == []
    first, _ = observations(trials, ["t"], run.treatment_labels, upto=2)
    assert len(first["t"]) == 4  # the first two blocks only


def test_a_trial_recorded_twice_is_analysed_once_with_a_caveat(tmp_path: Path) -> None:
    run = make_run(tmp_path, replicates=2)
    record(run, twice_as_slow)
    run.trials.append(run.trials[0])
    obs, caveats = observations(run.record().trials, ["t"], run.treatment_labels)
    assert len(obs["t"]) == 4
    assert caveats == ["1 trial(s) were recorded twice; the last record of each was analysed"]


# -- hosts ----------------------------------------------------------------------------------------


def test_a_direction_that_differs_between_hosts_is_refused_not_averaged(tmp_path: Path) -> None:
    run = make_run(tmp_path, replicates=16)

    def opposite(treatment: str, replicate: int) -> float:
        base = 10.0 + replicate % 3
        factor = 2.0 if replicate < 8 else 0.5
        return base * factor if treatment == "b" else base

    record(run, opposite, host=split_hosts)
    gate2 = judge.evaluate(run.record(), None)
    verdict = gate2.verdicts["t"]["b"]
    assert verdict.not_comparable
    assert verdict.reason is not None and verdict.reason.startswith(
        "direction differs between hosts: host-a regressed x2, host-b improved x0.5"
    )
    assert gate2.by_host["host-a"]["t"]["b"].regressed
    assert gate2.by_host["host-b"]["t"]["b"].improved
    assert any("direction differs between hosts" in r for r in gate2.refusals)
    done = judged(run)
    assert not any("direction" in f for f in judge.gate_failures(done)[0])  # a finding, not a
    gate2 = judge.evaluate(done, None)
    assert any("direction differs" in c for c in judge.qualifying_caveats(done, gate2))  # broken


def test_hosts_that_agree_are_combined_with_rows_for_each(tmp_path: Path) -> None:
    run = make_run(tmp_path, replicates=16)
    record(run, twice_as_slow, host=split_hosts)
    gate2 = judge.evaluate(run.record(), None)
    assert gate2.verdicts["t"]["b"].regressed
    assert gate2.verdicts["t"]["b"].units == 16  # both hosts' blocks, each paired in its host
    assert {h: v["t"]["b"].verdict for h, v in gate2.by_host.items()} == {
        "host-a": "regressed",
        "host-b": "regressed",
    }


def test_opposite_estimates_significant_nowhere_are_a_caveat(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    ratios = [1.3, 0.9, 1.2, 0.85, 1.25, 0.75, 1.1, 0.8, 1.15, 0.78]
    five_each = lambda r: "host-a" if r < 5 else "host-b"  # noqa: E731  (too few to decide)
    record(run, lambda t, r: (10.0 + r) * (ratios[r] if t == "b" else 1), host=five_each)
    gate2 = judge.evaluate(run.record(), None)
    assert gate2.verdicts["t"]["b"].no_change
    assert gate2.caveats == [
        "t [b]: the effect's direction differs between hosts, significant "
        "on at most one of them: host-a no_change x1.08, host-b no_change "
        "x0.907"
    ]


def test_one_host_gets_its_row_too(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    record(run, twice_as_slow)
    gate2 = judge.evaluate(run.record(), None)
    assert gate2.by_host == {"h": gate2.verdicts}


# -- nothing to compare ---------------------------------------------------------------------------

GUARDED = {
    "t": {"direction": "lower", "primary": True},
    "recall": {"direction": "higher", "guard": True, "floor": 10.5},
    "hash": {"direction": "equal", "guard": True},
    "lat": {"direction": "lower", "ceiling": 10.5, "min_replicates": 2},
}


def only(treatment: str) -> Callable[[str, int], str]:
    """Trial status: only ``treatment``'s trials passed (the others were deselected)."""
    return lambda t, r: "passed" if t == treatment else "not_run"


@pytest.mark.parametrize(
    ("case", "replicates", "metrics", "status", "value", "host"),
    [
        ("cached session: the treatment deselected", 1, None, only("a"), twice_as_slow, None),
        ("no control", 3, None, only("b"), twice_as_slow, None),
        ("too few replicates", 3, None, None, twice_as_slow, None),
        ("too few, two hosts", 4, None, None, twice_as_slow, lambda r: "h1" if r < 2 else "h2"),
        ("guards, floors, ceilings", 3, GUARDED, only("a"), lambda t, r: 10.0 + r, None),
        (
            "guards with values on both sides",
            1,
            {**GUARDED, "hash": {"direction": "higher"}},
            None,
            lambda t, r: 11.0,
            None,
        ),
        ("non-finite values", 3, GUARDED, only("a"), lambda t, r: float("nan") if r else 1.0, None),
    ],
)
def test_a_run_with_nothing_to_compare_is_refused_as_the_analysis_would(
    tmp_path: Path,
    case: str,
    replicates: int,
    metrics: dict | None,
    status: Callable[[str, int], str] | None,
    value: Value,
    host: Callable[[int], str] | None,
) -> None:
    run = make_run(tmp_path, replicates=replicates, metrics=metrics)
    record(run, value, status=status or (lambda t, r: "passed"), host=host or (lambda r: "h"))
    run.trials.append(run.trials[0])  # recorded twice: a caveat of both paths
    this = run.record()
    refused = judge._nothing_to_compare(this)
    assert refused is not None, case
    assert refused == judge._analysed(this, None, None), case
    assert judge.evaluate(this, None) == refused


def test_the_cached_session_gets_its_refusal_and_tag_as_before(tmp_path: Path) -> None:
    run = make_run(tmp_path, replicates=1)
    record(run, twice_as_slow, status=only("a"))
    done = judged(run)
    assert done.verdicts["t"]["b"].reason == "no samples for the treatment"
    assert done.refusals == ("t [b]: not comparable: no samples for the treatment",)
    assert done.verdicts_by_host == {"h": done.verdicts}
    assert done.tag == "UNRELIABLE"  # as before: a refusal for want of the treatment's samples
    assert done.tag_reasons == ("gate 2 refused `t` [b]: no samples for the treatment",)


@pytest.mark.parametrize(
    ("replicates", "metrics"),
    [
        (6, None),  # enough blocks for the exact paired test to decide one comparison
        (1, {"hash": {"direction": "equal", "primary": True}}),  # identity compares from one sample
    ],
)
def test_a_run_with_a_comparison_is_analysed(
    tmp_path: Path, replicates: int, metrics: dict | None
) -> None:
    run = make_run(tmp_path, replicates=replicates, metrics=metrics)
    record(run, twice_as_slow)
    assert judge._nothing_to_compare(run.record()) is None
    assert (
        judge.evaluate(run.record(), None)
        .verdicts[next(iter(run.plan.config.metrics))]["b"]
        .regressed
    )


JUDGE_IN_A_FRESH_PROCESS = """
import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from test_judge import make_run, only, record, twice_as_slow
from pytest_benchmark_agent.judge import gate2 as judge
from pytest_benchmark_agent.judge.sequential import sequential_outcome
run = make_run(Path(sys.argv[2]), replicates=int(sys.argv[3]))
record(run, twice_as_slow, status=only("a") if sys.argv[4] == "one" else lambda t, r: "passed")
run.judged(judge.judge_run(run.record(), sequential_outcome(run.record())))
heavy = ("pytest_benchmark_agent.stats.analysis", "numpy", "scipy")
print(json.dumps({"tag": run.tag, "loaded": [m for m in heavy if m in sys.modules]}))
"""


@pytest.mark.parametrize(
    ("replicates", "treatments", "tag", "loaded"),
    [
        (1, "one", "UNRELIABLE", []),  # the cached session: one trial of one treatment
        (2, "both", "EXPLORATORY", []),  # too few replicates
        (5, "both", "EXPLORATORY", ["pytest_benchmark_agent.stats.analysis", "numpy"]),
    ],
)
def test_judging_a_run_without_comparisons_imports_no_analysis(
    tmp_path: Path, replicates: int, treatments: str, tag: str, loaded: list[str]
) -> None:
    """In a fresh process (this one has scipy loaded): only a real comparison imports analysis,
    and numpy with it; scipy.stats only for Mann-Whitney."""
    tests = str(Path(__file__).parent)
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            JUDGE_IN_A_FRESH_PROCESS,
            tests,
            str(tmp_path),
            str(replicates),
            treatments,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == {"tag": tag, "loaded": loaded}


# -- sequential replication -----------------------------------------------------------------------


def test_blocks_done_counts_leading_complete_blocks_only(tmp_path: Path) -> None:
    run = make_run(tmp_path, replicates=4)
    record(run, twice_as_slow)
    missing = next(t for t in run.trials if t.replicate == 1 and t.treatment == "b")
    run.trials.remove(missing)
    ran = run.record()
    assert blocks_done(ran.trials, planned_blocks(ran)) == 1
    not_run = dataclasses.replace(ran.trials[0], id=missing.id, status="not_run")
    assert blocks_done((*ran.trials, not_run), planned_blocks(ran)) == 1  # not_run is not run


def test_a_decided_look_stops_the_run_and_gives_its_verdicts(tmp_path: Path) -> None:
    # min 8: the first look can decide (an exact paired test's smallest p at 8 blocks, 2/2^8)
    run = make_run(tmp_path, replicates={"min": 8, "max": 12})
    record(run, twice_as_slow, blocks=range(7))
    looked: set[int] = set()
    assert sequential_stop(run.record(), looked) is None and looked == set()
    record(run, twice_as_slow, blocks=range(7, 8))
    reason = sequential_stop(run.record(), looked)
    assert reason == (
        "sequential replication stopped after 8 of 12 blocks: every primary "
        "verdict decided after 8 blocks"
    )
    assert looked == {8}
    assert sequential_stop(run.record(), looked) is None  # a look is taken once
    outcome = sequential_outcome(run.record())
    assert outcome is not None and outcome.stopped and outcome.blocks == 8
    assert outcome.decided == reason
    done = judged(run, outcome)
    assert done.verdicts["t"]["b"].regressed
    assert done.sequential is not None
    assert done.sequential.blocks_used == 8 and done.sequential.looks[0]["stop"]


def test_an_undecided_run_goes_on_and_is_analysed_at_its_complete_blocks(tmp_path: Path) -> None:
    run = make_run(tmp_path, replicates={"min": 5, "max": 20})
    noise = [1.3, 0.9, 1.2, 0.85, 1.25, 0.75, 1.1, 0.8]
    record(run, lambda t, r: (10.0 + r) * (noise[r] if t == "b" else 1), blocks=range(8))
    assert sequential_stop(run.record(), set()) is None  # looks at 5 and 7: open
    outcome = sequential_outcome(run.record())
    assert outcome is not None and not outcome.stopped and outcome.decided is None
    assert outcome.blocks == 8 and [look["blocks"] for look in outcome.looks] == [5, 7]
    assert "between looks" in outcome.reason


@pytest.mark.parametrize("fail_threshold", [0.05, None])
def test_a_look_stops_once_the_gate_can_decide_when_fail_threshold_is_declared(
    tmp_path: Path, fail_threshold: float | None
) -> None:
    # b moves by +-2% around a: the interval stays wider than the 1% noise band (the verdict is
    # open), but it excludes a 5% regression, which is all the gate asks. The looks come at 8,
    # 10, 13 and 20 blocks; at 8 the look's share of alpha is below any exact p that 8 blocks
    # can give (the look "could never decide", no evidence), so the first look that stops is 10.
    wobble = [1.02, 0.98, 1.015, 0.985, 1.02, 0.98, 1.01, 0.99, 1.02, 0.98, 1.015, 0.985, 1.0]
    run = make_run(
        tmp_path,
        replicates={"min": 8, "max": 20},
        noise_threshold=0.01,
        fail_threshold=fail_threshold,
    )
    record(run, lambda t, r: (10.0 + r) * (wobble[r] if t == "b" else 1), blocks=range(13))
    reason = sequential_stop(run.record(), set())
    outcome = sequential_outcome(run.record())
    assert outcome is not None and outcome.decision is not None
    (verdict,) = outcome.decision.analysis.verdicts["t"].values()
    assert verdict.verdict == "no_change" and verdict.ci[0] < 0.99 and verdict.ci[1] < 1.05
    if fail_threshold is None:  # the verdict's own rule: more blocks
        assert reason is None and not outcome.stopped
        return
    assert reason == (
        "sequential replication stopped after 10 of 20 blocks: the CI gate can decide: every "
        "primary metric regressed beyond its fail_threshold or its interval rules that out "
        "after 10 blocks"
    )
    assert outcome.stopped and outcome.decided == reason
    assert ci_gate(judged(run, outcome)).outcome == "passed"


def test_a_run_cut_before_min_is_a_fixed_design(tmp_path: Path) -> None:
    run = make_run(tmp_path, replicates={"min": 5, "max": 20})
    record(run, twice_as_slow, blocks=range(3))
    outcome = sequential_outcome(run.record())
    assert outcome is not None and outcome.decision is None
    done = judged(run, outcome)
    assert done.verdicts["t"]["b"].reason == "too few replicates (n=3, needed 5)"


def test_a_fixed_design_has_no_sequential_outcome(tmp_path: Path) -> None:
    run = make_run(tmp_path, replicates=5)
    record(run, twice_as_slow)
    assert sequential_outcome(run.record()) is None
    assert sequential_stop(run.record(), set()) is None


# -- gates, limits, caveats, regressions ----------------------------------------------------------


def test_too_few_replicates_limit_the_run_instead_of_failing_it(tmp_path: Path) -> None:
    run = make_run(tmp_path, replicates=3)
    record(run, twice_as_slow)
    done = judged(run)
    failures, limits = judge.gate_failures(done)
    assert failures == []
    assert limits == ["gate 2 refused `t` [b]: too few replicates (n=3, needed 5)"]
    assert done.tag == "EXPLORATORY"


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("not_comparable", "gate 1: 1 trial(s) ran with effective params other than the declared"),
        ("interrupted", "the run did not complete (state interrupted)"),
    ],
)
def test_broken_gates_make_the_run_unreliable(tmp_path: Path, status: str, expected: str) -> None:
    run = make_run(tmp_path)
    record(run, twice_as_slow, status=lambda t, r: status if (t, r) == ("b", 9) else "passed")
    run.state = "interrupted" if status == "interrupted" else "complete"
    done = judged(run)
    assert done.tag == "UNRELIABLE"
    assert any(reason.startswith(expected) for reason in done.tag_reasons)


def test_overlapping_measurements_fail_host_isolation_only(tmp_path: Path) -> None:
    run = make_run(tmp_path, replicates=5)
    record(run, twice_as_slow)
    window = {"started": "2026-12-02T10:00:00.000Z", "ended": "2026-12-02T10:00:01.000Z"}
    run.trials = [dataclasses.replace(trial, **window) for trial in run.trials]
    assert any("overlapped" in f for f in judge.gate_failures(run.record())[0])
    run.caveats.append(CAVEAT_NONE)
    assert judge.gate_failures(run.record())[0] == []


def test_counted_trials_side_by_side_are_no_overlap_but_a_timed_one_beside_them_is(
    tmp_path: Path,
) -> None:
    """A block's counted trials run at once (engine/counted.py): their windows overlap, and a
    count does not depend on that; a timed trial overlapping any other still fails isolation."""

    def blocks_at_once(folder: Path, timed: int | None) -> BenchRun:
        (tmp_path / folder).mkdir()
        run = make_run(tmp_path / folder, replicates=5)
        record(run, twice_as_slow)
        for index, trial in enumerate(run.trials):  # a block's two at once, blocks in turn
            second = f"{trial.replicate:02d}"
            run.trials[index] = dataclasses.replace(
                trial,
                started=f"2026-12-02T10:00:{second}.000Z",
                ended=f"2026-12-02T10:00:{second}.900Z",
                counted_by=None if index == timed else "cachegrind 3.19.0",
            )
        return run

    counted = blocks_at_once(Path("counted"), None).record()
    assert counted.overlapping_measurements() == []
    assert not any("overlapped" in f for f in judge.gate_failures(counted)[0])
    beside = blocks_at_once(Path("beside"), 0).record()  # a timed trial beside a counted one
    pairs = beside.overlapping_measurements()
    assert len(pairs) == 1 and beside.trials[0].id in pairs[0]
    assert any("overlapped" in f for f in judge.gate_failures(beside)[0])


def test_failed_trials_qualify_and_a_guard_finding_does_not(tmp_path: Path) -> None:
    metrics = {
        "t": {"direction": "lower", "primary": True},
        "recall": {"direction": "higher", "floor": 0.95},
    }
    run = make_run(tmp_path, metrics=metrics)

    def recall_breaks_for_b(treatment: str, replicate: int) -> float:
        return 0.9 if treatment == "b" else 0.99

    record(
        run,
        recall_breaks_for_b,
        status=lambda t, r: "failed" if (t, r) == ("a", 9) else "passed",
    )
    done = judged(run)
    finding = "b: guard recall median 0.9 is below its floor 0.95"
    assert finding in done.caveats  # reported
    gate2 = judge.evaluate(done, None)
    assert gate2.findings == [finding]
    qualifying = judge.qualifying_caveats(done, gate2)
    assert "1 of 20 trials did not pass (failed: 1)" in qualifying
    assert finding not in qualifying  # a finding about b, not a caveat of the run


def test_the_tag_reads_the_kind_of_a_refusal_never_its_words(tmp_path: Path) -> None:
    run = make_run(tmp_path, replicates=1)
    record(run, twice_as_slow)
    done = judged(run)
    verdict = done.verdicts["t"]["b"]
    assert verdict.refused == Refusal.TOO_SMALL
    limits = judge.gate_failures(done)[1]
    reworded = dataclasses.replace(verdict, reason="reworded: the words of a refusal may change")
    done = done.replace(verdicts={"t": {"b": reworded}})
    assert judge.gate_failures(done)[1] != [] and len(judge.gate_failures(done)[1]) == len(limits)
    assert judge.gate_failures(done)[0] == []


def test_regressions_name_the_metric_and_the_treatment(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    record(run, twice_as_slow)
    assert regressions(judged(run)) == ["`t` regressed for b (x2 of the control a)"]
    faster = make_run(tmp_path / "faster")
    record(faster, lambda t, r: twice_as_slow("a" if t == "b" else "b", r))
    done = judged(faster)
    assert done.verdicts["t"]["b"].improved and regressions(done) == []


# -- reproduction across runs ---------------------------------------------------------------------


def view(
    run_id: str,
    verdicts: dict | None = None,
    trials: list | None = None,
    treatments: tuple[str, ...] = ("a", "b"),
) -> RunRecord:
    """A recorded run as a comparison reads it: verdicts of ``t`` for b, or trials."""
    return RunRecord.from_dict(
        {
            "run_id": run_id,
            "name": "judged",
            "tag": "EXPLORATORY",
            "state": "complete",
            "control": "a",
            "treatments": list(treatments),
            "trials": trials or [],
            "verdicts": {"t": verdicts or {}},
        }
    )


SPECS = {"t": MetricSpec(direction="lower", primary=True)}


@pytest.mark.parametrize(
    ("mine", "theirs", "tag", "said"),
    [
        # identical reruns of a clear effect: x6.2 then x8.3, far beyond the 10% tolerance
        (
            {"verdict": "regressed", "ratio": 8.3, "ci": [6.9, 9.8]},
            {"verdict": "regressed", "ratio": 6.2, "ci": [5.1, 7.4]},
            "RELIABLE",
            "reproduced (the same direction, intervals overlap)",
        ),
        (
            {"verdict": "regressed", "ratio": 2.05, "ci": [2.0, 2.1]},
            {"verdict": "regressed", "ratio": 2.0, "ci": [1.9, 1.95]},
            "RELIABLE",
            "reproduced (the same direction, ratios within 10%)",
        ),
        # evidence, not verdict equality (issue 23): intervals that exclude each other contradict
        (
            {"verdict": "regressed", "ratio": 8.3, "ci": [8.0, 8.6]},
            {"verdict": "regressed", "ratio": 2.0, "ci": [1.9, 2.1]},
            "UNRELIABLE",
            "NOT reproduced (the intervals exclude each other)",
        ),
        (
            {"verdict": "improved", "ratio": 0.5, "ci": [0.4, 0.6]},
            {"verdict": "regressed", "ratio": 6.2, "ci": [5.1, 7.4]},
            "UNRELIABLE",
            "NOT reproduced (opposite directions)",
        ),
        (
            {"verdict": "no_change", "ratio": 1.0, "ci": [0.9, 1.1]},
            {"verdict": "regressed", "ratio": 6.2, "ci": [5.1, 7.4]},
            "UNRELIABLE",
            "NOT reproduced (the intervals exclude each other)",
        ),
        # underpowered is not contradictory: one decided, one not, intervals overlapping
        (
            {"verdict": "no_change", "ratio": 1.03, "ci": [0.97, 1.09], "mde": 0.12},
            {"verdict": "regressed", "ratio": 1.05, "ci": [1.02, 1.08], "mde": 0.04},
            "QUALIFIED",
            "inconclusive (one decided, one not; MDE 12.0% here, 4.0% there)",
        ),
        # a shared miss is not a reproduction: two no_change reproduce when both intervals
        # lie inside the 1% band (their MDEs count the band, so they are above it)
        (
            {"verdict": "no_change", "ratio": 1.0, "ci": [0.996, 1.004], "mde": 0.016},
            {"verdict": "no_change", "ratio": 1.001, "ci": [0.997, 1.005], "mde": 0.017},
            "RELIABLE",
            "reproduced (no change; both intervals inside the noise band +-1%; "
            "MDE 1.6% here, 1.7% there)",
        ),
        (
            {"verdict": "no_change", "ratio": 1.0, "ci": [0.996, 1.004], "mde": 0.016},
            {"verdict": "no_change", "ratio": 1.0, "ci": [0.985, 1.012], "mde": 0.04},
            "QUALIFIED",
            "not shown (no change, but MDE 1.6% here, 4.0% there)",
        ),
        (
            {"verdict": "no_change", "ratio": 1.02, "ci": [0.9, 1.15], "mde": 0.25},
            {"verdict": "no_change", "ratio": 0.99, "ci": [0.88, 1.12], "mde": 0.3},
            "QUALIFIED",
            "not shown (no change, but MDE 25.0% here, 30.0% there)",
        ),
    ],
)
def test_a_rerun_reproduces_when_verdicts_agree_and_intervals_overlap(
    mine: dict, theirs: dict, tag: str, said: str
) -> None:
    check = reproduction(view("r2", {"b": mine}), view("r1", {"b": theirs}), SPECS, [])
    assert check.lines[0].endswith(said)
    assert compute_tag([], [], [], check)[0] == tag


def alone(values: list[float]) -> list[dict]:
    """Passed trials of one configuration (``a``) with these values of ``t``."""
    return [
        {
            "id": f"m[a-rep{i}]",
            "stage": "m",
            "treatment": "a",
            "replicate": i,
            "seed": None,
            "status": "passed",
            "metrics": {"t": value},
        }
        for i, value in enumerate(values)
    ]


@pytest.mark.parametrize(
    ("later", "tag", "said"),
    [
        ([10.0, 10.2, 9.9, 10.1, 10.0], "RELIABLE", "reproduced (no change, within 10%)"),
        # no change, but too noisy to show agreement: a shared miss is not a reproduction
        ([6.0, 16.0, 9.0, 14.0, 10.0], "QUALIFIED", "not shown (MDE "),
        ([20.0, 20.4, 19.8, 20.2, 20.0], "UNRELIABLE", "NOT reproduced"),
        ([10.0, 10.2, 9.9], "EXPLORATORY", "not compared (too few replicates (n=3, needed 5))"),
    ],
)
def test_one_configuration_reproduces_by_no_change_against_the_prior_run(
    later: list[float], tag: str, said: str
) -> None:
    prior = view("r1", trials=alone([10.0, 10.1, 10.2, 9.9, 10.0]), treatments=("a",))
    check = reproduction(view("r2", trials=alone(later), treatments=("a",)), prior, SPECS, [])
    assert check.lines[0].startswith("`t` [a] against r1 `a`: ") and said in check.lines[0]
    assert compute_tag([], [], [], check)[0] == tag


# -- the CI gate ----------------------------------------------------------------------------------


def against(verdicts: dict, **extra: object) -> BaselineComparison:
    """The comparison with baseline r1, code a1 -> b2."""
    return BaselineComparison.from_dict(
        {
            "run_id": "r1",
            "code": {"baseline": "a1", "this": "b2", "changed": True},
            "refused": None,
            "verdicts": verdicts,
            **extra,
        }
    )


def regressed(ratio: float | None, reason: str | None = None, **evidence: object) -> dict:
    return {
        "verdict": "regressed",
        "ratio": ratio,
        "reason": reason,
        "against": "r1 `a`",
        **evidence,
    }


def unchanged(ci: list[float], mde: float) -> dict:
    """A no_change against r1 with its interval and MDE (the evidence the gate reads)."""
    return {
        "verdict": "no_change",
        "ratio": 1.0,
        "ci": ci,
        "mde": mde,
        "n": [7, 7],
        "cv": [0.02, 0.021],
        "against": "r1 `a`",
    }


GATED = {
    "t": MetricSpec(direction="lower", primary=True, fail_threshold=0.05),
    "digest": MetricSpec(direction="equal", guard=True),
    "mem": MetricSpec(direction="lower"),
}
ACROSS = "; judged across runs, one session each"


@pytest.mark.parametrize(
    ("verdicts", "outcome", "first"),
    [
        (
            {"t": {"a": regressed(1.2)}},
            "regressed",
            "`t` [a] regressed x1.2 against r1 `a` (a1 -> b2), beyond fail_threshold 5% "
            "(interval -, MDE -, n -, CV -)" + ACROSS,
        ),
        (
            {"t": {"a": regressed(1.03, ci=[1.02, 1.04], mde=0.03)}},
            "passed",
            "every primary metric's interval rules out a regression beyond its fail_threshold "
            "against baseline r1 (a1 -> b2)" + ACROSS,
        ),
        (
            {
                "t": {"a": unchanged([0.99, 1.01], 0.02)},
                "digest": {
                    "a": regressed(None, "1 of 5 values differ from the control's 7 (e.g. 8)")
                },
            },
            "regressed",
            "guard `digest` [a] changed against r1 `a` (a1 -> b2): 1 of 5 values differ "
            "from the control's 7 (e.g. 8)" + ACROSS,
        ),
        (
            {"t": {"a": unchanged([0.99, 1.01], 0.02)}, "mem": {"a": regressed(3.0)}},
            "passed",  # not a primary, not a guard
            "every primary metric's interval rules out a regression beyond its fail_threshold "
            "against baseline r1 (a1 -> b2)" + ACROSS,
        ),
        (
            {"t": {"a": unchanged([0.97, 1.04], 0.08)}},  # the interval excludes +5%
            "passed",
            "every primary metric's interval rules out a regression beyond its fail_threshold "
            "against baseline r1 (a1 -> b2)" + ACROSS,
        ),
        (
            {"t": {"a": unchanged([0.9, 1.15], 0.137)}},  # issue 34: a +15% passed like this
            "unjudged",
            "`t` [a] no_change x1 against r1 `a` (a1 -> b2) (interval [0.9, 1.15], MDE 13.7%, "
            "n 7/7, CV 2%/2.1%): could not rule out a 5% regression (the interval reaches 15%) "
            "nor show one; add blocks" + ACROSS,
        ),
        (
            {
                "t": {
                    "a": {
                        "verdict": "not_comparable",
                        "reason": "too few replicates (n=3, needed 5)",
                        "against": "r1 `a`",
                    }
                }
            },
            "unjudged",
            "`t` [a] not_comparable - against r1 `a` (a1 -> b2) (interval -, MDE -, n -, "
            "CV -): too few replicates (n=3, needed 5)" + ACROSS,
        ),
    ],
)
def test_the_gate_passes_only_on_evidence_and_fails_on_a_changed_guard(
    verdicts: dict, outcome: str, first: str
) -> None:
    gate = baseline_gate(against(verdicts), GATED)
    assert gate.outcome == outcome and gate.reasons[0] == first
    if outcome == "passed" and verdicts["t"]["a"]["verdict"] == "regressed":
        assert gate.reasons[1].endswith(
            "the interval rules out a regression beyond fail_threshold 5%"
        )


def test_a_refused_baseline_leaves_the_gate_unjudged() -> None:
    gate = baseline_gate(
        against({}, refused="fingerprints differ in fields that matter: env.cpu_model"), GATED
    )
    assert gate == GateRecord(
        "unjudged",
        (
            "not comparable with baseline r1 (a1 -> b2): fingerprints differ in fields that "
            "matter: env.cpu_model",
        ),
    )


@pytest.mark.parametrize(
    ("replicates", "value", "outcome"),
    [
        (6, twice_as_slow, "regressed"),
        (6, lambda t, r: 10.0 + r % 3, "passed"),
        # 5 blocks: the exact test can never decide, but the whole (t) interval lies beyond the
        # threshold, and a regression whose whole interval lies beyond it is never unjudged
        (5, twice_as_slow, "regressed"),
        (3, twice_as_slow, "unjudged"),  # too few replicates: nothing could be judged
    ],
)
def test_without_a_baseline_the_gate_keeps_the_in_run_meaning(
    tmp_path: Path, replicates: int, value: Value, outcome: str
) -> None:
    run = make_run(tmp_path, replicates=replicates)
    record(run, value)
    assert ci_gate(judged(run)).outcome == outcome


def test_a_run_that_could_never_decide_is_exploratory_and_unjudged(tmp_path: Path) -> None:
    run = make_run(tmp_path, replicates=5)  # 2/2^5 = 0.0625: no exact paired test can pass
    record(run, twice_as_slow)
    done = judged(run)
    verdict = done.verdicts["t"]["b"]
    assert verdict.no_change and verdict.mde == float("inf")
    assert verdict.reason is not None
    assert verdict.reason.startswith("could never decide: with 5 blocks")
    assert could_never_decide(verdict)
    assert done.tag == "EXPLORATORY"
    assert any("could never decide" in r for r in done.tag_reasons)
    gate = ci_gate(done)  # twice as slow: its whole interval lies beyond the 5% threshold
    assert gate.outcome == "regressed"
    assert any("its whole interval lies beyond it; could never decide" in r for r in gate.reasons)
    alike = make_run(tmp_path / "alike", replicates=5)
    record(alike, lambda t, r: 10.0 + r % 3)
    assert ci_gate(judged(alike)).outcome == "unjudged"  # nothing shown: no judgement
