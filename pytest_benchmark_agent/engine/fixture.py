"""The ``bench`` fixture: run a benchmark file or a Python Domain from an ordinary test.

Each call runs a real ``pytest --bench`` session in a subprocess (so every gate, cache, guard and
record applies exactly as on the command line, and the test's own session is untouched) and
returns a :class:`BenchResult` with the run's samples, statistics and verdicts::

    def test_merge_is_faster(bench):
        result = bench.run("bench.yaml", params={"corpus.n_docs": 600}, replicates=3)
        assert result.counts == {"passed": 6}
        assert result.verdict("p50_ms", "optimize")["verdict"] != "regressed"

The data directory is shared by every test of the session (``<basetemp>/bench_home``), so a
prep built by one test is reused by the next. A session that records no run (a gate-1 error,
exit code 2) raises :class:`BenchSessionError` with pytest's output.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pytest_benchmark_agent.config.models import read_yaml_input
from pytest_benchmark_agent.config.placeholders import as_text
from pytest_benchmark_agent.errors import BenchError, ConfigError
from pytest_benchmark_agent.records.run import new_run_id
from pytest_benchmark_agent.records.safetext import NAME_MAX, one_line
from pytest_benchmark_agent.records.writer import load_results


class BenchSessionError(BenchError):
    """A benchmark session that recorded no run; ``output`` is what pytest printed."""

    def __init__(self, message: str, output: str, exit_code: int):
        self.output = output
        self.exit_code = exit_code
        super().__init__(f"{message} (pytest exit code {exit_code}):\n{output[-4000:]}")


@dataclass
class BenchResult:
    """One recorded run: the record of ``results.yaml`` plus how the session ended."""

    exit_code: int
    output: str
    run_dir: Path
    record: dict[str, Any]

    @property
    def tag(self) -> str:
        return self.record.get("tag", "")

    @property
    def state(self) -> str:
        return self.record.get("state", "")

    @property
    def trials(self) -> list[dict[str, Any]]:
        return self.record.get("trials") or []

    @property
    def counts(self) -> dict[str, int]:
        """Trials per status, e.g. ``{"passed": 10}``."""
        counts: dict[str, int] = {}
        for trial in self.trials:
            counts[trial["status"]] = counts.get(trial["status"], 0) + 1
        return counts

    def samples(self, metric: str) -> dict[str, list[float]]:
        """Treatment -> the metric's values over the passed trials, in execution order."""
        table: dict[str, list[float]] = {t: [] for t in self.record.get("treatments") or []}
        for trial in self.trials:
            if trial["status"] == "passed" and metric in trial["metrics"]:
                table.setdefault(trial["treatment"], []).append(trial["metrics"][metric])
        return table

    def stats(self, metric: str) -> dict[str, dict[str, Any]]:
        """Treatment -> descriptive statistics of the metric (n, median, mean, cv, ...)."""
        return (self.record.get("summary") or {}).get(metric, {})

    @property
    def treatments(self) -> list[str]:
        """The run's treatment labels as declared, each as its command line shows it (``9``,
        ``true``)."""
        return [str(t) for t in self.record.get("treatments") or []]

    @property
    def verdicts(self) -> dict[str, dict[str, Any]]:
        """Metric -> non-control treatment -> gate 2's verdict record."""
        return self.record.get("verdicts") or {}

    def verdict(self, metric: str, treatment: Any) -> dict[str, Any]:
        """Gate 2's verdict on ``metric`` for ``treatment`` against the control (a run of one
        configuration has none: it is compared with other runs only). ``treatment`` is its
        value as the file wrote it (``9``, ``"9"``, ``True``) or its label."""
        label = as_text(treatment)
        if metric not in self.verdicts:
            raise KeyError(
                f"no verdict on {metric!r} for treatment {treatment!r} in {self.run_dir}: "
                f"verdicts cover the metrics {sorted(self.verdicts)}"
            )
        try:
            return self.verdicts[metric][label]
        except KeyError:
            judged = list(self.verdicts[metric])
            raise KeyError(
                f"no verdict on {metric!r} for treatment {treatment!r} in {self.run_dir}: "
                f"the run's treatments are {self.treatments} (control "
                f"{self.record.get('control')!r}, which has no verdict of its own); "
                f"judged: {judged}"
            ) from None


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
        **fields: Any,
    ) -> BenchResult:
        """Run a benchmark file (a path, or a whole benchmark document as a mapping).

        ``params`` override declared params (``--bench-set``); other keyword arguments replace
        top-level fields of the file (``replicates=3``, ``treatments=[...]``), which runs a
        temporary copy beside the original so its relative paths still hold; ``args`` go to
        pytest unchanged.
        """
        if isinstance(source, Mapping):
            document = {**source, **fields}
            path = self.scratch / f"{_file_stem(document.get('name', 'bench'))}.bench.yaml"
            path.write_text(yaml.safe_dump(document, sort_keys=False))
            return self._session(path, params, args, {})
        path = Path(source)
        path = path if path.is_absolute() else (self.base / path).resolve()
        if not path.exists():
            raise FileNotFoundError(f"bench.run: no benchmark file {path}")
        return self._session(path, params, args, fields)

    def run_domain(
        self,
        domain: str | type,
        *,
        params: Mapping[str, Any],
        treatment_variable: str | None = None,
        treatments: Sequence[Any] | None = None,
        args: Sequence[str] = (),
        **fields: Any,
    ) -> BenchResult:
        """Run a Python Domain (its registered name, or the class itself) with every param
        in ``params``; other keyword arguments are top-level fields (``replicates=2``).
        Without ``treatment_variable`` and ``treatments`` it measures one configuration (the
        treatment ``default``)."""
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
        return self.run(document, args=args)

    def _session(
        self,
        path: Path,
        overrides: Mapping[str, Any] | None,
        args: Sequence[str],
        fields: Mapping[str, Any],
    ) -> BenchResult:
        copy = None
        if fields:
            document = _mapping(path)
            document.update(fields)
            copy = path.with_name(f".{path.stem}.{os.getpid()}-{id(fields):x}.tmp.yaml")
            copy.write_text(yaml.safe_dump(document, sort_keys=False))
        target = copy or path
        try:
            name = _mapping(target).get("name") or path.stem
            run_id = new_run_id(str(name))
            command = [
                sys.executable,
                "-m",
                "pytest",
                "--bench",
                str(target),
                "--bench-home",
                str(self.home),
                "--bench-run-id",
                run_id,
                "-p",
                "no:cacheprovider",
                "-q",
                *[f"--bench-set={k}={_yaml_text(v)}" for k, v in (overrides or {}).items()],
                *args,
            ]
            done = subprocess.run(command, cwd=target.parent, capture_output=True, text=True)
        finally:
            if copy is not None:
                copy.unlink(missing_ok=True)
        output = done.stdout + done.stderr
        run_dir = self.home / "runs" / run_id
        if not (run_dir / "results.yaml").is_file():
            raise BenchSessionError(
                f"benchmark session of {path} recorded no run", output, done.returncode
            )
        return BenchResult(done.returncode, output, run_dir, load_results(run_dir))


def _mapping(path: Path) -> dict[str, Any]:
    """A benchmark file read as the session reads it (:func:`~.config.models.read_yaml_input`:
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
