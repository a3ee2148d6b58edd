"""The tune's entry points: :func:`run_tune` (``benchmark-agent tune``) and
:func:`tune_from_pytest` (``pytest --bench-tune``), and resuming a recorded tune.

A tune is validated whole before any round runs (the file, its search space, and on
``--resume`` that the record matches the file); then the strategy runs, the record is written
after every round, and Ctrl-C or SIGTERM stops the round's session and keeps the record.
Exit codes: 0 complete, 1 halted, 2 failed or interrupted (as pytest).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.domains.load import load_benchmark
from pytest_benchmark_agent.errors import ConfigError
from pytest_benchmark_agent.records.reader import load_yaml
from pytest_benchmark_agent.records.record import RunRecord, load_run
from pytest_benchmark_agent.records.run import new_run_id
from pytest_benchmark_agent.tune.recorder import TuneRecorder, definition
from pytest_benchmark_agent.tune.report import chain_text, selected_text
from pytest_benchmark_agent.tune.rounds import RoundError, RoundOutcome, SubprocessRounds, merged
from pytest_benchmark_agent.tune.space import SearchSpace, load_space
from pytest_benchmark_agent.tune.strategies import STRATEGIES
from pytest_benchmark_agent.tune.tuner import ResumeMismatch, Tuner
from pytest_benchmark_agent.util import redact
from pytest_benchmark_agent.util.fsutil import acquire_lock, release_lock

#: Held (an flock) by the process running a tune, so a ``--resume`` while it runs is refused;
#: the kernel drops it when that process ends, however it ends.
TUNE_LOCK = ".tune.lock"
EXIT_CODES = {"complete": 0, "halted": 1, "failed": 2, "interrupted": 2}


@dataclass(frozen=True)
class _TuneFile:
    """The tuning file as validated before any round runs: its path, the benchmark it loads
    to and its search space."""

    path: Path
    config: BenchmarkConfig
    space: SearchSpace


def run_tune(
    path: Path,
    strategy: str | None,
    home: Path,
    *,
    resume: str | None = None,
    overrides: dict[str, Any] | None = None,
    extra_args: Sequence[str] = (),
    echo: Callable[[str], None] = print,
) -> int:
    """Tune the file at ``path``; returns the exit code (0 complete, 1 halted, 2 error).

    ``resume`` names the tune's run id: its finished rounds are replayed from their records.
    ``extra_args`` are passed to every round's pytest session (``--bench-set`` etc.).
    """
    path = Path(path)
    try:
        config = load_benchmark(path, overrides)
        space = load_space(config, path)
        previous = _previous_tune(home, resume, config, space, strategy, path) if resume else None
    except ConfigError as exc:
        echo(str(exc))
        return 2
    strategy = strategy or (previous or {}).get("strategy")
    if strategy not in STRATEGIES:
        echo(f"tune: --strategy must be one of {', '.join(STRATEGIES)} (got {strategy!r}).")
        return 2
    tune_id = previous["run_id"] if previous else new_run_id(f"{config.name}-tune")
    folder = home / "runs" / tune_id
    lock = acquire_lock(folder / TUNE_LOCK, wait=False)
    if lock is None:
        echo(
            f"tune: --resume {tune_id}: that tune is running now (another process holds "
            f"{folder / TUNE_LOCK}); two processes would run every round twice. Fix: wait for "
            "it to end (benchmark-agent status), or stop it first."
        )
        return 2
    try:
        tuning = _TuneFile(path, config, space)
        return _tune(folder, tuning, home, strategy, previous, extra_args, echo)
    finally:
        release_lock(lock)


def _tune(
    folder: Path,
    tuning: _TuneFile,
    home: Path,
    strategy: str,
    previous: dict[str, Any] | None,
    extra_args: Sequence[str],
    echo: Callable[[str], None],
) -> int:
    """Run the tune whose folder is ``folder`` (its lock held), replaying ``previous``'s
    finished rounds; its exit code."""
    path, config, space = tuning.path, tuning.config, tuning.space
    tune_id = folder.name
    replay = _replay(home, previous, config) if previous else []
    runner = SubprocessRounds(path, home, folder / "rounds", extra_args)
    tuner = Tuner(space, config, config.tune, runner, tune_id=tune_id, replay=replay, echo=echo)
    recorder = TuneRecorder(
        home, tuner, config, path, strategy, started=previous.get("started") if previous else None
    )
    tuner.on_round = recorder.snapshot
    echo(
        f"tune {tune_id}: {strategy} over {', '.join(space.names)} for {space.direction} "
        f"{space.objective}" + (f" (resuming: {len(replay)} round(s) replayed)" if previous else "")
    )
    recorder.snapshot()
    previous_sigterm = signal.signal(signal.SIGTERM, _interrupt)
    try:
        tuner.run(strategy)
        state = "halted" if tuner.halt else "complete"
    except KeyboardInterrupt:
        state = "interrupted"
    except (RoundError, ResumeMismatch) as exc:
        recorder.failure = str(exc)
        echo(str(exc))
        state = "failed"
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
    document = recorder.finish(state)
    echo(f"tune {tune_id}: {state}; selected {selected_text(document)}; {chain_text(document)}")
    echo(f"record: {recorder.dir / 'results.yaml'}  report: {recorder.dir / 'report.md'}")
    return EXIT_CODES[state]


def tune_from_pytest(config: Any, home: Path, overrides: dict[str, Any]) -> int:
    """``pytest --bench-tune=STRATEGY FILE``: tune the one tuning file named on the line.

    The plugin passes the session's data home and parsed ``--bench-set`` overrides; the
    session's benchmark options (``--bench-set``, ``--bench-accept-risk``,
    ``--bench-isolation``) are passed on to every round.
    """
    files = [
        arg.split("::")[0] for arg in config.args if arg.split("::")[0].endswith((".yaml", ".yml"))
    ]
    if len(files) != 1:
        print(
            f"--bench-tune: name exactly one tuning file (got {files or 'none'}), e.g. "
            "pytest --bench --bench-tune=refine examples/seismic-heap-factor/bench.yaml"
        )
        return 4
    extra = [f"--bench-set={item}" for item in config.getoption("bench_set")]
    if config.getoption("bench_accept_risk"):
        extra.append("--bench-accept-risk")
    isolation = getattr(config.option, "bench_isolation", None)
    if isolation not in (None, "host"):
        extra.append(f"--bench-isolation={isolation}")
    path = config.invocation_params.dir / files[0]
    return run_tune(
        path, config.getoption("bench_tune"), home, overrides=overrides, extra_args=extra
    )


def _interrupt(signum: int, frame: Any) -> None:
    """SIGTERM stops a tune like Ctrl-C: the round's session is stopped, the record kept."""
    raise KeyboardInterrupt(f"signal {signum}")


