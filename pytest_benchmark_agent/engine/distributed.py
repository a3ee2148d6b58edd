"""pytest-xdist: one run record per benchmark file, written by the controller alone.

Workers need share nothing with the controller but xdist's own channel. A worker attaches what
it recorded since its last report (each finished trial, new prep events and caveats, and the
first time its host and fingerprint) to the report of the phase that recorded it, and its last
part to ``workeroutput``; the controller appends each trial to its own journal the moment the
report arrives, so a crash of any process loses no finished trial the controller received, and
it alone writes ``trials.jsonl``, ``results.yaml``, the report and the index. Preps are built and
cached in each worker's own data directory; stage output stays there, its path and host named.

The controller schedules whole **blocks** (replicate k of every treatment, per seed) to one
worker, so each worker, and each host, runs every treatment of a comparison. What cannot be
trusted is said, never dropped: a crashed worker's running trial is recorded ``interrupted``; a
trial that ran but whose record never arrived is recorded ``interrupted`` too; a worker that went
down before its last part, or whose environment differs from the others', is named in a caveat.
"""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from pytest_benchmark_agent.domains.load import load_benchmark
from pytest_benchmark_agent.engine.isolation import host_id
from pytest_benchmark_agent.engine.plan import build_plan
from pytest_benchmark_agent.engine.session import BenchSession
from pytest_benchmark_agent.records import recover
from pytest_benchmark_agent.records.frozen import freeze, thaw
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.records.run import BenchRun
from pytest_benchmark_agent.records.schema import TrialRecord
from pytest_benchmark_agent.util import redact
from pytest_benchmark_agent.util.fsutil import utc_now

#: The name of the benchmark's entry in a report's ``user_properties`` and in ``workeroutput``.
KEY = "benchmark_agent"
#: Fingerprint parts that must agree between workers (hardware and host names may differ: the
#: analysis is blocked by host).
_SAME = ("python", "implementation", "packages", "tool_packages")
_BLOCK = re.compile(r"-rep(\d+)(?:-seed([^\]]+))?\]$")


def block_scope(nodeid: str) -> str:
    """The scheduling unit of a test id: a benchmark block, or the test itself."""
    match = _BLOCK.search(nodeid.split("@")[0])
    if not match:
        return nodeid
    return f"{nodeid.split('::')[0]}::block-{match.group(1)}-{match.group(2)}"


def _split(nodeid: str) -> tuple[str, str]:
    """(benchmark file, trial id) of a test id."""
    base = nodeid.split("@")[0]
    return base.split("::")[0], base.split("::")[-1]


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


class WorkerChannel:
    """A worker's side: what it records travels to the controller with its reports."""

    def __init__(self, bench: BenchSession, worker_id: str, output: dict[str, Any]):
        self.bench = bench
        self.worker_id = worker_id
        #: xdist's ``workeroutput``: sent to the controller when the worker's session ends.
        self.output = output
        self.host = host_id()
        self._pending: dict[str, list[dict[str, Any]]] = {}
        #: Per run id: how many of its prep events, caveats and warm-up rounds were sent already.
        self._sent: dict[str, tuple[int, int, int]] = {}

    @pytest.hookimpl
    def pytest_bench_trial_finished(self, trial: TrialRecord, run: RunRecord) -> None:
        self._pending.setdefault(run.run_id, []).append(thaw(trial))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        report = yield  # outermost: a record the session adds to this report is taken too
        text = self._parts()
        if text is not None:
            # A new list: the report's list is the item's, shared with its next phases.
            report.user_properties = [*report.user_properties, (KEY, text)]
        return report

    @pytest.hookimpl
    def pytest_sessionfinish(self) -> None:
        """The last part (caveats added at the end); its presence says the worker ended well."""
        self.output[KEY] = self._parts() or "[]"

    def _parts(self) -> str | None:
        """What each run recorded here since the last call, as JSON; None when nothing."""
        parts = []
        for run in self.bench.runs:
            if run.started is None:
                continue
            trials = self._pending.pop(run.run_id, [])
            preps, caveats, warmups = self._sent.get(run.run_id, (0, 0, 0))
            first = run.run_id not in self._sent
            grown = (len(run.preps), len(run.caveats), len(run.warmups)) != (
                preps,
                caveats,
                warmups,
            )
            if not (first or trials or grown):
                continue
            part: dict[str, Any] = {
                "run_id": run.run_id,
                "worker": self.worker_id,
                "host": self.host,
                "trials": trials,
                "preps": run.preps[preps:],
                "caveats": run.caveats[caveats:],
                "warmups": run.warmups[warmups:],
                "stop_reason": run.stop_reason,
            }
            if first:
                part |= {"started": run.started, "fingerprint": run.fingerprint}
            self._sent[run.run_id] = (len(run.preps), len(run.caveats), len(run.warmups))
            parts.append(part)
        return json.dumps(redact.scrub(parts), default=str) if parts else None


