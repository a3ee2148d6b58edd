"""Shared fixtures of the test suite."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from benchhelpers import BenchProject
from nvml_double import FakeNvml

from pytest_benchmark_agent.guards import gpu as nvml

pytest_plugins = ["pytester"]

# A suite started in the background by a script (`pytest &`, `nohup`) inherits SIGINT ignored,
# and so would every session a test starts (an ignored signal stays ignored across exec): the
# tests that interrupt a session as Ctrl-C does could not. Handled here, it is reset to the
# default in each child, as a terminal would start it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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


@pytest.fixture
def no_gpu() -> Iterator[None]:
    """NVML answering that there is no GPU, whatever this machine has: fingerprints and
    guards read the same on every host."""
    with nvml.use_backend(FakeNvml(absent=True)):
        yield