def _previous_tune(
    home: Path,
    run_id: str,
    config: BenchmarkConfig,
    space: SearchSpace,
    strategy: str | None,
    path: Path,
) -> dict[str, Any]:
    """The record of the tune to resume, refused when it does not match this file."""
    record_path = home / "runs" / run_id / "results.yaml"
    if not record_path.is_file():
        raise ConfigError(
            path,
            [
                (
                    "--resume",
                    f"{run_id} has no tune record at {record_path}.",
                    "name a tune's run id (benchmark-agent history lists them).",
                )
            ],
        )
    previous = load_yaml(record_path) or {}
    if previous.get("kind") != "tune":
        raise ConfigError(
            path,
            [("--resume", f"{run_id} is a run, not a tune.", "name the run id of a tune record.")],
        )
    if strategy and previous.get("strategy") != strategy:
        raise ConfigError(
            path,
            [
                (
                    "--strategy",
                    f"is {strategy}, but tune {run_id} ran {previous.get('strategy')}.",
                    "resume with the same strategy, or start a new tune.",
                )
            ],
        )
    now = json.loads(json.dumps(redact.scrub(definition(config, space)), default=str))
    if previous.get("definition") != now:
        changed = sorted(k for k in now if (previous.get("definition") or {}).get(k) != now[k])
        raise ConfigError(
            path,
            [
                (
                    "",
                    f"tune {run_id} was recorded with a different "
                    f"{', '.join(changed)}, so its rounds cannot be replayed.",
                    "resume with the file (and --bench-set values) it ran with, "
                    "or start a new tune.",
                )
            ],
        )
    return previous


def _replay(
    home: Path, previous: dict[str, Any], config: BenchmarkConfig
) -> list[tuple[dict[str, Any], RunRecord]]:
    """The finished rounds of a previous attempt, in order, up to the first unfinished one; a
    round of several sessions pooled as it was judged."""
    out = []
    for summary in previous.get("rounds") or []:
        dirs = [home / "runs" / run_id for run_id in summary.get("run_ids") or [summary["run_id"]]]
        if summary.get("status") != "finished" or not all(
            (d / "results.yaml").is_file() for d in dirs
        ):
            break
        sessions = [RoundOutcome(d.name, load_run(d), 0.0) for d in dirs]
        out.append((summary, merged(sessions, config.max_replicates).record))
    return out
