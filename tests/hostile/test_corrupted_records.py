"""Class 9 of issue 19, corrupted records: every verb on a data home holding a torn, edited or
special ``results.yaml``, ``index.json``, ``config.yaml`` or journal line prints a clear error
naming the file (a list verb skips it and says so), never a traceback; a later session of the
same benchmark skips the earlier record and keeps every trial it takes; ``--home`` that does
not exist or is a file is an error."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hostilehelpers import CRASH_MARKS, assert_clean_exit, assert_trials_on_disk, tiny_bench

from pytest_benchmark_agent.cli.main import main
from pytest_benchmark_agent.records.store import run_order


def _session(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A real ``pytest --bench`` session in ``folder``, its data home ``folder/home``."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--bench", "-p", "no:cacheprovider", "-p", "no:randomly"]
        + ["--bench-home", str(folder / "home"), *args, "bench.yaml"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A benchmark folder whose data home holds two finished runs of the same config."""
    folder = tmp_path_factory.mktemp("pristine")
    (folder / "bench.yaml").write_text(yaml.safe_dump(tiny_bench(), sort_keys=False))
    for _ in range(2):
        assert_clean_exit(_session(folder), allowed={0})
    return folder


def _runs(folder: Path) -> list[Path]:
    return sorted((folder / "home" / "runs").iterdir(), key=run_order)


def _text(content: str | bytes) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.unlink()
        path.write_bytes(content.encode() if isinstance(content, str) else content)

    return write


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _journal_line(line: str) -> Callable[[Path], None]:
    def insert(path: Path) -> None:
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join([lines[0], line + "\n", *lines[1:]]))

    return insert


#: (file of the earlier run, how it is damaged); ids name the case in RELIABILITY.md's table.
CORRUPTIONS = {
    "results-not-yaml": ("results.yaml", _text("trials: [unclosed\n  - {a: \n")),
    "results-truncated": ("results.yaml", _truncate),
    "results-a-list": ("results.yaml", _text("- 1\n- 2\n")),
    "results-trials-a-number": ("results.yaml", _text("run_id: x\ntrials: 5\n")),
    "results-not-utf8": ("results.yaml", _text(b"name: \xff\xfe\n")),
    "results-duplicate-key": ("results.yaml", _text("state: complete\nstate: running\n")),
    "results-a-fifo": ("results.yaml", _fifo),
    "index-not-json": ("index.json", _text("{not json")),
    "index-a-list": ("index.json", _text("[]")),
    "index-wrong-types": ("index.json", _text('{"run_id": "x", "counts": "many"}')),
    "index-truncated": ("index.json", _truncate),
    "index-a-fifo": ("index.json", _fifo),
    "journal-garbage-line": ("trials.jsonl", _journal_line("garbage{")),
    "journal-not-a-trial": ("trials.jsonl", _journal_line("[1, 2]")),
    "journal-trial-without-id": ("trials.jsonl", _journal_line('{"status": "passed"}')),
    "config-not-yaml": ("config.yaml", _text(": : :\n  - [\n")),
    "config-a-fifo": ("config.yaml", _fifo),
}


@pytest.fixture(params=sorted(CORRUPTIONS))
def damage(
    request: pytest.FixtureRequest, pristine: Path, tmp_path: Path
) -> Callable[[int], tuple[Path, Path]]:
    """Damage one file of a run (0: the earlier, -1: the latest) of a copy of the pristine
    folder: (folder, file)."""

    def damaged(which: int) -> tuple[Path, Path]:
        folder = tmp_path / "bench"
        shutil.copytree(pristine, folder)
        name, how = CORRUPTIONS[request.param]
        target = _runs(folder)[which] / name
        how(target)
        return folder, target

    return damaged


def agent(folder: Path, *args: str) -> tuple[int, str]:
    """``benchmark-agent --home HOME ARGS`` in-process: its exit code and its output."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["--home", str(folder / "home"), *args])
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
            print(stop.code, file=err)
    return code, out.getvalue() + err.getvalue()


def test_every_verb_on_a_corrupted_record_is_a_clear_error(damage: Callable) -> None:
    folder, target = damage(0)
    earlier, latest = (run.name for run in _runs(folder))
    verbs = [
        ("history",),
        ("status",),
        ("status", earlier),
        ("analyze", earlier),
        ("analyze", "latest"),
        ("compare", earlier, latest),
        ("export", earlier, "-o", str(folder / "bundle.json")),
        ("reclassify", earlier, "UNRELIABLE", "--why", "checked"),
    ]
    for verb in verbs:
        code, output = agent(folder, *verb)
        assert code in {0, 1, 2}, f"{verb}: exit {code}\n{output}"
        for mark in CRASH_MARKS:
            assert mark not in output, f"{verb}:\n{output}"
        if code == 2 or "unreadable" in output or "skipped" in output:
            assert str(target) in output, f"{verb} does not name {target}:\n{output}"
    code, output = agent(folder, "history")
    assert latest in output  # the list goes on past the damaged run


def test_a_later_session_skips_a_corrupted_earlier_record(damage: Callable) -> None:
    """The latest run is the one a new run of the same config reads first (to reproduce it)."""
    folder, target = damage(-1)
    output = assert_clean_exit(_session(folder), allowed={0})
    newest = _runs(folder)[-1]
    assert newest != target.parent and len(assert_trials_on_disk(newest)) == 2
    assert (newest / "index.json").is_file() and (newest / "report.md").is_file()
    if target.name != "results.yaml" or yaml_refused(target):  # else: read as it now is
        assert str(target) in output, f"the session does not name {target}:\n{output[-3000:]}"


def yaml_refused(path: Path) -> bool:
    """Whether the records' reader refuses ``path`` (half a record may still be YAML)."""
    from pytest_benchmark_agent.records.reader import UnreadableRecord, load_results

    try:
        load_results(path.parent)
    except UnreadableRecord:
        return True
    return False


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_home_that_is_missing_or_a_file_is_an_error(tmp_path: Path, kind: str) -> None:
    home = tmp_path / "home"
    if kind == "file":
        home.write_text("not a folder")
    for verb in (("history",), ("status",), ("analyze", "latest"), ("compare", "a", "b")):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["--home", str(home), *verb])
        assert code == 2, verb
        assert str(home) in err.getvalue()
        assert ("does not exist" if kind == "missing" else "is a file") in err.getvalue()
    assert not home.exists() or home.is_file()
