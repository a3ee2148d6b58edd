"""Helpers of the gate-2 tests: a deterministic benchmark whose code, data and results can be
changed separately, named runs, and the modules pytester would otherwise unload."""

from __future__ import annotations

import contextlib
import io

import pytest
from benchhelpers import BenchProject
from support.records import scored_config

from pytest_benchmark_agent.records.reader import load_results


@pytest.fixture(scope="module", autouse=True)
def lazy_imports_done_outside_runs() -> None:
    """pytester's in-process runs unload every module first imported inside them, and scipy
    (Mann-Whitney's helpers) and matplotlib (its extension modules) import parts of themselves
    on first use that cannot be imported twice in a process: use both once, outside any run."""
    from scipy import stats

    stats.mannwhitneyu([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
    with contextlib.suppress(ImportError):
        from matplotlib.figure import Figure

        Figure().savefig(io.BytesIO(), format="png")


def scored(project: BenchProject, a: int = 2, b: int = 3, **overrides) -> None:
    """``score = data/<mode>.txt x size``: the code under test is ``code/``, the data lives
    outside it, so changing the data changes the result and not the fingerprint."""
    project.write("code/measure.sh", 'read v < "data/$1.txt"; echo score=$(( v * $2 ))\n')
    project.write("data/a.txt", f"{a}\n")
    project.write("data/b.txt", f"{b}\n")
    project.write("data/c.txt", f"{b}\n")
    document = scored_config(**overrides)
    project.bench(document)


def run_as(project: BenchProject, run_id: str, *args: str) -> dict:
    """A run named ``run_id`` that must pass; its record."""
    result = project.run("--bench-run-id", run_id, *args)
    assert result.ret == 0, result.stdout.str()
    return load_results(project.home / "runs" / run_id)
