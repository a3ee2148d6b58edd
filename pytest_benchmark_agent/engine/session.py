"""The benchmark side of one pytest session: its runs, cache, budgets and end of run.

Registered as a plugin only under ``--bench``, so a normal test session never pays for it.
It starts each run before the first trial, publishes every finished trial through the
``pytest_bench_trial_finished`` hook, stops a run cleanly when a budget is spent (its remaining
trials are skipped and recorded as ``not_run``), and on the way out, normal or interrupted,
records what did not run, summarizes, and publishes the run.

Gate 2 runs here too: a ``--bench-baseline REF`` is resolved at collection (gate 1 on the
frozen configs: a baseline with another param value is a collection error; a REF naming no run
leaves the run's CI gate unjudged), sequential replication skips the rest of a run once a look
has decided it (its state stays ``complete``), every finished run is judged (:mod:`.judge`)
before it is published, and ``--bench-fail-on`` turns the CI gate (:func:`.ci_gate.ci_gate`) into
exit code 1: ``regression`` when it regressed, ``unjudged`` when nothing could be judged.
"""

from __future__ import annotations

import atexit
import gc
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_benchmark_agent.config.models import BenchmarkConfig, ReplicateRange
from pytest_benchmark_agent.domains.load import load_benchmark
from pytest_benchmark_agent.engine import recovery
from pytest_benchmark_agent.engine.blocks import SessionDesign
from pytest_benchmark_agent.engine.cache import PrepCache
from pytest_benchmark_agent.engine.collect import BenchItem
from pytest_benchmark_agent.engine.context import StageContext
from pytest_benchmark_agent.engine.counted import CountedBatches
from pytest_benchmark_agent.engine.counters import fingerprint_label
from pytest_benchmark_agent.engine.finish import finish, take_caveats
from pytest_benchmark_agent.engine.invocation import DEFAULT_PROGRESS_S
from pytest_benchmark_agent.engine.isolation import HostIsolation
from pytest_benchmark_agent.engine.plan import BenchPlan
from pytest_benchmark_agent.engine.preflight import check_gpu_budget, check_resources, gate_one
from pytest_benchmark_agent.engine.protocol import TrialProtocol
from pytest_benchmark_agent.engine.revisions import Revisions
from pytest_benchmark_agent.errors import ConfigError
from pytest_benchmark_agent.guards.cgroup import CgroupMemory
from pytest_benchmark_agent.guards.gpu import nvml_unavailable_reason
from pytest_benchmark_agent.home import data_home
from pytest_benchmark_agent.judge.baseline import Resolution, check_baseline
from pytest_benchmark_agent.judge.sequential import sequential_stop
from pytest_benchmark_agent.records import hostcheck, recover
from pytest_benchmark_agent.records.fingerprint import collect_fingerprint, default_code
from pytest_benchmark_agent.records.reader import read_journal
from pytest_benchmark_agent.records.run import CAVEAT_NONE, BenchRun, new_run_id, new_session_token
from pytest_benchmark_agent.records.schema import TrialRecord
from pytest_benchmark_agent.report.summary_lines import session_geomean_lines
from pytest_benchmark_agent.report.terminal import terminal_lines
from pytest_benchmark_agent.util.fsutil import utc_now
from pytest_benchmark_agent.util.placeholders import render
from pytest_benchmark_agent.util.safetext import one_line


