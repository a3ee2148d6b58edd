"""Shared fixtures of the test suite."""

from __future__ import annotations

import pytest
from benchhelpers import BenchProject

pytest_plugins = ["pytester"]


@pytest.fixture
def project(pytester: pytest.Pytester) -> BenchProject:
    """A temporary benchmark folder, run with real ``pytest --bench`` sessions."""
    return BenchProject(pytester)
