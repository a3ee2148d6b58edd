"""The environment check: a session warns once and records it, ``doctor`` prints the same."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from benchhelpers import BenchProject, simple_bench

from pytest_benchmark_agent.cli.main import main
from pytest_benchmark_agent.records import hostcheck
from pytest_benchmark_agent.records.fingerprint import compare_fingerprints

BYTECODE_WARNING = "PYTHONDONTWRITEBYTECODE: is set"


def fingerprint(project: BenchProject, index: int) -> dict:
    document = yaml.safe_load((project.runs()[index] / "config.yaml").read_text())
    return document["fingerprint"]


def test_a_session_warns_once_and_records_the_setting(
    project: BenchProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    project.bench(simple_bench(), "bench_one.yaml")
    project.bench(simple_bench(name="other"), "bench_two.yaml")  # two runs, one session
    result = project.run()
    assert result.ret == pytest.ExitCode.OK
    assert result.stdout.str().count(BYTECODE_WARNING) == 1
    result.stdout.fnmatch_lines(
        ["benchmark-agent: this machine may distort the numbers:", "*recompiles*"]
    )
    for index in (0, 1):
        check = fingerprint(project, index)["host_check"]
        assert check["PYTHONDONTWRITEBYTECODE"] == "1"
        assert any(w.startswith(BYTECODE_WARNING) for w in check["warnings"])


def test_without_the_setting_nothing_is_said_of_it(
    project: BenchProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    project.bench(simple_bench())
    result = project.run()
    assert result.ret == pytest.ExitCode.OK
    assert "PYTHONDONTWRITEBYTECODE" not in result.stdout.str()
    check = fingerprint(project, -1)["host_check"]
    assert check["PYTHONDONTWRITEBYTECODE"] is None and "load" in check


def test_doctor_names_the_setting(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    assert main(["--home", str(tmp_path), "doctor"]) == 0
    out = capsys.readouterr().out
    assert "PYTHONDONTWRITEBYTECODE: 1" in out
    assert f"  {BYTECODE_WARNING}" in out and "recompiles" in out


def test_doctor_without_it_prints_it_unset(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    assert main(["--home", str(tmp_path), "doctor"]) == 0
    out = capsys.readouterr().out
    assert "PYTHONDONTWRITEBYTECODE: unset" in out and "PYTHONHASHSEED: 0" in out
    assert BYTECODE_WARNING not in out


def test_doctor_prints_readable_lines_not_python_values(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The load finding is a mapping with a list inside: it printed as ``{'load_1m': ...}``."""
    assert main(["--home", str(tmp_path), "doctor"]) == 0
    out = capsys.readouterr().out
    (load,) = [line for line in out.splitlines() if line.startswith("load: ")]
    assert load.startswith("load: load_1m ") and "; cpus " in load and "; busy_processes " in load
    read = out.split("\n\n")[0]  # the values read, before the warnings
    assert not any(mark in read for mark in ("{'", "['", "': ", "None")), out


def test_a_findings_empty_and_nested_values_read_as_words() -> None:
    finding = hostcheck.Finding("load", {"load_1m": 0.5, "busy_processes": [], "x": {"y": [1, 2]}})
    assert finding.shown == "load_1m 0.5; busy_processes none; x y 1, 2"
    assert hostcheck.Finding("turbo", None).shown == "not readable here"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_governor_turbo_quota_and_throttling_are_read_from_the_kernels_files(
    tmp_path: Path,
) -> None:
    """A machine's /proc and /sys as files (the real ones here expose none of them)."""
    proc, cpu, cgroup = tmp_path / "proc", tmp_path / "cpu", tmp_path / "cgroup"
    write(proc / "self" / "cgroup", "0::/bench.slice\n")
    write(proc / "vmstat", "pswpin 10\npswpout 5\n")
    write(cpu / "cpu0" / "cpufreq" / "scaling_governor", "powersave\n")
    write(cpu / "cpu1" / "cpufreq" / "scaling_governor", "performance\n")
    write(cpu / "intel_pstate" / "no_turbo", "0\n")
    write(cgroup / "bench.slice" / "cpu.max", "150000 100000\n")
    write(cgroup / "bench.slice" / "cpu.stat", "usage_usec 9\nnr_throttled 4\n")
    watch = hostcheck.HostWatch(proc=proc, sys_cpu=cpu, cgroup_root=cgroup)
    write(proc / "vmstat", "pswpin 12\npswpout 6\n")  # 3 pages moved while watched
    found = {f.name: f for f in watch.findings(environ={})}
    assert found["cpu_governor"].value == ["performance", "powersave"]
    assert "performance" in (found["cpu_governor"].warning or "")
    assert found["turbo"].value is True and found["turbo"].warning
    assert found["cpu_quota"].value == 1.5
    assert found["cpu_throttled"].value == 4 and "4 time(s)" in (
        found["cpu_throttled"].warning or ""
    )
    assert found["swap_pages"].value == 3 and found["swap_pages"].warning
    assert found["PYTHONDONTWRITEBYTECODE"].warning is None
    assert "PYTHONHASHSEED" not in found  # asked only where a stage counts


