"""What ``--junitxml`` carries of a run: each trial's metrics as properties of its test case
(pytest's ``user_properties``, as ``record_property`` adds them) and the run's tag and verdicts
as properties of the test suite (as ``record_testsuite_property`` adds them).

Names are ``bench.<field>``: per trial ``bench.treatment``, ``bench.replicate``, ``bench.seed``,
``bench.status`` and ``bench.metric.<metric>``; per run ``bench.run_id``, ``bench.tag``, and
``bench.verdict.<metric>.<treatment>`` = ``improved x0.0735 [0.0711, 0.0758]`` (gate 2's ratio
and 95% interval, the figure the report quotes).
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.records.schema import TrialRecord
from pytest_benchmark_agent.stats.units import verdict_text


def trial_properties(trial: TrialRecord) -> list[tuple[str, object]]:
    """A finished trial's properties, its metrics as recorded."""
    properties: list[tuple[str, object]] = [
        (f"bench.{key}", value)
        for key, value in (
            ("treatment", trial.treatment),
            ("replicate", trial.replicate),
            ("seed", trial.seed),
            ("status", trial.status),
        )
        if value is not None
    ]
    properties += [(f"bench.metric.{name}", value) for name, value in trial.metrics.items()]
    return properties


def run_properties(run: RunRecord) -> list[tuple[str, object]]:
    """The run's id, tag and each verdict with its ratio and interval."""
    properties: list[tuple[str, object]] = [("bench.run_id", run.run_id), ("bench.tag", run.tag)]
    for metric, per in run.verdicts.items():
        for label, verdict in per.items():
            properties.append((f"bench.verdict.{metric}.{label}", verdict_text(verdict)))
    return properties


def add_trial_properties(item: pytest.Item) -> None:
    """After a trial item's call: its record's properties on the item (the reports of its
    later phases, which junitxml reads, take them from there)."""
    run, spec = getattr(item, "run", None), getattr(item, "spec", None)
    if run is None or spec is None:
        return
    trial_id = run.trial_id(spec)
    trial = next((t for t in reversed(run.trials) if t.id == trial_id), None)
    if trial is not None:
        item.user_properties.extend(trial_properties(trial))


class TrialProperties:
    """Puts each trial's properties on its item in the process that ran it: serially the one
    session, under xdist the worker, whose reports carry ``user_properties`` to the controller
    that writes the XML (the controller runs no item, so it could add none)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        if call.when == "call":
            add_trial_properties(item)
        return report


def add_run_properties(config: pytest.Config | None, run: RunRecord) -> None:
    """The run's properties on the ``<testsuite>`` of ``--junitxml``, when it is written."""
    if config is None:
        return
    from _pytest.junitxml import xml_key  # the LogXML object; no public accessor exists

    xml = config.stash.get(xml_key, None)
    if xml is not None:
        for name, value in run_properties(run):
            xml.add_global_property(name, value)
