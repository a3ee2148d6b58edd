"""Fixtures of the hostile tests (issue 19); their invariants are in hostilehelpers.py."""

from __future__ import annotations

import pytest
from benchhelpers import BenchProject
from hostilehelpers import tiny_bench


@pytest.fixture
def bench_folder(project: BenchProject) -> BenchProject:
    """A real benchmark folder holding ``bench.yaml`` (:func:`tiny_bench`), not yet run."""
    project.bench(tiny_bench())
    return project
