"""Hooks other plugins (or a ``conftest.py``) implement to follow a benchmark run.

The engine's own records and reports are written by implementations of these same hooks
(``records.writer.RecordWriter`` and ``report.markdown.ReportWriter``), so exporting a run
elsewhere (MLflow, a database, a dashboard) is one ``hookimpl`` away and sees exactly what the
records see. Every hook gets frozen values: the run as a :class:`.RunRecord` (the run as it
stands, ``BenchRun.record()``), a trial as a :class:`.TrialRecord`, a warm-up round as a
read-only mapping (:class:`.FrozenDict`). No implementation can change a trial, a verdict or a
caveat that another one, or gate 2, reads after it; what a plugin adds to a run it returns
from :func:`pytest_bench_run_caveats`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pytest_benchmark_agent.records.record import RunRecord
    from pytest_benchmark_agent.records.schema import TrialRecord


@pytest.hookspec
def pytest_bench_run_started(run: RunRecord) -> None:
    """A run is about to execute its first trial; ``run.dir`` exists and the plan is final."""


@pytest.hookspec
def pytest_bench_stage_started(run: RunRecord, stage: str, trial_id: str | None) -> None:
    """A stage's command is about to start (``trial_id`` is None for a prep being built)."""


@pytest.hookspec
def pytest_bench_stage_progress(
    run: RunRecord, stage: str, trial_id: str | None, elapsed_s: float, peak_rss_mb: float
) -> None:
    """A long stage is still running: called at least once a minute while it runs."""


@pytest.hookspec
def pytest_bench_trial_finished(trial: TrialRecord, run: RunRecord) -> None:
    """A trial ended (passed, failed, guarded, non-comparable or interrupted).

    ``trial`` is the record as it appears under ``trials:`` in ``results.yaml``; ``run``
    already holds it (its last trial).
    """


@pytest.hookspec
def pytest_bench_warmup_finished(warmup: Mapping[str, Any], run: RunRecord) -> None:
    """An untimed warm-up round of a measure stage ended (``warmup:``, ``--bench-warmup``).

    ``warmup`` is the record as it appears under ``warmups:`` in ``results.yaml``, a read-only
    mapping; it is never a trial and never in a verdict.
    """


@pytest.hookspec
def pytest_bench_run_finished(run: RunRecord) -> None:
    """A run ended: ``run`` is the whole, final record (its state, summary and verdicts), the
    one the record writer writes to ``results.yaml``."""


@pytest.hookspec
def pytest_bench_run_caveats(run: RunRecord) -> list[str] | None:
    """Caveats this plugin attaches to the run: asked when the run starts and again before it
    is judged. They are recorded with the engine's own, shown in the report, and keep a
    reproduced run from RELIABLE (QUALIFIED), so return only what limits the run's evidence."""
