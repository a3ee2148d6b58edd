"""Where the data lives: ``$BENCHMARK_HOME``'s default, one rule for the plugin and the CLI.

A relative default under the current folder made a second ``benchmark_data/`` in every subfolder
a session ran from, so the default is anchored at the project root instead: the nearest folder
upward holding one of :data:`PROJECT_MARKERS` (under pytest, pytest's own rootdir when it found
a configuration file), else the current folder.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The data home's folder name under the project root when neither option nor variable names one.
DEFAULT_FOLDER = "benchmark_data"
#: What marks a project's root (as pytest's rootdir search and git see it).
PROJECT_MARKERS = ("pyproject.toml", "setup.cfg", "pytest.ini", "tox.ini", ".git")


def project_root(start: Path) -> Path | None:
    """The nearest folder from ``start`` upward holding a project marker, or None."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if any((folder / marker).exists() for marker in PROJECT_MARKERS):
            return folder
    return None


def data_home(given: str | None, cwd: Path, rootdir: Path | None = None) -> tuple[Path, str]:
    """The data home and how it was chosen (for the terminal line naming it).

    ``given`` (``--home`` / ``--bench-home``) wins, then ``$BENCHMARK_HOME`` (relative to
    ``cwd``), then ``benchmark_data/`` in ``rootdir`` (pytest's, when it found its configuration),
    the project root above ``cwd``, or ``cwd`` itself.
    """
    if given:
        return (cwd / given).resolve(), "given on the command line"
    env = os.environ.get("BENCHMARK_HOME")
    if env:
        return (cwd / env).resolve(), "from $BENCHMARK_HOME"
    if rootdir is not None:
        return (rootdir / DEFAULT_FOLDER).resolve(), "default: in pytest's rootdir"
    root = project_root(cwd)
    if root is not None:
        return root / DEFAULT_FOLDER, "default: in the project root"
    return cwd.resolve() / DEFAULT_FOLDER, "default: in the current folder (no project root above)"
