"""Shared fixtures of the test suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from benchhelpers import BenchProject

pytest_plugins = ["pytester"]


@pytest.fixture(scope="session", autouse=True)
def matplotlib_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One matplotlib cache for the whole suite, outside every test's project folder: pytester
    gives each session a fresh ``HOME``, where matplotlib would rebuild its font list (and write
    it beside the benchmark, which the hostile tests rightly count as written outside the home)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MPLCONFIGDIR", str(tmp_path_factory.mktemp("matplotlib")))
        yield


@pytest.fixture
def project(pytester: pytest.Pytester) -> BenchProject:
    """A temporary benchmark folder, run with real ``pytest --bench`` sessions."""
    return BenchProject(pytester)
