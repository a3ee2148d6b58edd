"""``$BENCHMARK_HOME``'s default: ``benchmark_data/`` at the project root (the nearest folder
upward holding a project marker), not in whichever subfolder a session ran from; the terminal
names the home used."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from benchhelpers import BenchProject, simple_bench

from pytest_benchmark_agent.home import PROJECT_MARKERS, data_home


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BENCHMARK_HOME", raising=False)


@pytest.mark.parametrize("marker", PROJECT_MARKERS)
def test_the_default_is_at_the_nearest_project_root(
    tmp_path: Path, marker: str, no_env: None
) -> None:
    root = tmp_path / "project"
    (root / "a" / "b").mkdir(parents=True)
    (root / marker).mkdir() if marker == ".git" else (root / marker).write_text("")
    home, how = data_home(None, root / "a" / "b")
    assert home == (root / "benchmark_data").resolve()
    assert how == "default: in the project root"


def test_given_and_variable_win_and_pytest_rootdir_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_env: None
) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    sub = tmp_path / "sub"
    sub.mkdir()
    assert data_home("mine", sub)[0] == sub / "mine"
    assert data_home(None, sub, rootdir=tmp_path / "r")[0] == tmp_path / "r" / "benchmark_data"
    monkeypatch.setenv("BENCHMARK_HOME", "elsewhere")
    assert data_home(None, sub) == (sub / "elsewhere", "from $BENCHMARK_HOME")


def test_without_a_project_root_it_is_the_current_folder(tmp_path: Path, no_env: None) -> None:
    home, how = data_home(None, tmp_path)
    if how == "default: in the project root":  # a marker above the temporary folder
        pytest.skip(f"{tmp_path} lies inside a project")
    assert home == tmp_path.resolve() / "benchmark_data"


def test_a_verb_run_from_a_subfolder_uses_and_names_the_project_root_home(
    tmp_path: Path,
) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    sub = tmp_path / "deep" / "er"
    sub.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "BENCHMARK_HOME"}
    done = subprocess.run(
        ["benchmark-agent", "history"],
        cwd=sub,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert f"data home {tmp_path / 'benchmark_data'} (default: in the project root)" in done.stderr
    assert not (sub / "benchmark_data").exists()


def test_a_session_names_its_data_home(project: BenchProject) -> None:
    project.bench(simple_bench())
    result = project.run("--collect-only")
    assert f"benchmark data home: {project.home}" in result.stdout.str()
