"""The gaps the class helpers of issue 19 found, closed: the ``bench`` fixture reads benchmark
files with the one hardened loader (duplicate keys refused, a FIFO never read) and checks a
document's name before writing its scratch file; a metrics file that is a FIFO or a device is
named as such; a load error or a ``--bench-set`` usage error prints no secret; ``status`` skips
a latest run whose record cannot be read, naming the file. Each hostile case beside a happy one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from hostilehelpers import (
    CRASH_MARKS,
    assert_clean_exit,
    assert_nothing_outside,
    snapshot,
    tiny_bench,
)

from pytest_benchmark_agent.engine.fixture import BenchRunner
from pytest_benchmark_agent.errors import ConfigError

SECRET = "hunter2-Gaps-s3cret"


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter with a deadline: a read that blocks on a FIFO fails
    the test instead of stalling the suite."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _session(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A real ``pytest --bench`` session in ``folder`` (data home ``folder/home``)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--bench", "-p", "no:cacheprovider", "-p", "no:randomly"]
        + ["--bench-home", str(folder / "home"), *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _agent(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["benchmark-agent", "--home", str(folder / "home"), *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _runner(root: Path) -> BenchRunner:
    for name in ("home", "base", "scratch"):
        (root / name).mkdir(exist_ok=True)
    return BenchRunner(root / "home", root / "base", root / "scratch")


# -- (1) the bench fixture's loading --------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "file"), [("gaps", "gaps.bench.yaml"), ("../../escape", "escape.bench.yaml")]
)
def test_a_document_is_written_inside_the_scratch_folder(
    tmp_path: Path, name: str, file: str
) -> None:
    runner = _runner(tmp_path)
    before = snapshot(tmp_path)
    result = runner.run(tiny_bench(name=name))
    assert result.counts == {"passed": 2}
    assert (tmp_path / "scratch" / file).is_file()
    outside = [p for p in snapshot(tmp_path) if p not in before]
    allowed = (str(tmp_path / "scratch") + os.sep, str(tmp_path / "home") + os.sep)
    assert [p for p in outside if not p.startswith(allowed)] == []


@pytest.mark.parametrize("name", ["two\nlines", "x" * 300, ""])
def test_a_bad_document_name_is_refused_before_anything_is_written(
    tmp_path: Path, name: str
) -> None:
    runner = _runner(tmp_path)
    with pytest.raises(ConfigError) as caught:
        runner.run(tiny_bench(name=name))
    assert "name:" in str(caught.value) and "one line of 1 to 100 characters" in str(caught.value)
    assert list((tmp_path / "scratch").iterdir()) == []
    assert list((tmp_path / "home").iterdir()) == []


def test_a_benchmark_file_with_fields_runs_its_copy(tmp_path: Path) -> None:
    runner = _runner(tmp_path)
    (tmp_path / "base" / "bench.yaml").write_text(yaml.safe_dump(tiny_bench(replicates=3)))
    result = runner.run("bench.yaml", replicates=1)
    assert result.counts == {"passed": 2}
    assert not list((tmp_path / "base").glob(".bench.*.tmp.yaml"))  # the copy is removed


@pytest.mark.parametrize("fields", [{}, {"replicates": 1}])
def test_a_duplicate_key_in_a_benchmark_file_is_refused(tmp_path: Path, fields: dict) -> None:
    runner = _runner(tmp_path)
    text = yaml.safe_dump(tiny_bench(), sort_keys=False)
    (tmp_path / "base" / "bench.yaml").write_text(f"replicates: 2\n{text}")
    with pytest.raises(ConfigError) as caught:
        runner.run("bench.yaml", **fields)
    message = str(caught.value)
    assert "bench.yaml" in message and "replicates" in message and "line 1" in message
    assert list((tmp_path / "home").iterdir()) == []


@pytest.mark.parametrize("kind", ["fifo", "link-to-dev-zero"])
@pytest.mark.parametrize("fields", ["", "replicates=1"])
def test_a_benchmark_file_that_is_no_regular_file_is_refused_without_a_hang(
    tmp_path: Path, kind: str, fields: str
) -> None:
    _runner(tmp_path)
    target = tmp_path / "base" / "bench.yaml"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")
    done = _python(
        f"""
        from pathlib import Path
        from pytest_benchmark_agent.engine.fixture import BenchRunner
        from pytest_benchmark_agent.errors import ConfigError
        root = Path({str(tmp_path)!r})
        runner = BenchRunner(root / "home", root / "base", root / "scratch")
        try:
            runner.run("bench.yaml", {fields})
        except ConfigError as error:
            print(error)
        """,
        tmp_path,
    )
    output = assert_clean_exit(done, allowed={0})
    # the fixture resolves a relative path, so a link is named by what it points at
    assert (str(target) if kind == "fifo" else "/dev/zero") in output
    assert ("is a fifo" if kind == "fifo" else "character device") in output


# -- (2) a metrics file that is no regular file ---------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("regular", "{'score': 3.0}"),
        ("missing", "was not written by the stage"),
        ("fifo", "is a fifo, not a regular file"),
        ("link-to-dev-zero", "is a link to character device, not a regular file"),
        ("folder", "is a folder, not a regular file"),
    ],
)
def test_a_metrics_file_says_what_it_is(tmp_path: Path, kind: str, expected: str) -> None:
    path = tmp_path / "m.txt"
    if kind == "regular":
        path.write_text("score=3\n")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "link-to-dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    done = _python(
        f"""
        from pathlib import Path
        from pytest_benchmark_agent.engine.metrics import read_metrics_file
        from pytest_benchmark_agent.errors import MetricError
        try:
            print(read_metrics_file(Path({str(path)!r}), ["score"]))
        except MetricError as error:
            print(error)
        """,
        tmp_path,
    )
    output = assert_clean_exit(done, allowed={0})
    assert expected in output
    if kind != "regular":
        assert str(path) in output


def test_a_metrics_file_made_a_fifo_is_named_a_fifo_by_its_trial(tmp_path: Path) -> None:
    document = tiny_bench()
    document["stages"][1]["cmd"] = "echo {mode} > /dev/null; rm -f {out}/m.txt; mkfifo {out}/m.txt"
    document["stages"][1]["metrics_from"] = {"file": "{out}/m.txt", "fields": ["score"]}
    (tmp_path / "bench.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    output = assert_clean_exit(_session(tmp_path, "bench.yaml"), allowed={1})
    assert "m.txt is a fifo, not a regular file" in output
    assert "was not written" not in output


# -- (3) no secret in a load error or a usage error -----------------------------------------------


def _bad_secrets_bench() -> dict:
    document = tiny_bench()
    measure = document["stages"][1]
    measure["env"] = {"DB_PASSWORD": 98765432123, "API_TOKEN": {"value": SECRET}}
    measure["timeout_s"] = f"postgres://bob:{SECRET}@db.example/x"
    return document


def test_a_load_error_names_the_fields_but_prints_no_secret(tmp_path: Path) -> None:
    (tmp_path / "bench.yaml").write_text(yaml.safe_dump(_bad_secrets_bench(), sort_keys=False))
    done = _session(tmp_path, "bench.yaml")
    output = assert_clean_exit(done, allowed={1, 2, 4})
    for field in ("env.DB_PASSWORD", "env.API_TOKEN", "timeout_s"):
        assert field in output, output[-3000:]
    assert "postgres://<redacted>@db.example/x" in output
    assert SECRET not in output and "98765432123" not in output


def test_a_load_error_still_shows_an_ordinary_value(tmp_path: Path) -> None:
    document = tiny_bench()
    document["stages"][1]["timeout_s"] = "soon"
    (tmp_path / "bench.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    output = assert_clean_exit(_session(tmp_path, "bench.yaml"), allowed={1, 2, 4})
    assert "timeout_s" in output and "(got 'soon')" in output


@pytest.mark.parametrize(
    ("setting", "shown"),
    [(f"api_token=[{SECRET}", False), (f"size=[{SECRET}", True)],
)
def test_a_bench_set_usage_error_prints_no_secret(
    tmp_path: Path, setting: str, shown: bool
) -> None:
    (tmp_path / "bench.yaml").write_text(yaml.safe_dump(tiny_bench(), sort_keys=False))
    before = snapshot(tmp_path)
    done = _session(tmp_path, f"--bench-set={setting}", "bench.yaml")
    output = assert_clean_exit(done, allowed={4})
    name = setting.split("=")[0]
    assert f"--bench-set {name}:" in output and "quote a plain string" in output
    assert (SECRET in output) is shown  # an ordinary value is quoted back to its writer
    detached = _agent(tmp_path, "run", "--detach", "bench.yaml", "--", f"--bench-set={setting}")
    output = assert_clean_exit(detached, allowed={2})
    assert name in output and (SECRET in output) is shown
    assert_nothing_outside(tmp_path / "home", before, tmp_path)


# -- (4) status on a corrupt latest run -----------------------------------------------------------


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose data home holds two finished runs of one benchmark."""
    folder = tmp_path_factory.mktemp("two_runs")
    (folder / "bench.yaml").write_text(yaml.safe_dump(tiny_bench(), sort_keys=False))
    for _ in range(2):
        assert_clean_exit(_session(folder, "bench.yaml"), allowed={0})
    return folder


