"""The per-revision install recipe that the editable-install refusal prescribes (issue 44, 5).

Run for real: a git repository whose package is a setuptools project at its root, a prep
stage that is :data:`revisions.INSTALL_RECIPE` word for word, two revisions measured in one
session with ``--bench-against``. Each side imports its own commit's code from its own
environment, and the user's working tree is left as it was: pip builds a setuptools project in
its source folder, and the recipe hands it a copy of the commit, so no ``build/`` or
``*.egg-info`` appears in the tree, and a stale ``build/`` already there (newer than the
sources, which setuptools would reuse) never reaches the environment. Two real venv builds
take about a minute on a loaded machine: ``slow``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from test_bench_against import Repo

from pytest_benchmark_agent.engine import revisions

pytestmark = pytest.mark.slow

PYPROJECT = """\
[project]
name = "demo-pkg"
version = "0.1"
[tool.setuptools]
packages = ["demo_pkg"]
[build-system]
requires = ["setuptools>=68", "wheel"]
build-backend = "setuptools.build_meta"
"""
MEASURE = """\
import demo_pkg
print("BENCH_CODE_FROM", demo_pkg.__file__)
print(f"value={demo_pkg.VALUE}")
"""


def recipe_prep() -> dict:
    """The prep stage the refusal message prescribes, read back from the message itself."""
    found = re.fullmatch(r"\(cmd: (.*); produces: \[(\w+)\]\)", revisions.INSTALL_RECIPE)
    assert found, revisions.INSTALL_RECIPE
    return {"name": "env", "kind": "prep", "cmd": found[1], "produces": [found[2]]}


def bench_file() -> dict:
    return {
        "name": "demo-value",
        "hypothesis": "this commit does not raise demo_pkg.VALUE",
        "replicates": 3,
        "stages": [
            recipe_prep(),
            {
                "name": "measure",
                "kind": "measure",
                "needs": ["env"],
                "cmd": "{env}/bin/python tools/measure.py",  # not beside demo_pkg/
                "metrics_from": {"stdout": True, "fields": ["value"]},
            },
        ],
        "metrics": {"value": {"direction": "lower", "primary": True}},
    }


def untracked(repo: Path) -> set[str]:
    done = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--ignored", "--untracked-files=all"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {line[3:] for line in done.stdout.splitlines()}


def test_the_refusals_recipe_installs_each_revision_and_leaves_the_tree_clean(
    tmp_path: Path,
) -> None:
    repo = Repo(tmp_path)
    old = repo.commit(
        "a package and its benchmark",
        **{
            "pyproject.toml": PYPROJECT,
            "demo_pkg/__init__.py": "VALUE = 1\n",
            "tools/measure.py": MEASURE,
            "bench.yaml": yaml.safe_dump(bench_file(), sort_keys=False),
        },
    )
    new = repo.commit("a larger value", **{"demo_pkg/__init__.py": "VALUE = 2\n"})
    # Hostile: a stale build newer than the sources, and a stray untracked module.
    stale = repo.path / "build" / "lib" / "demo_pkg" / "__init__.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("VALUE = 99\n")
    stray = repo.path / "demo_pkg" / "stray.py"
    stray.write_text("raise SystemExit('an untracked file reached the environment')\n")
    before = untracked(repo.path)
    done = repo.bench("--bench-against", "HEAD~1")
    assert done.returncode == 0, done.stdout + done.stderr
    results = repo.record()
    assert sorted(p["action"] for p in results["preps"]) == ["built", "built"]
    values = {old[:12]: 1.0, new[:12]: 2.0}
    for trial in results["trials"]:
        assert trial["status"] == "passed", trial
        assert trial["metrics"]["value"] == values[trial["treatment"]]  # its own commit's code
        (where,) = trial["code_from"]
        assert where.startswith(str(repo.home / "cache")), where
    assert untracked(repo.path) == before  # no build/ or *.egg-info added to the working tree
    assert not list(repo.path.glob("*.egg-info"))
    assert stale.read_text() == "VALUE = 99\n"
