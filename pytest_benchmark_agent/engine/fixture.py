"""The ``bench`` fixture: run a benchmark file or a Python Domain from an ordinary test.

Each call runs a real ``pytest --bench`` session in a subprocess (so every gate, cache, guard and
record applies exactly as on the command line, and the test's own session is untouched) and
returns the run's record, the :class:`~.records.record.RunRecord` every other reader of a run
gets (``load_run``), with how the session ended on ``record.session`` (a
:class:`~.records.record.SessionOutcome`: exit code and output)::

    def test_merge_is_faster(bench):
        result = bench.run("bench.yaml", params={"corpus.n_docs": 600}, replicates=3)
        assert result.counts == {"passed": 6}, result.session.output
        assert not result.verdict("p50_ms", "optimize").regressed

A verdict is a frozen :class:`~.stats.comparability.Verdict` (``improved``, ``regressed``,
``no_change``, ``not_comparable``, ``ratio``, ``interval``, ``p_holm``, ``reason``, ...);
``result.samples(metric)`` and ``result.stats(metric)`` give the values and their statistics
per treatment, ``result.trials`` the typed trials, ``result.dir`` the run folder.

The data directory is shared by every test of the session (``<basetemp>/bench_home``), so a
prep built by one test is reused by the next. A session that records no run (a gate-1 error,
exit code 2) raises :class:`BenchSessionError` with pytest's output; one still running at its
``timeout`` (by default the file's ``budget.wall_clock_s`` plus :data:`FINISH_GRACE_S`) is
stopped as Ctrl-C stops it, its records kept, and raises :class:`BenchTimeoutError`.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from pytest_benchmark_agent.config.safe_yaml import read_yaml_input
from pytest_benchmark_agent.engine.child import bench_command
from pytest_benchmark_agent.errors import BenchError, ConfigError
from pytest_benchmark_agent.records.record import RunRecord, SessionOutcome, load_run
from pytest_benchmark_agent.records.run import new_run_id
from pytest_benchmark_agent.util.safetext import NAME_MAX, one_line

#: Beyond a file's wall-clock budget, time for the session to start (collection, gate 1) and to
#: end its run (judging, the records and reports): a generous bound, not a measured figure.
FINISH_GRACE_S = 120.0
#: How long a session stopped at its timeout (SIGTERM, as Ctrl-C) may take to record its end
#: before it is killed; a run killed unfinished is finished by the next session or verb.
STOP_GRACE_S = 60.0


class BenchSessionError(BenchError):
    """A benchmark session that recorded no run; ``output`` is what pytest printed."""

    def __init__(self, message: str, output: str, exit_code: int):
        self.output = output
        self.exit_code = exit_code
        super().__init__(f"{message} (pytest exit code {exit_code}):\n{output[-4000:]}")


class BenchTimeoutError(BenchSessionError):
    """A benchmark session still running at its timeout, stopped; ``run_dir`` keeps what it
    recorded (a run stopped in time is ``interrupted``)."""

    def __init__(self, message: str, output: str, exit_code: int, run_dir: Path):
        self.run_dir = run_dir
        super().__init__(message, output, exit_code)


class BenchRunner:
    """What the ``bench`` fixture returns: runs sessions against one data directory."""

    def __init__(self, home: Path, base: Path, scratch: Path):
        self.home = home
        self.base = base  # relative benchmark paths resolve against the requesting test's folder
        self.scratch = scratch

    def run(
        self,
        source: str | Path | Mapping[str, Any],
        *,
        params: Mapping[str, Any] | None = None,
        args: Sequence[str] = (),
        timeout: float | None = None,
        **fields: Any,
    ) -> RunRecord:
        """Run a benchmark file (a path, or a whole benchmark document as a mapping).

        ``params`` override declared params (``--bench-set``); other keyword arguments replace
        top-level fields of the file (``replicates=3``, ``treatments=[...]``), which runs a
        temporary copy beside the original so its relative paths still hold; ``args`` go to
        pytest unchanged. ``timeout`` (seconds) bounds the session: by default the file's
        ``budget.wall_clock_s`` plus :data:`FINISH_GRACE_S`, none without that budget.
        """
        _check_timeout(timeout)
        if isinstance(source, Mapping):
            document = {**source, **fields}
            path = self.scratch / f"{_file_stem(document.get('name', 'bench'))}.bench.yaml"
            path.write_text(yaml.safe_dump(document, sort_keys=False))
            return self._session(path, params, args, {}, timeout)
        path = Path(source)
        path = path if path.is_absolute() else (self.base / path).resolve()
        if not path.exists():
            raise FileNotFoundError(f"bench.run: no benchmark file {path}")
        return self._session(path, params, args, fields, timeout)

    def run_domain(
        self,
        domain: str | type,
        *,
        params: Mapping[str, Any],
        treatment_variable: str | None = None,
        treatments: Sequence[Any] | None = None,
        args: Sequence[str] = (),
        timeout: float | None = None,
        **fields: Any,
    ) -> RunRecord:
        """Run a Python Domain (its registered name, or the class itself) with every param
        in ``params``; other keyword arguments are top-level fields (``replicates=2``).
        Without ``treatment_variable`` and ``treatments`` it measures one configuration (the
        treatment ``default``); ``timeout`` as for :meth:`run`."""
        if isinstance(domain, type):
            import inspect

            domain = f"{Path(inspect.getfile(domain)).resolve()}:{domain.__qualname__}"
        document = {
            "domain": domain,
            "name": fields.pop("name", "domain-bench"),
            "params": dict(params),
            **fields,
        }
        if treatment_variable is not None:
            document["treatment_variable"] = treatment_variable
        if treatments is not None:
            document["treatments"] = list(treatments)
        return self.run(document, args=args, timeout=timeout)

    def _session(
        self,
        path: Path,
        overrides: Mapping[str, Any] | None,
        args: Sequence[str],
        fields: Mapping[str, Any],
        timeout: float | None,
    ) -> RunRecord:
        copy = None
        if fields:
            document = _mapping(path)
            document.update(fields)
            copy = path.with_name(f".{path.stem}.{os.getpid()}-{id(fields):x}.tmp.yaml")
            copy.write_text(yaml.safe_dump(document, sort_keys=False))
        target = copy or path
        try:
            document = _mapping(target)
            name = document.get("name") or path.stem
            run_id = new_run_id(str(name))
            timeout = timeout if timeout is not None else default_timeout(document)
            sets = [f"--bench-set={k}={_yaml_text(v)}" for k, v in (overrides or {}).items()]
            options = ["-p", "no:cacheprovider", "-q", *sets, *args]
            command = bench_command([target], self.home, run_id=run_id, options=options)
            code, output, timed_out = _run_session(command, target.parent, timeout)
        finally:
            if copy is not None:
                copy.unlink(missing_ok=True)
        run_dir = self.home / "runs" / run_id
        if timed_out:
            raise BenchTimeoutError(
                f"benchmark session of {path} was still running at its timeout of {timeout:g}s "
                f"and was stopped; what it recorded is in {run_dir}. Raise bench.run's "
                "timeout=, or the file's budget.wall_clock_s it defaults from",
                output,
                code,
                run_dir,
            )
        if not (run_dir / "results.yaml").is_file():
            raise BenchSessionError(f"benchmark session of {path} recorded no run", output, code)
        return load_run(run_dir).replace(session=SessionOutcome(code, output))


def _run_session(command: list[str], cwd: Path, timeout: float | None) -> tuple[int, str, bool]:
    """Run the child session; (exit code, its output, whether it ran past ``timeout``). One
    past it is stopped with SIGTERM (as Ctrl-C: stages stopped, the run recorded
    ``interrupted``), killed if it is still running :data:`STOP_GRACE_S` later."""
    child = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = child.communicate(timeout=timeout)
        return child.returncode, out + err, False
    except subprocess.TimeoutExpired:
        child.terminate()
        try:
            out, err = child.communicate(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
        return child.returncode, out + err, True
    finally:
        if child.poll() is None:  # an exception of this process's own (KeyboardInterrupt)
            child.kill()
            child.wait()


def default_timeout(document: Mapping[str, Any]) -> float | None:
    """The default timeout: ``budget.wall_clock_s`` plus :data:`FINISH_GRACE_S`; None when the
    file sets none (a value gate 1 refuses is left for the session to refuse)."""
    budget = document.get("budget")
    wall_clock = budget.get("wall_clock_s") if isinstance(budget, Mapping) else None
    if isinstance(wall_clock, bool) or not isinstance(wall_clock, int | float):
        return None
    return wall_clock + FINISH_GRACE_S if math.isfinite(wall_clock) and wall_clock > 0 else None


def _check_timeout(timeout: Any) -> None:
    """Refuse a timeout that is not a positive number of seconds, before any session starts."""
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigError(
            "bench.run",
            [
                (
                    "timeout",
                    f"{one_line(repr(timeout), 60)} is not a positive number of seconds.",
                    "give seconds, e.g. timeout=600, or leave it out to use the file's "
                    "budget.wall_clock_s.",
                )
            ],
        )


def _mapping(path: Path) -> dict[str, Any]:
    """A benchmark file read as the session reads it (:func:`~.config.safe_yaml.read_yaml_input`:
    a regular file only, duplicate keys and alias bombs refused); a file that is not a mapping
    is left for the session to refuse."""
    document = read_yaml_input(path)
    return document if isinstance(document, dict) else {}


def _file_stem(name: Any) -> str:
    """The scratch file name of a benchmark document named ``name``: refused as gate 1 refuses
    the name (one line of at most :data:`NAME_MAX` characters) before anything is written, and
    reduced to a plain file name, so no name can place the file outside the scratch folder."""
    if not isinstance(name, str):
        return "bench"  # the session refuses a name that is not text
    if not 0 < len(name) <= NAME_MAX or one_line(name) != name:
        raise ConfigError(
            "bench.run",
            [
                (
                    "name",
                    f"{one_line(name, 60)!r} must be one line of 1 to {NAME_MAX} characters "
                    f"(it is {len(name)}; it names the runs' folders).",
                    "give a short name, e.g. name: fts5-merge.",
                )
            ],
        )
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "bench"


def _yaml_text(value: Any) -> str:
    """A value as ``--bench-set`` reads it back (YAML): ``2000``, ``none``, ``[1, 2]``."""
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("\n...").strip()
