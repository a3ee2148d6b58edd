"""benchmarks/per_trial.py: one real session's cycle per trial for the code of a folder, and
the benchmark file a bisection of this project runs. Only shapes are checked: the figure is
speed and belongs to the script's output."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from pytest_benchmark_agent.config.models import load_config

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "per_trial.py"


def per_trial(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_it_prints_the_cycle_and_where_the_plugin_came_from(tmp_path: Path) -> None:
    done = per_trial("--trials", "4", "--code", str(ROOT), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^per_trial_ms=\d+\.\d{4}$", done.stdout, re.M), done.stdout
    origin = re.search(r"^BENCH_CODE_FROM (.+)$", done.stdout, re.M)
    assert origin is not None and Path(origin.group(1)).is_relative_to(ROOT)


def test_the_plugin_is_imported_from_the_code_folder_and_a_broken_one_fails_by_name(
    tmp_path: Path,
) -> None:
    """Hostile: a folder whose copy of the plugin cannot load. The session must import that
    copy (it is the code measured), so the script fails saying so, with no figure."""
    package = tmp_path / "code" / "pytest_benchmark_agent"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('this checkout is broken')\n")
    done = per_trial("--trials", "2", "--code", str(tmp_path / "code"), cwd=tmp_path)
    assert done.returncode != 0
    assert "per_trial:" in done.stderr and "this checkout is broken" in done.stderr
    assert "per_trial_ms=" not in done.stdout


def test_an_odd_or_too_small_number_of_trials_is_refused_naming_the_fix(tmp_path: Path) -> None:
    for trials in ("5", "0"):
        done = per_trial("--trials", trials, cwd=tmp_path)
        assert done.returncode == 2
        assert f"--trials {trials}: give an even number, at least 2" in done.stderr


def test_the_bench_file_it_writes_passes_gate_1_and_runs_this_script(tmp_path: Path) -> None:
    target = tmp_path / "per trial.yaml"
    done = per_trial("--write-bench", str(target), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    config = load_config(target)
    (stage,) = config.stages
    assert shlex.split(stage.cmd) == [sys.executable, str(SCRIPT), "--code", "."]
    assert config.metrics["per_trial_ms"].primary
    assert yaml.safe_load(target.read_text())["name"] == "per-trial-cost"
