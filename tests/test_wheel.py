"""An installed wheel carries every file the code reads: built from this checkout, installed in a
fresh virtualenv, its ``benchmark-agent`` plans from a packaged recipe (the CI example installs
the tool from a wheel, where a ``recipes/`` folder beside the package would be missing)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pytest_benchmark_agent.config.recipe import RECIPES_DIR, available_recipes

ROOT = Path(__file__).resolve().parents[1]


#: What a build of the checkout must not see: a stale ``build/`` would put files into the wheel
#: that the tree no longer has (setuptools copies into it and never empties it).
NOT_SOURCE = ("build", "dist", "*.egg-info", ".git", ".venv", "benchmark_data", "__pycache__")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip wheel`` builds (with the declared build backend) from a copy of this
    checkout's files: pip builds in the source folder, which leaves the checkout untouched."""
    source = tmp_path_factory.mktemp("source") / "tree"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE), symlinks=True)
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (found,) = out.glob("pytest_benchmark_agent-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A virtualenv with the wheel installed (its dependencies from the system's site-packages;
    ``--ignore-installed``, else a system-wide editable install would count as installed) and an
    environment that cannot reach the checkout: no PYTHONPATH, run outside the repo."""
    folder = tmp_path_factory.mktemp("venv")
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", str(folder)], check=True
    )
    install = subprocess.run(
        [
            folder / "bin" / "python",
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--ignore-installed",
            "-q",
            str(wheel),
        ],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{folder / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return folder, env


def _run(venv: tuple[Path, dict[str, str]], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    folder, env = venv
    return subprocess.run(
        [folder / "bin" / "benchmark-agent", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )


def test_the_wheel_lists_every_recipe():
    assert RECIPES_DIR.parent.name == "pytest_benchmark_agent"
    assert available_recipes(), "no recipe in the package's recipes/ folder"


def test_the_wheel_holds_the_recipes(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())
    for recipe in available_recipes():
        assert f"pytest_benchmark_agent/recipes/{recipe}.yaml" in names


def test_an_installed_wheel_plans_from_a_recipe(venv, tmp_path: Path):
    folder, env = venv
    where = subprocess.run(
        [folder / "bin" / "python", "-c", "import pytest_benchmark_agent as p; print(p.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(folder), f"the venv imported {where}, not the wheel's copy"
    result = _run(venv, tmp_path, "plan", "retrieval-index", "candidate lowers p50 latency")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "wrote retrieval-index/bench.yaml" in result.stdout
    assert (tmp_path / "retrieval-index" / "bench.yaml").is_file()


def test_an_installed_wheel_names_its_recipes_for_an_unknown_one(venv, tmp_path: Path):
    result = _run(venv, tmp_path, "domain", "mine", "--recipe", "no-such-recipe")
    assert result.returncode != 0
    assert "retrieval-index" in result.stdout + result.stderr