def test_a_quiet_well_set_machine_gets_no_warning(tmp_path: Path) -> None:
    proc, cpu, cgroup = tmp_path / "proc", tmp_path / "cpu", tmp_path / "cgroup"
    write(proc / "self" / "cgroup", "4:cpu,cpuacct:/job\n")
    write(proc / "vmstat", "pswpin 10\npswpout 5\n")
    write(cpu / "cpu0" / "cpufreq" / "scaling_governor", "performance\n")
    write(cpu / "cpufreq" / "boost", "0\n")
    write(cgroup / "cpu,cpuacct" / "job" / "cpu.cfs_quota_us", "-1\n")
    write(cgroup / "cpu,cpuacct" / "job" / "cpu.cfs_period_us", "100000\n")
    write(cgroup / "cpu,cpuacct" / "job" / "cpu.stat", "nr_periods 0\nnr_throttled 0\n")
    watch = hostcheck.HostWatch(proc=proc, sys_cpu=cpu, cgroup_root=cgroup)
    found = [
        f
        for f in watch.findings(counted=True, environ={"PYTHONHASHSEED": "0"})
        if f.name != "load"  # this machine's own load is whatever it is
    ]
    assert [f.warning for f in found] == [None] * len(found)
    assert {f.name: f.shown for f in found}["cpu_quota"] == "no quota"


def test_a_busy_process_is_named_as_one_inert_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process names itself: a terminal escape in its name is never printed as one."""
    monkeypatch.setattr(hostcheck, "BUSY_LOAD_SHARE", -1.0)  # watch whatever the load
    # and list every process: on a loaded machine the busy child may get less than a fifth of
    # a CPU in the window, or not be among the five busiest
    monkeypatch.setattr(hostcheck, "BUSY_PROCESS_SHARE", -1.0)
    monkeypatch.setattr(hostcheck, "BUSY_SHOWN", 1_000_000)
    hostile = tmp_path / "ev\x1b[2Jil"
    hostile.symlink_to(sys.executable)
    busy = subprocess.Popen([str(hostile), "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        watch = hostcheck.HostWatch()
        time.sleep(0.5)
        load = next(f for f in watch.findings() if f.name == "load")
    finally:
        busy.kill()
        busy.wait()
    named = [p for p in load.value["busy_processes"] if f"[{busy.pid}]" in p]
    assert named and "\x1b" not in named[0] and named[0].startswith("ev\\x1b[2Jil")
    assert load.warning is not None and "\x1b" not in load.warning
    assert not any(f"[{os.getpid()}] " in p for p in load.value["busy_processes"])


def test_the_check_describes_the_moment_and_is_never_a_fingerprint_difference() -> None:
    quiet = {"env": {"python": "3.11.7"}, "host_check": {"load": {"load_1m": 0.1}}}
    busy = {"env": {"python": "3.11.7"}, "host_check": {"load": {"load_1m": 7.5}, "warnings": []}}
    diff = compare_fingerprints(quiet, busy)
    assert diff.blocking == diff.benign == diff.code == []
    assert compare_fingerprints(quiet, {"env": {"python": "3.11.7"}}).benign == []