class BenchSession:
    """State shared by the collectors and items of one ``pytest --bench`` session."""

    def __init__(
        self,
        config: pytest.Config,
        home: Path,
        overrides: dict[str, Any],
        round_points: list[dict[str, Any]] | None = None,
        *,
        token: tuple[str, str] | None = None,
        worker_id: str | None = None,
    ):
        if home.exists() and not home.is_dir():  # nothing could be recorded, nor reported
            raise pytest.UsageError(
                f"--bench-home {home} is a file, not a folder; fix: give a folder (made if "
                "missing) as the data home"
            )
        self.config = config
        self.home = home
        self.overrides = overrides
        #: Shared by every run id of this session; under xdist the controller picks it.
        self.token = token or new_session_token()
        #: Set in an xdist worker: it records its trials, and the controller finishes the runs.
        self.worker_id = worker_id
        #: The points of a tuning round (``--bench-round``): the treatments of tuning files.
        self.round_points = round_points
        isolation = HostIsolation(home, config.getoption("bench_isolation"))
        self.stage_context = StageContext(
            PrepCache(home / "cache"),
            CgroupMemory.of_self(),
            isolation,
            config.hook,
            # the hook's interval (live line, heartbeat); the option paces the printed lines
            min(config.getoption("bench_progress_every"), DEFAULT_PROGRESS_S),
        )
        self.stage_context.warmup = config.getoption("bench_warmup") or 0
        self.design = SessionDesign.from_options(config.getoption)  # the command line's
        self.counted = CountedBatches(self.stage_context, worker=worker_id is not None)
        self._host_watch = hostcheck.HostWatch()  # swapping, busy processes: to the 1st trial
        config.add_cleanup(self.stage_context.containment.close)
        self.runs: list[BenchRun] = []
        self.protocol = TrialProtocol(config)
        self._t0 = time.monotonic()
        self._previous_sigterm: Any = None
        self._interrupted = False
        #: Records that could not be written (each stops the session; see _write_failed).
        self._write_errors: list[str] = []
        self._session: pytest.Session | None = None
        #: Sequential looks already taken, per run id (each look is taken once).
        self._looked: dict[str, set[int]] = {}
        self._froze = False
        #: What ``--bench-baseline`` names, per run id (resolved at collection).
        self._baselines: dict[str, Resolution] = {}
        # Made at configure time, so before pytest's unraisable-exception cleanup, and cleanups
        # run last in, first out: the objects stay frozen through its five gc.collect() calls.
        config.add_cleanup(self._unfreeze)
        # At exit the interpreter's collections walk every object again (~90 ms of a cached
        # session here, ~35 ms of plain pytest's exit) to tear down what the OS reclaims anyway;
        # Python does not promise __del__ for objects still alive at exit. Frozen then, they are
        # skipped. Re-registered, so a process running many sessions holds one such hook.
        atexit.unregister(gc.freeze)
        atexit.register(gc.freeze)

    @property
    def hook(self):
        return self.config.hook

    def pytest_report_header(self) -> str:
        """The terminal names the data home this session records into."""
        return f"benchmark data home: {self.home}"

    def preflight(self, plan: BenchPlan) -> str | None:
        """Refuse (a collection error) a benchmark whose declared resources do not fit here, or
        whose estimated GPU-hours or cost exceed its budget (a tuner checks its own rounds).

        Returns the caveat to record when the fit is tight and ``--bench-accept-risk`` was given.
        """
        config, path = plan.config, plan.path
        over = None
        if config.search_space is None:
            over = check_gpu_budget(
                config, [t.stage for t in plan.trials], [n.stage for n in plan.preps.values()]
            )
        if over:
            raise ConfigError(
                path,
                [
                    (
                        "budget",
                        "\n    ".join(over),
                        "raise the budget, lower the estimate if it is wrong, or plan fewer "
                        "trials (treatments, replicates, seeds).",
                    )
                ],
            )
        resources = config.resources
        accept = self.config.getoption("bench_accept_risk")
        result = check_resources(resources.mem_mb, resources.disk_mb, [self.home], accept)
        if not result.ok:
            raise ConfigError(
                path,
                [
                    (
                        "resources",
                        result.message.replace("\n", "\n    "),
                        "lower the declared resources, free memory or disk, or "
                        "pass --bench-accept-risk where the margin is the issue.",
                    )
                ],
            )
        wants_gpus = resources.gpus or any(stage.gpus for stage in config.stages)
        if wants_gpus and (why := nvml_unavailable_reason()):
            raise ConfigError(
                path,
                [
                    (
                        "resources.gpus",
                        f"asks for GPUs but NVML does not answer on this machine ({why}).",
                        "run it where an NVIDIA GPU and its driver are present, or set gpus: 0.",
                    )
                ],
            )
        return result.caveat

    def new_run(self, plan: BenchPlan) -> BenchRun:
        forced = self.config.getoption("bench_run_id")
        if forced and self.runs:
            raise ConfigError(
                plan.path,
                [
                    (
                        "",
                        f"--bench-run-id {forced} names one run, but this "
                        "session collects a second benchmark file.",
                        "run one benchmark file per session with it.",
                    )
                ],
            )
        run_id = forced or new_run_id(plan.config.name, self.token)
        baseline = self.config.getoption("bench_baseline")
        if baseline:
            self._baselines[run_id] = check_baseline(
                self.home, baseline, plan.config, plan.path, exclude=run_id
            )
        run = BenchRun(
            plan=plan,
            home=self.home,
            run_id=run_id,
            replayed_hash_seeds=self.config.getoption("bench_hash_seeds"),
        )
        self.runs.append(run)
        return run

    def against(
        self, path: Path, config: BenchmarkConfig
    ) -> tuple[Revisions | None, BenchmarkConfig | None]:
        """``--bench-against REV``: REV checked out (removed again when the session ends), and
        with ``--bench-against-file=revision`` REV's own benchmark file, validated."""
        ref = self.config.getoption("bench_against")
        if not ref:
            return None, None
        from pytest_benchmark_agent.engine import revisions as rev

        rev.check_design(config, path, with_baseline=bool(self.config.getoption("bench_baseline")))
        file_from = self.config.getoption("bench_against_file")
        revisions = rev.check_out(path, ref, self.home, "-".join(self.token), file_from)
        self.config.add_cleanup(lambda: rev.remove(revisions.this.root, revisions.against.root))
        if file_from != "revision":
            return revisions, None
        own = revisions.against.folder / path.name
        against_config = self.design.apply(load_benchmark(own, self.overrides), own, revisions=True)
        gate_one(against_config, own, tuning=False, home=self.home, revisions=True)
        if against_config.metrics != config.metrics:
            raise ConfigError(
                own,
                [
                    (
                        "metrics",
                        f"differ from the working tree's {path.name}: the two revisions would "
                        "not measure the same thing.",
                        "compare with the working tree's file (leave out "
                        "--bench-against-file=revision), or a REV with the same metrics.",
                    )
                ],
            )
        return revisions, against_config

    def baseline_of(self, run: BenchRun) -> Resolution | None:
        """What ``--bench-baseline`` names for ``run`` (resolved again for a run the xdist
        controller merged, which it did not collect)."""
        ref = self.config.getoption("bench_baseline")
        if not ref:
            return None
        known = self._baselines.get(run.run_id)
        if known is None:
            known = check_baseline(
                self.home, ref, run.plan.config, run.plan.path, exclude=run.run_id
            )
        return known

    # -- collection -----------------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """What runs is what survived selection (``-k``, ``-m``, ``--deselect``)."""
        for run in self.runs:
            run.planned = [i.spec for i in items if isinstance(i, BenchItem) and i.run is run]

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Freeze what exists now (imported modules, plans, items: all live to the session's
        end) out of the garbage collector's scans: later collections, pytest's five at exit
        among them, then walk only what the run itself creates."""
        if gc.get_freeze_count() == 0:  # a host process's own freeze is left as it is
            gc.freeze()
            self._froze = True

    def _unfreeze(self) -> None:
        """Give the frozen objects back to the collector (an in-process pytester run leaves
        its host as it found it)."""
        if self._froze:
            self._froze = False
            gc.unfreeze()

    # -- running --------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        if session.config.option.collectonly:
            return
        if session.testsfailed and not session.config.option.continue_on_collection_errors:
            return  # pytest stops before any trial: no run starts, so none is recorded
        self._session = session
        self._previous_sigterm = signal.signal(signal.SIGTERM, _raise_interrupt)
        if self.worker_id is None:
            recovery.recover_orphans(self.home, by="a later session", hook=self.hook)
        host_check = self._check_host()
        for run in self.runs:
            if run.planned and not (self.worker_id is None and self._taken(run)):
                run.started = utc_now()
                run.fingerprint = {**self._fingerprint(run), "host_check": host_check}
                if self.stage_context.isolation.policy == "none":
                    run.caveats.append(CAVEAT_NONE)
                wall_clock = run.plan.config.budget.wall_clock_s
                if wall_clock is not None:
                    self.stage_context.deadlines[run.run_id] = self._t0 + wall_clock
                try:
                    self.hook.pytest_bench_run_started(run=run.record())
                    take_caveats(run, self.hook)
                except OSError as exc:
                    self._write_failed(run, exc)
                    continue

    def _taken(self, run: BenchRun) -> bool:
        """Whether ``run``'s id is another run's. This session claims it here, atomically
        (:func:`.recover.claim_new`; a worker's runs are the controller's to own); a taken id
        stops the session before any stage runs (exit 2), and nothing is written to that run."""
        try:
            recover.claim_new(run.dir)
        except recover.RunTaken as taken:
            self._stop(run, str(taken))
            return True
        except OSError:
            pass  # met again, and reported, when the run's first file is written
        return False

    def _check_host(self) -> dict[str, Any]:
        """The environment that makes numbers lie (:mod:`.hostcheck`), checked once a session
        that runs trials; its warnings are printed once, by the controller."""
        if not any(run.planned for run in self.runs):
            return {}
        counted = any(s.counters for run in self.runs for s in run.plan.config.stages)
        findings = self._host_watch.findings(counted=counted)
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        lines = hostcheck.warning_lines(findings)
        if lines and terminal is not None and self.worker_id is None:
            terminal.write_line(
                "benchmark-agent: this machine may distort the numbers:", yellow=True
            )
            for line in lines:
                terminal.write_line(f"  {line}", yellow=True)
        return hostcheck.as_record(findings)

    def _fingerprint(self, run: BenchRun) -> dict[str, Any]:
        """Environment, code and accelerator; the code is what the benchmark declares
        (:func:`.fingerprint.default_code`: ``code:`` paths, else in git the benchmark's
        folder, else the stage files named in ``inputs:``, resolved as the plan resolves them).

        The benchmark file is not code: its content is the frozen config, compared on its own,
        so editing it (a param, the hypothesis) does not change the code's fingerprint."""
        plan = run.plan
        folder = plan.path.parent.resolve()
        inputs = {path for node in plan.preps.values() for path in node.inputs}
        inputs |= {
            trial.cwd / render(text, {**trial.params, "seed": trial.seed}, quote=False)
            for trial in plan.trials
            for text in trial.stage.inputs
        }
        code = default_code(
            folder, [(folder / path).resolve() for path in plan.config.code], inputs
        )
        return collect_fingerprint(
            code,
            plan.config.env_vars,
            exclude=[self.home, plan.path.resolve()],
            origin=folder,
            counter_backend=(
                fingerprint_label if any(stage.counters for stage in plan.config.stages) else None
            ),
        )

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        """Trials run pytest's protocol without per-phase output capture (:mod:`.protocol`)."""
        if not isinstance(item, BenchItem):
            return None
        self.protocol.run(item, nextitem)
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if not isinstance(item, BenchItem):
            return
        run = item.run
        deadline = self.stage_context.deadlines.get(run.run_id)
        if not run.stop_reason and deadline is not None and time.monotonic() >= deadline:
            run.stop_reason = self._budget_spent(run)
        if run.stop_reason or run.decided:
            pytest.skip(f"not run: {run.stop_reason or run.decided}")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        report = yield
        if (
            isinstance(item, BenchItem)
            and call.when == "setup"
            and report.failed
            and call.excinfo is not None
        ):
            # A fixture or the engine itself broke before the trial could run: still a record.
            record = item.run.blank_trial(
                item.spec, "failed", f"setup failed: {call.excinfo.exconly()}", utc_now()
            )
            self.finish_trial(item.run, record)
        return report

    def finish_trial(self, run: BenchRun, record: TrialRecord) -> None:
        """Publish a finished trial, then check the run's budget and sequential looks."""
        run.trials.append(record)
        try:
            published = run.record()
            self.hook.pytest_bench_trial_finished(trial=published.trials[-1], run=published)
        except OSError as exc:
            self._write_failed(run, exc)
        if self.stage_context.disk_full and not self._write_errors:
            self._stop(run, f"the disk is full ({self.stage_context.disk_full})")
        run.stop_reason = run.stop_reason or self._budget_spent(run)
        sequential = isinstance(run.plan.config.replicates, ReplicateRange)
        if sequential and not (run.stop_reason or run.decided):
            seen = run.record()
            if self.worker_id is not None:
                seen = seen.replace(trials=_seen_by_worker(run))
            run.decided = sequential_stop(seen, self._looked.setdefault(run.run_id, set()))

    def _budget_spent(self, run: BenchRun) -> str | None:
        budget = run.plan.config.budget
        ran = len(run.trials)  # while a run goes on it holds no not_run records (added at its end)
        if budget.trials is not None and ran >= budget.trials:
            return f"budget.trials spent ({ran} of {budget.trials})"
        elapsed = time.monotonic() - self._t0
        if budget.wall_clock_s is not None and elapsed >= budget.wall_clock_s:
            return f"budget.wall_clock_s spent ({elapsed:.0f}s of {budget.wall_clock_s:g}s)"
        if budget.gpu_hours is None and budget.cost_usd is None:
            return None
        spent = run.record().spent  # the snapshot just published: nothing summed again
        if budget.gpu_hours is not None and spent["gpu_hours"] >= budget.gpu_hours:
            return f"budget.gpu_hours spent ({spent['gpu_hours']:.4g} of {budget.gpu_hours:g})"
        if budget.cost_usd is not None and spent["cost_usd"] >= budget.cost_usd:
            return f"budget.cost_usd spent (${spent['cost_usd']:.4g} of ${budget.cost_usd:g})"
        return None

    def _write_failed(self, run: BenchRun, exc: OSError) -> None:
        """A record could not be written (a full disk, most often): stop the session cleanly.

        The trials already journalled stay; the run ends ``interrupted`` (here if the disk
        lets its end be written, else when a later session or verb finds it ownerless).
        """
        where = exc.filename or f"a file in {run.dir}"
        self._stop(run, f"could not write the records of run {run.run_id}: {where}: {exc.strerror}")

    def _stop(self, run: BenchRun, why: str) -> None:
        """End the session after this trial: the rest of every run is recorded ``not_run``."""
        if why not in self._write_errors:
            self._write_errors.append(why)
        self._interrupted = True
        for each in self.runs:
            each.stop_reason = each.stop_reason or why
        if self._session is not None:
            self._session.shouldstop = why

    # -- the end ----------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        self._interrupted = True

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int):
        """Finish the runs before any other plugin's session end; after them all (the xdist
        controller finishes its merged runs inside), apply ``--bench-fail-on``."""
        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
        for run in self.runs:
            if run.started is None or run.ended is not None:
                continue
            if self.worker_id is not None:
                continue  # the controller finishes it (engine/distributed.py)
            try:
                self.finish_run(run)
            except OSError as exc:
                self._write_failed(run, exc)
            except KeyboardInterrupt:  # Ctrl-C in a plugin's hook (run_finished): no traceback
                self._interrupted = True
                self._write_errors.append(
                    f"interrupted while run {run.run_id} was being finished; what its hooks "
                    "had written is kept, and a later session or verb finishes an unfinished "
                    "record as interrupted"
                )
        if self._write_errors and session.exitstatus in (0, 1):
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        result = yield
        fail_on = self.config.getoption("bench_fail_on") or ()
        if self.worker_id is None and fail_on and session.exitstatus == pytest.ExitCode.OK:
            if any(run.ended and run.ci_gate and run.ci_gate.fails(fail_on) for run in self.runs):
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return result

    def finish_run(self, run: BenchRun) -> None:
        """Finish ``run`` (:func:`.finish.finish`): the session's own problems say why what
        did not run did not."""
        why = (
            self._write_errors[0]
            if self._write_errors
            else "the session was interrupted"
            if self._interrupted
            else None
        )
        finish(run, why, self.hook, interrupted=self._interrupted, baseline=self.baseline_of(run))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for problem in self._write_errors:
            terminalreporter.write_line(
                one_line(f"benchmark-agent: {problem}"), red=True, bold=True
            )
        finished = [run.record() for run in self.runs if run.ended is not None]
        if not finished:
            return
        terminalreporter.section("benchmark summary")
        gated = bool(
            self.config.getoption("bench_baseline")
            or self.config.getoption("bench_fail_on")
            or self.config.getoption("bench_against")
        )
        for run in finished:
            gate = run.ci_gate if gated else None
            for line in terminal_lines(run, gate):
                loud = line.startswith("  CI gate: ") and not line.startswith("  CI gate: passed")
                terminalreporter.write_line(line, red=loud, bold=loud)
        for line in session_geomean_lines(finished):
            terminalreporter.write_line(one_line(line))


def _seen_by_worker(run: BenchRun) -> tuple[TrialRecord, ...]:
    """The trials an xdist worker can see: its own, and with a shared data directory every
    trial the controller journalled (machines that share nothing see only their own)."""
    journal = tuple(TrialRecord.from_dict(t) for t in read_journal(run.dir))
    known = {(t.id, t.started) for t in journal}
    return journal + tuple(t for t in run.trials if (t.id, t.started) not in known)


def _raise_interrupt(signum: int, frame: Any) -> None:
    """SIGTERM ends a benchmark session like Ctrl-C: stages stopped, records kept."""
    raise KeyboardInterrupt(f"signal {signum}")


def default_home(config: pytest.Config) -> Path:
    """``--bench-home``, else ``$BENCHMARK_HOME``, else ``benchmark_data/`` at the project root
    (:func:`pytest_benchmark_agent.home.data_home`; pytest's rootdir when it found its config)."""
    rootdir = config.rootpath if config.inipath is not None else None
    home, _ = data_home(config.getoption("bench_home"), config.invocation_params.dir, rootdir)
    return home
