"""Invariants every hostile test asserts (issue 19): import them from here in a test module.

Each hostile case ends with the same checks: the exit code is one pytest or the verbs give on
purpose (0 passed, 1 failed, 2 interrupted/refused, 4 usage), the output holds no Python
traceback or INTERNALERROR, nothing was written outside the data home, no secret value is in
any file, and every trial the journal holds is in the record. (A module of its own, not
conftest.py: every conftest is the module ``conftest``, so importing from it is ambiguous.)
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from benchhelpers import BenchProject, simple_bench

#: Exit codes a session or verb gives on purpose (pytest's OK, TESTS_FAILED, INTERRUPTED,
#: USAGE_ERROR); 3 (INTERNALERROR), 5 (no tests) and anything else are failures here.
CLEAN_EXITS = frozenset({0, 1, 2, 4})
#: Text that shows an unhandled exception reached the user.
CRASH_MARKS = ("Traceback (most recent call last)", "INTERNALERROR")


def output_of(result: Any) -> tuple[int, str]:
    """(exit code, stdout + stderr) of a ``pytest.RunResult`` or a ``CompletedProcess``."""
    if isinstance(result, pytest.RunResult):
        return int(result.ret), "\n".join(result.outlines + result.errlines)
    return result.returncode, f"{result.stdout or ''}\n{result.stderr or ''}"


def assert_clean_exit(result: Any, allowed: Iterable[int] = CLEAN_EXITS) -> str:
    """Assert ``result`` exited with a clean code and shows no traceback; its output."""
    code, text = output_of(result)
    allowed = frozenset(allowed)
    assert code in allowed, f"exit {code}, expected one of {sorted(allowed)}:\n{text[-4000:]}"
    for mark in CRASH_MARKS:
        assert mark not in text, f"{mark!r} in the output:\n{text[-4000:]}"
    return text


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and link under ``root``, by path: (mtime_ns, size), links not followed."""
    found: dict[str, tuple[int, int]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            found[path] = (info.st_mtime_ns, info.st_size)
    return found


def files_outside(
    home: Path, before: dict[str, tuple[int, int]], root: Path | None = None
) -> list[str]:
    """Paths under ``root`` (``before``'s root, default ``home``'s parent) created or changed
    since ``before`` was taken, that are not inside ``home`` (nor ``home`` itself).

    pytest's own ``.pytest_cache`` is not the engine's writing: every pytest session keeps it in
    its rootdir (a detached session writes it as it exits, so a check may or may not see it)."""
    root = root or home.parent
    home_text = str(home)
    pytest_cache = f"{os.sep}.pytest_cache{os.sep}"
    changed = []
    for path, stamp in snapshot(root).items():
        if path == home_text or path.startswith(home_text + os.sep) or pytest_cache in path:
            continue
        if before.get(path) != stamp and not os.path.isdir(path):
            changed.append(path)
    return sorted(changed)


def assert_nothing_outside(home: Path, before: dict[str, tuple[int, int]], root: Path) -> None:
    """Assert no file under ``root`` outside ``home`` was created or changed since ``before``."""
    outside = files_outside(home, before, root)
    assert not outside, f"written outside the data home {home}: {outside}"


def assert_no_secret(root: Path, secret: str) -> None:
    """Assert no file under ``root`` (links not followed) holds ``secret``, naming the file."""
    needle = secret.encode()
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder, name)
            if path.is_symlink() or not path.is_file():
                continue
            assert needle not in path.read_bytes(), f"the secret is in {path}"


def assert_trials_on_disk(run_dir: Path) -> list[dict[str, Any]]:
    """Assert every trial journalled in ``run_dir`` is in its record as a reader loads it;
    the journalled trials."""
    from pytest_benchmark_agent.records.reader import load_results

    journal = run_dir / "trials.jsonl"
    lines = journal.read_text().splitlines() if journal.is_file() else []
    journalled = []
    for line in lines:
        try:
            journalled.append(json.loads(line))
        except (ValueError, RecursionError):
            continue  # a torn last line, or one a reader skips with a warning
    recorded = {(t.get("id"), t.get("started")) for t in load_results(run_dir).get("trials") or []}
    missing = [t["id"] for t in journalled if (t.get("id"), t.get("started")) not in recorded]
    assert not missing, f"journalled trials missing from {run_dir}'s record: {missing}"
    return journalled


def agent(project: BenchProject, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``benchmark-agent --home HOME ARGS`` run in the project folder, as a user would."""
    return subprocess.run(
        ["benchmark-agent", "--home", str(project.home), *args],
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def tiny_bench(**overrides: Any) -> dict[str, Any]:
    """The smallest real benchmark: two treatments, one replicate, a prep writing an artifact
    (and nothing in the benchmark folder) and a measure reading it."""
    document = simple_bench(replicates=1)
    document["stages"][0]["cmd"] = "echo {size} > {data}"
    document.update(overrides)
    return document


def private_env(root: Path, **extra: str) -> dict[str, str]:
    """The environment of a hostile session or verb: its own ``$HOME`` and ``$TMPDIR`` under
    ``root`` (made here), so the check that nothing is written outside the data home watches
    them too (matplotlib's font cache, a temporary file) without reading what other processes
    write to the machine's own /tmp; no ``MPLCONFIGDIR``, ``GITHUB_STEP_SUMMARY`` or
    ``BENCHMARK_HOME`` of the caller's."""
    env = {k: v for k, v in os.environ.items() if k not in _CALLERS_OWN}
    for name, folder in (("HOME", "user-home"), ("TMPDIR", "tmp")):
        (root / folder).mkdir(parents=True, exist_ok=True)
        env[name] = str(root / folder)
    return {**env, **extra}


_CALLERS_OWN = frozenset({"MPLCONFIGDIR", "GITHUB_STEP_SUMMARY", "BENCHMARK_HOME"})


def assert_no_raw(text: str, needles: Iterable[str], where: str) -> None:
    """Assert none of ``needles`` (a secret, an escape character, a tag) is in ``text``."""
    for needle in needles:
        assert needle not in text, f"{needle!r} is in {where}"
