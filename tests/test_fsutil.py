"""Atomic writes keep a file's mode and give a new one the umask's, not mkstemp's 0600."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from pytest_benchmark_agent.util.fsutil import atomic_write


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize(("umask", "expected"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_gets_the_mode_open_would_give_it(tmp_path, umask, expected):
    # A fresh interpreter: the umask is read once per process.
    target = tmp_path / "results.yaml"
    code = (
        "import os, sys; from pathlib import Path; os.umask(int(sys.argv[2], 8)); "
        "from pytest_benchmark_agent.util.fsutil import atomic_write; "
        "atomic_write(Path(sys.argv[1]), 'x: 1\\n')"
    )
    subprocess.run([sys.executable, "-c", code, str(target), oct(umask)[2:]], check=True)
    assert _mode(target) == expected
    assert target.read_text() == "x: 1\n"


def test_rewriting_a_file_keeps_its_mode(tmp_path):
    bench = tmp_path / "bench.yaml"
    bench.write_text("name: a\n")
    os.chmod(bench, 0o640)
    atomic_write(bench, "name: b\n")
    assert _mode(bench) == 0o640 and bench.read_text() == "name: b\n"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "index.json"
    path.write_text("old")

    with pytest.raises(TypeError):
        atomic_write(path, 12345)  # type: ignore[arg-type]
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.json"]
