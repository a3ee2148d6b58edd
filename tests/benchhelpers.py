"""Helpers for the engine tests: benchmark files in a temporary folder, real pytest runs."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml


class BenchProject:
    """A temporary folder holding benchmark files, run with a real ``pytest --bench``."""

    def __init__(self, pytester: pytest.Pytester):
        self.pytester = pytester
        self.path = Path(pytester.path)
        self.home = self.path / "benchmark_data"

    def write(self, name: str, text: str) -> Path:
        path = self.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    def bench(self, document: dict, name: str = "bench.yaml") -> Path:
        return self.write(name, yaml.safe_dump(document, sort_keys=False))

    def run(self, *args: str, subprocess: bool = False) -> pytest.RunResult:
        runner = (
            self.pytester.runpytest_subprocess if subprocess else self.pytester.runpytest_inprocess
        )
        return runner("--bench", "-p", "no:cacheprovider", "-p", "no:randomly", *args)

    def runs(self) -> list[Path]:
        from pytest_benchmark_agent.records.store import run_order

        folder = self.home / "runs"
        return sorted(folder.iterdir(), key=run_order) if folder.exists() else []

    def results(self, index: int = -1) -> dict:
        from pytest_benchmark_agent.records.reader import load_results

        return load_results(self.runs()[index])


def host_owns_extension_modules() -> None:
    """Import, in this test process, the compiled modules a session loads (numpy through the
    statistics, matplotlib for the plots). An in-process pytester run drops from
    ``sys.modules`` every module first imported during it, and numpy's C core cannot load
    twice in a process: the next in-process session importing it failed with "cannot load
    module more than once per process" (``pytest -m happy`` alone, where no earlier test had
    imported them in the host). pytester takes its snapshot when its fixture is made, so this
    runs when the helpers are imported, before any."""
    import pytest_benchmark_agent.stats.analysis  # noqa: F401  (numpy)

    try:
        import matplotlib.collections  # noqa: F401  (what report/plots.py imports)
        import matplotlib.figure  # noqa: F401
    except ImportError:
        pass


host_owns_extension_modules()


def simple_bench(**overrides) -> dict:
    """A small two-treatment benchmark: a prep writing an artifact, a measure reading it."""
    document = {
        "name": "simple",
        "hypothesis": "mode b is no different from mode a",
        "params": {"mode": "a", "size": 3},
        "treatment_variable": "mode",
        "treatments": ["a", "b"],
        "replicates": 2,
        "stages": [
            {
                "name": "build",
                "kind": "prep",
                "cmd": "echo {size} > {data}; echo built >> prep_runs.txt",
                "produces": ["data"],
            },
            {
                "name": "measure",
                "kind": "measure",
                "needs": ["build"],
                "cmd": "cat {data} > /dev/null; echo score=$(( {size} * 2 )); echo mode={mode}",
                "metrics_from": {"stdout": True, "fields": ["score"]},
            },
        ],
        "metrics": {"score": {"direction": "higher", "primary": True}},
    }
    document.update(overrides)
    return document


def git(repo: Path, *args: str) -> str:
    """``git -C repo ARGS`` with a throwaway identity and no signing; its stdout, stripped."""
    return subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "-c",
            "commit.gpgsign=false",
            *args,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def screenshot_rgb(page: Path, folder: Path, size: str) -> Any:
    """``page`` as headless Chromium draws it at ``size`` (``WIDTHxHEIGHT``), as an array of
    0-255 RGB pixels; the PNG is ``folder/shot.png``. Skips, saying so, without Chromium."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    shot = folder / "shot.png"
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={folder / 'profile'}",
            f"--window-size={size.replace('x', ',')}",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.is_file(), done.stderr[-2000:]
    import matplotlib.image

    return (matplotlib.image.imread(shot)[..., :3] * 255).round()
