"""pytest-xdist: one run record per benchmark file, however many workers measured it.

The controller picks the session token (so every worker records into the same run folder),
schedules whole **blocks** (replicate k of every treatment, per seed) to one worker, so each
worker, and each host, runs every treatment of a comparison, and at the end merges what the
workers recorded: the shared journal of trials, and each worker's hand-over file (preps,
caveats, fingerprint). A worker that crashed leaves its running trial recorded as
``interrupted``; every other trial stays as it was recorded.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from pytest_benchmark_agent.config.recipe import load_benchmark
from pytest_benchmark_agent.engine.plan import build_plan
from pytest_benchmark_agent.engine.session import BenchSession
from pytest_benchmark_agent.records.run import BenchRun
from pytest_benchmark_agent.records.writer import load_yaml, read_journal

_BLOCK = re.compile(r"-rep(\d+)(?:-seed([^\]]+))?\]$")


def block_scope(nodeid: str) -> str:
    """The scheduling unit of a test id: a benchmark block, or the test itself."""
    match = _BLOCK.search(nodeid.split("@")[0])
    if not match:
        return nodeid
    return f"{nodeid.split('::')[0]}::block-{match.group(1)}-{match.group(2)}"


class BlockScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with benchmark blocks as scopes (other tests: one each).

    It also survives a crashed worker, which xdist 3.8's scope scheduling does not (it hangs:
    pytest-xdist issues 1323, 1327 and 1378): only unfinished blocks go back on the queue, the
    trial the worker died on is not run again (xdist has reported it failed), and a node left
    with a single pending trial is told to shut down so it runs it instead of waiting.
    """

    def _split_scope(self, nodeid: str) -> str:
        return block_scope(nodeid)

    def remove_node(self, node: Any) -> str | None:
        workload = self.assigned_work.pop(node)
        unfinished = {scope: unit for scope, unit in workload.items() if not all(unit.values())}
        if not unfinished:
            return None
        scope, crashitem = next(
            (scope, nodeid)
            for scope, unit in unfinished.items()
            for nodeid, done in unit.items()
            if not done
        )
        unfinished[scope][crashitem] = True
        self.workqueue.update({s: u for s, u in unfinished.items() if not all(u.values())})
        for other in self.assigned_work:
            self._reschedule(other)
        return crashitem

    def _reschedule(self, node: Any) -> None:
        if node.shutting_down or node not in self.registered_collections:
            return  # a replacement that has not collected yet is scheduled when it has
        while self.workqueue and self._pending_of(self.assigned_work[node]) < 2:
            self._assign_work_unit(node)
        if not self.workqueue:
            node.shutdown()


class DistributedController:
    """The controller's side of a ``pytest --bench -n N`` session."""

    def __init__(self, bench: BenchSession):
        self.bench = bench
        self.collected: set[str] = set()
        self.crashed: dict[str, str] = {}

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["bench_token"] = list(self.bench.token)
        node.workerinput["bench_home"] = str(self.bench.home)

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> BlockScheduling:
        return BlockScheduling(config, log)

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.collected.update(nodeid.split("@")[0] for nodeid in ids)

    def pytest_handlecrashitem(self, crashitem: str, report: Any, sched: Any) -> None:
        self.crashed[crashitem.split("@")[0].split("::")[-1]] = str(report.longrepr)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        forced = self.bench.config.getoption("bench_run_id")
        suffix = forced or f"-{self.bench.token[1]}"
        runs = self.bench.home / "runs"
        folders = (
            sorted(p for p in runs.glob(f"*{suffix}") if (p / "config.yaml").is_file())
            if runs.is_dir()
            else []
        )
        for folder in folders:
            if folder.name.startswith(self.bench.token[0]) or forced:
                run = self._merge(folder)
                self.bench.runs.append(run)
                self.bench.finish_run(run)

    def _merge(self, folder: Path) -> BenchRun:
        """Rebuild a run from its frozen config, the shared journal and the workers' parts."""
        frozen = load_yaml(folder / "config.yaml")
        source = Path(frozen["source"])
        config = load_benchmark(source, self.bench.overrides)
        points = self.bench.round_points if config.search_space is not None else None
        run = BenchRun(
            plan=build_plan(config, source, points), home=self.bench.home, run_id=folder.name
        )
        names = {nodeid.split("::")[-1] for nodeid in self.collected}
        run.planned = [spec for spec in run.plan.trials if run.trial_id(spec) in names]
        run.trials = sorted(
            read_journal(folder), key=lambda t: t.get("started") or t.get("ended") or ""
        )
        parts = [json.loads(p.read_text()) for p in sorted((folder / "workers").glob("*.json"))]
        run.started = min((p["started"] for p in parts if p.get("started")), default=None)
        run.fingerprint = parts[0]["fingerprint"] if parts else {}
        for part in parts:
            run.preps += [
                {**prep, "worker": part["worker"], "host": part["host"]} for prep in part["preps"]
            ]
            run.caveats += [c for c in part["caveats"] if c not in run.caveats]
        hosts = sorted({part["host"] for part in parts})
        if len(hosts) > 1:
            run.fingerprint = {
                **run.fingerprint,
                "hosts": {part["host"]: part["fingerprint"] for part in parts},
            }
        done = {t["id"] for t in run.trials}
        for spec in run.planned:
            trial_id = run.trial_id(spec)
            if trial_id in self.crashed and trial_id not in done:
                run.trials.append(run.blank_trial(spec, "interrupted", self.crashed[trial_id]))
                run.caveats.append(f"{self.crashed[trial_id]}; its other trials are kept")
        return run