def _runs(folder: Path) -> list[Path]:
    from pytest_benchmark_agent.records.store import run_order

    return sorted((folder / "home" / "runs").iterdir(), key=run_order)


def test_status_shows_the_latest_run(two_runs: Path) -> None:
    latest = _runs(two_runs)[-1]
    output = assert_clean_exit(_agent(two_runs, "status"), allowed={0})
    assert latest.name in output and "warning" not in output


def test_status_skips_a_corrupt_latest_run_naming_its_file(two_runs: Path, tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(two_runs, folder)
    earlier, latest = _runs(folder)
    damaged = latest / "results.yaml"
    damaged.write_text("trials: [unclosed\n  - {a: \n")
    done = _agent(folder, "status")
    output = assert_clean_exit(done, allowed={0})
    assert earlier.name in done.stdout and latest.name not in done.stdout
    assert "warning: skipped" in done.stderr and str(damaged) in done.stderr
    named = _agent(folder, "status", latest.name)  # asked for by name: an error
    output = assert_clean_exit(named, allowed={2})
    assert str(damaged) in output and "unreadable record" in output
    (earlier / "results.yaml").write_text("- not\n- a record\n")
    none_readable = _agent(folder, "status")  # nothing left to show: the latest one's error
    output = assert_clean_exit(none_readable, allowed={2})
    assert str(damaged) in output
    for mark in CRASH_MARKS:
        assert mark not in output
