"""Class 3 of issue 19, special files: a FIFO, a socket or a link to ``/dev/zero`` wherever the
engine reads a user's file (the code fingerprint, a stage's ``inputs:``, the benchmark file, a
recipe, a metrics file, the records) is never read: it hangs nothing, counts by its name and
type where a hash needs it, and is a clear error where its content is needed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from benchhelpers import BenchProject
from hostilehelpers import (
    agent,
    assert_clean_exit,
    assert_nothing_outside,
    assert_trials_on_disk,
    snapshot,
    tiny_bench,
)

from pytest_benchmark_agent.config.models import load_config
from pytest_benchmark_agent.config.recipe import load_recipe
from pytest_benchmark_agent.config.safe_yaml import MAX_INPUT_BYTES
from pytest_benchmark_agent.engine.plan import content_hash
from pytest_benchmark_agent.errors import ConfigError


def session(project: BenchProject, *args: str) -> subprocess.CompletedProcess[str]:
    """A real session with a deadline: a hang fails the test instead of stalling the suite."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--bench", "-p", "no:cacheprovider", "-p", "no:randomly"]
        + ["--bench-home", str(project.home), *args],
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def plant(folder: Path) -> list[Path]:
    """A FIFO, a socket and links to ``/dev/zero`` and to the FIFO, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    os.mkfifo(folder / "pipe")
    (folder / "zero").symlink_to("/dev/zero")
    (folder / "to-pipe").symlink_to(folder / "pipe")
    server = socket.socket(socket.AF_UNIX)
    here = Path.cwd()
    os.chdir(folder)  # bound by a relative name: a socket's path is limited to 107 bytes
    try:
        server.bind("sock")
    finally:
        os.chdir(here)
        server.close()
    return [folder / name for name in ("pipe", "zero", "to-pipe", "sock")]


def test_special_files_in_the_benchmark_folder_hang_no_session(project: BenchProject) -> None:
    """Outside git the code fingerprint hashes the folder: each special file by its type."""
    project.bench(tiny_bench())
    plant(project.path / "junk")
    before = snapshot(project.path)
    assert_clean_exit(session(project, "bench.yaml"), allowed={0})
    (run_dir,) = project.runs()
    assert len(assert_trials_on_disk(run_dir)) == 2
    assert_nothing_outside(project.home, before, project.path)


def test_special_inputs_are_hashed_by_type_and_the_prep_is_cached(project: BenchProject) -> None:
    specials = plant(project.path / "inputs")
    document = tiny_bench()
    document["stages"][0]["inputs"] = [str(p) for p in specials[:3]] + ["inputs"]
    project.bench(document)
    for _ in range(2):
        assert_clean_exit(session(project, "bench.yaml"), allowed={0})
    first, second = project.runs()
    from pytest_benchmark_agent.records.reader import load_results

    assert [p["action"] for p in load_results(second)["preps"]] == ["reused"]
    assert content_hash(specials[0]) != content_hash(specials[1])  # fifo vs link to a device
    assert content_hash(specials[0]) == content_hash(specials[0])


@pytest.mark.parametrize("kind", ["fifo", "link-to-dev-zero", "too-big"])
def test_a_benchmark_file_that_is_no_regular_file_is_refused_unread(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "bench.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link-to-dev-zero":
        path.symlink_to("/dev/zero")
    else:
        with path.open("wb") as handle:  # sparse: nothing is written but its size
            handle.truncate(MAX_INPUT_BYTES + 1)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    text = str(caught.value)
    assert str(path) in text and "cannot be read" in text
    assert {"fifo": "fifo", "link-to-dev-zero": "character device", "too-big": "over"}[kind] in text


def test_the_plan_verb_on_a_fifo_is_a_clear_error(project: BenchProject) -> None:
    os.mkfifo(project.path / "pipe.bench.yaml")
    result = agent(project, "plan", "pipe.bench.yaml", timeout=120)
    output = assert_clean_exit(result)
    assert result.returncode != 0 and "pipe.bench.yaml" in output


@pytest.mark.parametrize("kind", ["fifo", "link-to-dev-zero"])
def test_a_recipe_that_is_no_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    recipe = tmp_path / "special.yaml"
    if kind == "fifo":
        os.mkfifo(recipe)
    else:
        recipe.symlink_to("/dev/zero")
    with pytest.raises(ConfigError) as caught:
        load_recipe("./special.yaml", tmp_path / "bench.yaml")
    assert "special.yaml" in str(caught.value)


def test_a_metrics_file_made_a_fifo_fails_its_trial_without_a_hang(
    project: BenchProject,
) -> None:
    document = tiny_bench()
    document["stages"][1]["cmd"] = "echo {mode} > /dev/null; rm -f {out}/m.txt; mkfifo {out}/m.txt"
    document["stages"][1]["metrics_from"] = {"file": "{out}/m.txt", "fields": ["score"]}
    project.bench(document)
    result = session(project, "bench.yaml")
    output = assert_clean_exit(result, allowed={1})
    assert "m.txt" in output
    (run_dir,) = project.runs()
    assert len(assert_trials_on_disk(run_dir)) == 2
