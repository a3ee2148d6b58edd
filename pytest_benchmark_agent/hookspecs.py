"""Hooks other plugins (or a ``conftest.py``) implement to follow a benchmark run.

The engine's own records and reports are written by implementations of these same hooks
(``record.RecordWriter`` and ``report.ReportWriter``), so exporting a run elsewhere (MLflow, a
database, a dashboard) is one ``hookimpl`` away and sees exactly what the records see.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_benchmark_agent.records.run import BenchRun


@pytest.hookspec
def pytest_bench_run_started(run: BenchRun) -> None:
    """A run is about to execute its first trial; ``run.dir`` exists and the plan is final."""


@pytest.hookspec
def pytest_bench_stage_started(run: BenchRun, stage: str, trial_id: str | None) -> None:
    """A stage's command is about to start (``trial_id`` is None for a prep being built)."""


@pytest.hookspec
def pytest_bench_stage_progress(
    run: BenchRun, stage: str, trial_id: str | None, elapsed_s: float, peak_rss_mb: float
) -> None:
    """A long stage is still running: called at least once a minute while it runs."""


@pytest.hookspec
def pytest_bench_trial_finished(trial: dict[str, Any], run: BenchRun) -> None:
    """A trial ended (passed, failed, guarded, non-comparable or interrupted).

    ``trial`` is the record as it appears under ``trials:`` in ``results.yaml``.
    """


@pytest.hookspec
def pytest_bench_run_finished(run: BenchRun) -> None:
    """A run ended: its summary and state are final; ``run.results()`` is the whole record."""
