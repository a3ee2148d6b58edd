"""Feedback during long work: ``heartbeat.json`` and ``progress.log`` in the run folder.

The heartbeat says where a run is (trials done of total, the current stage and trial, elapsed,
ETA, peak memory) and which process writes it; ``benchmark-agent status`` reads it, so a
detached run can be followed from anywhere, and a run whose process vanished is told apart from
one that is still working. It is rewritten (temp file + rename, so readers never see a torn
file; no fsync: a heartbeat lost in a power cut is worth less than the time fsync would cost
every trial) at run start and end and on every progress call; a trial's end or a stage's start
rewrites it at most once every ``BEAT_INTERVAL_S``, and a change held back that way is written
by a flusher thread (one per session, waking once a second while a run is live) so the file is
never more than about a second behind. A rewrite per trial cost more than a short trial itself
(docs/benchmark/PERFORMANCE.md).

The engine calls ``pytest_bench_stage_progress`` about once a second while a stage runs. On a
terminal the progress line (stage, trial, elapsed, peak memory, trials done of total, an ETA
from the finished trials) is drawn after pytest's dots and redrawn in place: the cursor is saved
and restored around it and the line is erased before the next dot, so the dot line goes on
unbroken. Off a terminal (and on one whose ``TERM`` is ``dumb``, which takes no cursor codes),
and in ``progress.log``, a stage says so each time it has run another
``--bench-progress-every`` seconds (30 by default). With ``-s`` (and in a detached run's log)
:class:`StageEcho` shows each stage's output lines as they come, prefixed with the trial id.
Terminal writes from inside a test go around pytest's capture. At run start the plugin also
records an accepted plan-time deviation as a caveat of the run (see ``planning.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_benchmark_agent.records.bounded import MAX_STATE_BYTES, BadJson, read_json
from pytest_benchmark_agent.records.store import DEVIATIONS
from pytest_benchmark_agent.util.fsutil import append_line, utc_now
from pytest_benchmark_agent.util.safetext import one_line

if TYPE_CHECKING:
    from pytest_benchmark_agent.records.record import RunRecord
    from pytest_benchmark_agent.records.schema import TrialRecord

HEARTBEAT = "heartbeat.json"
BEAT_INTERVAL_S = 1.0
PROGRESS_LOG = "progress.log"
#: Off a terminal, the line's interval when ``--bench-progress-every`` is not set.
DEFAULT_EVERY_S = 30.0
#: Save the cursor, clear to the end of the line, restore it (VT100), drawn only on a terminal
#: whose TERM is not ``dumb``; elsewhere the line is printed each interval instead.
_SAVE, _CLEAR, _RESTORE = "\x1b7", "\x1b[K", "\x1b8"


@dataclass
class Beat:
    """The content of ``heartbeat.json``."""

    run_id: str
    name: str
    pid: int
    state: str
    trials_done: int
    trials_total: int
    stage: str | None
    trial_id: str | None
    stage_elapsed_s: float | None
    elapsed_s: float
    eta_s: float | None
    peak_rss_mb: float | None
    started_unix: float
    updated: str
    updated_unix: float
    #: Trials done per host, where they ran on more than one (an xdist session's machines).
    hosts: dict[str, int] | None = None


def read_heartbeat(run_dir: Path) -> dict[str, Any] | None:
    """The last heartbeat of a run, or None when it has none (or it cannot be read)."""
    try:
        beat = read_json(run_dir / HEARTBEAT, MAX_STATE_BYTES)
    except (OSError, BadJson):
        return None
    return beat if isinstance(beat, dict) else None


def duration(seconds: float | None) -> str:
    """``45s``, ``12m04s``, ``3h07m``: short and fixed in shape, for status lines."""
    if seconds is None:
        return "?"
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class _Live:
    """What the plugin tracks of one run between hook calls."""

    def __init__(self, run: RunRecord):
        self.run = run
        self.t0 = time.monotonic()
        self.started_unix = time.time()
        self.stage: str | None = None
        self.trial_id: str | None = None
        self.stage_t0: float | None = None
        self.peak_rss_mb: float | None = None
        self.total = len(run.planned)
        self.done = 0
        self.by_host: dict[str, int] = {}
        self.last_write = 0.0
        self.pending = False  # a change not written yet (the flusher writes it)
        self.lines = 0  # progress lines printed for the running stage

    def eta_s(self, now: float) -> float | None:
        """Seconds left, from the pace of the finished trials (None before the first)."""
        if not self.done or self.run.state != "running":
            return None
        return (now - self.t0) / self.done * max(self.total - self.done, 0)

    def see_peak(self, value: float | None) -> None:
        if value is not None and (self.peak_rss_mb is None or value > self.peak_rss_mb):
            self.peak_rss_mb = float(value)


def _deviation_caveat(run: RunRecord) -> str | None:
    """The caveat of a plan-time deviation accepted for ``run``; planning (~6 ms of imports) is
    loaded only where the data directory holds accepted deviations at all."""
    if not (run.home / DEVIATIONS).is_dir():
        return None
    from pytest_benchmark_agent.judge.review import deviation_caveat

    return deviation_caveat(run.home, run.name, run.model)


class HeartbeatWriter:
    """Keeps every run's ``heartbeat.json`` current and prints long-stage progress."""

    def __init__(self, config: pytest.Config):
        self._config = config
        # In an xdist worker the controller follows the run; workers would clobber its file.
        self._enabled = not hasattr(config, "workerinput")
        self._live: dict[str, _Live] = {}
        # Held while a beat is built and renamed into place: the flusher never writes a stale
        # beat over a newer one.
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        self._every = config.getoption("bench_progress_every", None) or DEFAULT_EVERY_S
        self._drawn = False  # a live line is on the terminal after pytest's dots

    @pytest.hookimpl(tryfirst=True)
    def pytest_bench_run_started(self, run: RunRecord) -> None:
        if not self._enabled:
            return
        self._live[run.run_id] = _Live(run)
        self._write(run)
        if self._flusher is None:
            self._stop.clear()
            self._flusher = threading.Thread(
                target=self._flush_pending, daemon=True, name="heartbeat-flusher"
            )
            self._flusher.start()

    @pytest.hookimpl
    def pytest_bench_run_caveats(self, run: RunRecord) -> list[str] | None:
        """An accepted plan-time deviation limits what the run can be compared with."""
        if not self._enabled:
            return None
        caveat = _deviation_caveat(run)
        return [caveat] if caveat else None

    @pytest.hookimpl
    def pytest_bench_stage_started(self, run: RunRecord, stage: str, trial_id: str | None) -> None:
        live = self._live.get(run.run_id)
        if live is None:
            return
        live.run = run
        live.stage, live.trial_id, live.stage_t0 = stage, trial_id, time.monotonic()
        live.lines = 0
        self.erase()
        self._write(run, throttled=True)

    @pytest.hookimpl
    def pytest_bench_stage_progress(
        self, run: RunRecord, stage: str, trial_id: str | None, elapsed_s: float, peak_rss_mb: float
    ) -> None:
        live = self._live.get(run.run_id)
        if live is None:
            return
        live.run = run
        live.stage, live.trial_id = stage, trial_id
        live.stage_t0 = time.monotonic() - elapsed_s
        live.see_peak(peak_rss_mb)
        where = f"stage {stage}" + (f" ({trial_id})" if trial_id else " (prep)")
        eta = live.eta_s(time.monotonic())
        line = one_line(  # a trial id holds its treatment's label
            f"[benchmark] {run.name}: {where} running for {duration(elapsed_s)}, "
            f"peak {peak_rss_mb:.1f} MB, trials {live.done}/{live.total}"
            + (f", ETA {duration(eta)}" if eta is not None else "")
        )
        reporter = self._config.pluginmanager.get_plugin("terminalreporter")
        tty = reporter is not None and reporter.isatty() and os.environ.get("TERM") != "dumb"
        if tty:  # short: it shares the line with pytest's dots
            running = trial_id or f"prep {stage}"
            self._draw(
                f"trial {min(live.done + 1, live.total)}/{live.total} {running} "
                f"{duration(elapsed_s)}, peak {peak_rss_mb:.0f} MB"
                + (f", ETA {duration(eta)}" if eta is not None else "")
            )
        if elapsed_s >= self._every * (live.lines + 1):
            live.lines = int(elapsed_s // self._every)
            if reporter is not None and not tty:
                with self._uncaptured():
                    end_line(self._config)
                    reporter.write_line(line)
            append_line(run.dir / PROGRESS_LOG, f"{utc_now()} {line}")
        self._write(run)

    def _draw(self, line: str) -> None:
        """Draw ``line`` after what the terminal's current line holds, the cursor left where
        pytest's next dot goes; too little room left on the line: nothing is drawn."""
        writer = self._config.get_terminal_writer()
        room = writer.fullwidth - writer.width_of_current_line - 2
        if room < 16:
            return self.erase()
        with self._uncaptured():
            sys.stdout.write(f"{_SAVE} {one_line(line)[:room]}{_CLEAR}{_RESTORE}")
            sys.stdout.flush()
        self._drawn = True
        return None

    def erase(self) -> None:
        """Take the live line off the terminal (the cursor sits where it began)."""
        if self._drawn:
            self._drawn = False
            with self._uncaptured():
                sys.stdout.write(_CLEAR)
                sys.stdout.flush()

    def _uncaptured(self) -> contextlib.AbstractContextManager[None]:
        return uncaptured(self._config)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Before pytest writes a trial's dot, the live line goes."""
        self.erase()

    @pytest.hookimpl
    def pytest_bench_trial_finished(self, trial: TrialRecord, run: RunRecord) -> None:
        live = self._live.get(run.run_id)
        if live is None:
            return
        live.run = run
        live.see_peak(trial.peak_rss_mb)
        live.stage = live.trial_id = live.stage_t0 = None
        live.done += trial.status != "not_run"
        if trial.status != "not_run" and trial.host:
            live.by_host[trial.host] = live.by_host.get(trial.host, 0) + 1
        self.erase()
        self._write(run, throttled=True)

    @pytest.hookimpl
    def pytest_bench_run_finished(self, run: RunRecord) -> None:
        if run.run_id not in self._live:
            return
        self._live[run.run_id].run = run
        self._write(run)
        with self._lock:
            del self._live[run.run_id]
        if not self._live and self._flusher is not None:
            self._stop.set()
            self._flusher.join()
            self._flusher = None

    def _write(self, run: RunRecord, *, throttled: bool = False) -> None:
        with self._lock:
            live = self._live[run.run_id]
            if throttled and time.monotonic() - live.last_write < BEAT_INTERVAL_S:
                live.pending = True
                return
            self._beat(live)

    def _flush_pending(self) -> None:
        """The flusher: writes held-back changes once a second until the last run ends."""
        while not self._stop.wait(BEAT_INTERVAL_S):
            with self._lock:
                for live in list(self._live.values()):
                    if live.pending:
                        with contextlib.suppress(OSError):  # advisory: the next beat retries
                            self._beat(live)

    @staticmethod
    def _beat(live: _Live) -> None:
        """Write the run's heartbeat now (the caller holds the lock)."""
        run = live.run
        now = time.monotonic()
        live.last_write, live.pending = now, False
        done, elapsed = live.done, now - live.t0
        eta = live.eta_s(now)
        beat = Beat(
            run_id=run.run_id,
            name=run.name,
            pid=os.getpid(),
            state=run.state,
            trials_done=done,
            trials_total=live.total,
            stage=live.stage,
            trial_id=live.trial_id,
            stage_elapsed_s=(round(now - live.stage_t0, 3) if live.stage_t0 is not None else None),
            elapsed_s=round(elapsed, 3),
            eta_s=round(eta, 1) if eta is not None else None,
            peak_rss_mb=live.peak_rss_mb,
            started_unix=live.started_unix,
            updated=utc_now(),
            updated_unix=time.time(),
            hosts=dict(live.by_host) if len(live.by_host) > 1 else None,
        )
        _replace(run.dir / HEARTBEAT, json.dumps(asdict(beat), indent=1))


class StageEcho:
    """``-s``: each stage's output, a line at a time as it comes, prefixed with its trial id
    (``[measure[mode=a-rep0]] ...``; stderr's lines ``[... stderr] ...``). A line still open
    when its stream ends is shown then. The chunks come redacted from the stage's
    :class:`~pytest_benchmark_agent.engine.stage_output.StageOutput`, the one redaction of a
    stage's streams; here they are only made printable."""

    def __init__(self, config: pytest.Config, progress: HeartbeatWriter):
        self._config = config
        self._progress = progress
        self._open: dict[tuple[str, str], bytes] = {}

    def __call__(self, label: str, stream: str, chunk: bytes) -> None:
        key = (label, stream)
        held = self._open.pop(key, b"") + chunk
        if chunk:
            held, _, rest = held.rpartition(b"\n")
            if rest:
                self._open[key] = rest
        if not held:
            return
        tag = one_line(f"[{label}]" if stream == "stdout" else f"[{label} {stream}]")
        text = [one_line(line) for line in held.decode(errors="replace").splitlines()]
        reporter = self._config.pluginmanager.get_plugin("terminalreporter")
        self._progress.erase()
        with uncaptured(self._config):
            if reporter is None:
                sys.stdout.write("".join(f"{tag} {line}\n" for line in text))
                sys.stdout.flush()
                return
            end_line(self._config)
            for line in text:
                reporter.write_line(f"{tag} {line}")


def uncaptured(config: pytest.Config) -> contextlib.AbstractContextManager[None]:
    """Writes from inside a test that reach the terminal, not the test's captured output."""
    capture = config.pluginmanager.get_plugin("capturemanager")
    return capture.global_and_fixture_disabled() if capture else contextlib.nullcontext()


def end_line(config: pytest.Config) -> None:
    """End a line of pytest's dots still open, so a line of ours starts on its own."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        # The reporter ends a "file.yaml ..." line it started; -q's row of dots it does not
        # track, so a line still open after that is ended here.
        reporter.ensure_newline()
        if config.get_terminal_writer().width_of_current_line:
            reporter.write("\n")


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` by rename: readers see the old or the new file, never a mix."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
    except FileNotFoundError:  # the first beat of a run may come before its folder exists
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text)
    os.replace(tmp, path)
