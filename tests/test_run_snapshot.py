"""``BenchRun.record()``: the frozen snapshot every hook gets, made per trial. A run that only
gained trials gets the last snapshot with them (the per-trial path, PERFORMANCE.md round 44);
it must read exactly as a snapshot made from scratch, and never change one already given."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml
from support.records import scored_config

from pytest_benchmark_agent.config.models import load_config
from pytest_benchmark_agent.engine.plan import build_plan
from pytest_benchmark_agent.records.run import BenchRun


def a_run(tmp_path: Path) -> BenchRun:
    (tmp_path / "bench.yaml").write_text(yaml.safe_dump(scored_config(replicates=3)))
    plan = build_plan(load_config(tmp_path / "bench.yaml"), tmp_path / "bench.yaml")
    run = BenchRun(plan=plan, home=tmp_path / "home", run_id="run-1")
    run.planned, run.state = list(plan.trials), "running"
    return run


def test_each_trials_snapshot_reads_as_one_made_from_scratch(tmp_path: Path) -> None:
    run = a_run(tmp_path)
    given = []
    for k, spec in enumerate(run.planned):
        status = "failed" if k == 2 else "passed"
        trial = run.blank_trial(spec, status)
        run.trials.append(dataclasses.replace(trial, metrics={"score": 1.0 + k}, wall_s=0.5))
        snapshot = run.record()
        assert snapshot.to_dict() == run._freeze().to_dict()
        assert snapshot.config is run.record().config  # the same snapshot, and no new config
        given.append((snapshot, snapshot.to_dict()))
    last = given[-1][0]
    assert len(last.trials) == len(run.planned)
    assert last.counts == {"passed": 5, "failed": 1}
    for snapshot, as_given in given:  # none changed by a later trial
        assert snapshot.to_dict() == as_given


def test_a_change_beside_new_trials_makes_a_new_snapshot(tmp_path: Path) -> None:
    """Trials and another field changed at once (a caveat, the state): nothing is carried
    over from the last snapshot but what did not change."""
    run = a_run(tmp_path)
    spec = run.planned[0]
    run.trials.append(run.blank_trial(spec, "passed"))
    before = run.record()
    run.trials.append(run.blank_trial(run.planned[1], "passed"))
    run.caveats.append("the machine was busy")
    run.state = "complete"
    after = run.record()
    assert after.caveats == ("the machine was busy",) and after.state == "complete"
    assert len(after.trials) == 2 and len(before.trials) == 1
    assert before.caveats == () and before.state == "running"
    assert after.to_dict() == run._freeze().to_dict()


def test_trials_replaced_by_a_new_list_are_frozen_again(tmp_path: Path) -> None:
    """Recovery gives the run a new list of trials: the snapshot holds that list's, not the
    old ones appended to."""
    run = a_run(tmp_path)
    for spec in run.planned[:3]:
        run.trials.append(run.blank_trial(spec, "passed"))
    run.record()
    run.trials = [run.blank_trial(run.planned[4], "failed")]
    snapshot = run.record()
    assert [t.id for t in snapshot.trials] == [run.trial_id(run.planned[4])]
    assert snapshot.counts == {"failed": 1}