class DistributedController:
    """The controller's side of a ``pytest --bench -n N`` session: it writes every record."""

    def __init__(self, bench: BenchSession):
        self.bench = bench
        #: Trial ids collected, per benchmark file (relative to the root, as in test ids).
        self.collected: dict[str, set[str]] = {}
        self.runs: dict[str, BenchRun] = {}
        self._by_file: dict[str, BenchRun] = {}
        #: Per run id: worker id -> (host, fingerprint), in the order they reported.
        self._workers: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {}
        #: Per run id: the (trial id, started) pairs recorded, and the trial ids.
        self._recorded: dict[str, set[tuple[str, Any]]] = {}
        self._ids: dict[str, set[str]] = {}

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["bench_token"] = list(self.bench.token)

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> BlockScheduling:
        return BlockScheduling(config, log)

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        for nodeid in ids:
            file, name = _split(nodeid)
            self.collected.setdefault(file, set()).add(name)
        for file, names in self.collected.items():
            if file in self._by_file or not file.endswith((".yaml", ".yml", ".py")):
                continue
            run = self._plan(file)
            if run is not None:
                run.planned = [s for s in run.plan.trials if run.trial_id(s) in names]

    def _plan(self, file: str) -> BenchRun | None:
        """The run of a benchmark file the workers collected, planned from this checkout."""
        source = self.bench.config.rootpath / file
        if source.suffix == ".py" or not source.is_file():
            return None  # a test module, not a benchmark file
        config = load_benchmark(source, self.bench.overrides)
        points = self.bench.round_points if config.search_space is not None else None
        run = self.bench.new_run(build_plan(config, source, points))
        self._by_file[file] = self.runs[run.run_id] = run
        return run

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Take the records a report carries (hidden from every later reader of it), and
        record a trial that ran but whose record did not come."""
        texts = [value for name, value in report.user_properties if name == KEY]
        if texts:
            report.user_properties = [p for p in report.user_properties if p[0] != KEY]
        for text in texts:
            for part in json.loads(text):
                self._take(part)
        file, name = _split(report.nodeid)
        run = self._by_file.get(file)
        if report.when == "call" and run is not None and name in self.collected.get(file, ()):
            if name not in self._ids.setdefault(run.run_id, set()):
                worker = getattr(getattr(report, "node", None), "gateway", None)
                self._lost(
                    run,
                    name,
                    f"it ran on worker {getattr(worker, 'id', '?')}, but its record never "
                    f"reached the controller (pytest-xdist {version('pytest-xdist')} carried "
                    "none with its report)",
                )

    def pytest_handlecrashitem(self, crashitem: str, report: Any, sched: Any) -> None:
        file, name = _split(crashitem)
        run = self._by_file.get(file)
        if run is not None:
            self._lost(run, name, str(report.longrepr))

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """Take a worker's last part; a worker that went down without one is named."""
        worker = node.gateway.id
        text = getattr(node, "workeroutput", {}).get(KEY)
        if text is not None:
            for part in json.loads(text):
                self._take(part)
            return
        for run_id, workers in self._workers.items():
            if worker in workers:
                run = self.runs[run_id]
                caveat = (
                    f"worker {worker} (host {workers[worker][0]}) went down before handing over "
                    f"the end of its part ({error or 'no reason given'}); every trial it "
                    "recorded before is kept"
                )
                run.caveats += [caveat] if caveat not in run.caveats else []

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session):
        """Before the session finishes the runs: trials in execution order, hosts named."""
        for run in self.runs.values():
            run.trials.sort(key=lambda t: t.started or t.ended or "")
            hosts = {host: fp for host, fp in self._workers.get(run.run_id, {}).values()}
            if len(hosts) > 1:
                run.fingerprint = {**run.fingerprint, "hosts": hosts}
        return (yield)

    def _take(self, part: dict[str, Any]) -> None:
        """Merge one worker's part into its run, each trial journalled as it comes."""
        run = self.runs.get(part["run_id"])
        if run is None:
            return  # a run this checkout did not plan: its collection error says why
        worker, host = part["worker"], part["host"]
        if run.started is None:
            self._start(run, part.get("started"), part.get("fingerprint") or {})
            if run.started is None:
                return
        if "fingerprint" in part:
            self._add_worker(run, worker, host, part["fingerprint"])
        run.preps += [{**prep, "worker": worker, "host": host} for prep in part["preps"]]
        run.caveats += [c for c in part["caveats"] if c not in run.caveats]
        run.stop_reason = run.stop_reason or part.get("stop_reason")
        for warmup in part.get("warmups") or []:  # absent from a worker of an older version
            self._warmed(run, {**warmup, "worker": worker, "host": host})
        for trial in part["trials"]:
            if isinstance(trial, dict) and isinstance(trial.get("id"), str):
                self._record(run, TrialRecord.from_dict(trial))
            else:  # a worker of another version, most likely: said, not guessed at
                caveat = f"worker {worker} (host {host}) sent a trial record without an id"
                run.caveats += [caveat] if caveat not in run.caveats else []

    def _start(self, run: BenchRun, started: str | None, fingerprint: dict[str, Any]) -> None:
        try:
            recover.claim_new(run.dir)
        except recover.RunTaken as taken:  # its parts are not recorded: another run's folder
            self.runs.pop(run.run_id, None)
            self._by_file = {f: r for f, r in self._by_file.items() if r is not run}
            self.bench._stop(run, str(taken))
            return
        except OSError:
            pass  # met again, and reported, when the run's first file is written
        run.started = started or utc_now()
        run.fingerprint = fingerprint
        try:
            self.bench.hook.pytest_bench_run_started(run=run.record())
        except OSError as exc:
            self.bench._write_failed(run, exc)

    def _record(self, run: BenchRun, trial: TrialRecord) -> None:
        key = (trial.id, trial.started)
        seen = self._recorded.setdefault(run.run_id, set())
        if key in seen:
            return
        seen.add(key)
        self._ids.setdefault(run.run_id, set()).add(trial.id)
        run.trials.append(trial)
        try:
            published = run.record()
            self.bench.hook.pytest_bench_trial_finished(trial=published.trials[-1], run=published)
        except OSError as exc:
            self.bench._write_failed(run, exc)

    def _warmed(self, run: BenchRun, warmup: dict[str, Any]) -> None:
        """A worker's warm-up round: recorded with the run's, journalled as it comes."""
        run.warmups.append(warmup)
        try:
            self.bench.hook.pytest_bench_warmup_finished(warmup=freeze(warmup), run=run.record())
        except OSError as exc:
            self.bench._write_failed(run, exc)

    def _lost(self, run: BenchRun, trial_id: str, why: str) -> None:
        """Record ``interrupted`` a trial whose own record will never come."""
        spec = next((s for s in run.planned if run.trial_id(s) == trial_id), None)
        if spec is None:
            return
        if run.started is None:
            self._start(run, None, {})
        self._record(run, run.blank_trial(spec, "interrupted", why, utc_now()))
        caveat = f"{why}; its other trials are kept"
        run.caveats += [caveat] if caveat not in run.caveats else []

    def _add_worker(self, run: BenchRun, worker: str, host: str, fp: dict[str, Any]) -> None:
        """Name a worker whose environment differs from the first one's."""
        workers = self._workers.setdefault(run.run_id, {})
        if worker in workers:
            return
        if workers:
            first, (first_host, first_fp) = next(iter(workers.items()))
            differences = _differences(first_fp, fp)
            if differences:
                run.caveats.append(
                    f"worker {worker} (host {host}) runs another environment than {first} "
                    f"(host {first_host}): {'; '.join(differences)}; its trials are kept, but "
                    "they measured something else"
                )
        workers[worker] = (host, fp)


def _differences(first: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """What differs between two fingerprints in what every worker must share: the Python,
    its packages, the code's content (its paths may differ) and the declared variables."""
    env_a, env_b = first.get("env") or {}, other.get("env") or {}
    found = [_differs(name, env_a.get(name), env_b.get(name)) for name in _SAME]
    found.append(_differs("vars", first.get("vars") or {}, other.get("vars") or {}))
    code_a, code_b = (sorted(map(_canon, (fp.get("code") or {}).values())) for fp in (first, other))
    if code_a != code_b:
        found.append("the code's content")
    return [text for text in found if text]


def _differs(name: str, a: Any, b: Any) -> str | None:
    """``name`` and how it differs (per key, for a mapping), or None when it does not."""
    if a == b:
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        return f"{name} " + ", ".join(f"{k} {a.get(k)} vs {b.get(k)}" for k in keys[:5])
    return f"{name} {a} vs {b}"


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)
