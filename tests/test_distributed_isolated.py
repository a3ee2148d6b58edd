"""Workers that share nothing with the controller but xdist's channel: each in its own mount
namespace, a private empty tmpfs mounted over the data directory before Python starts (what a
second machine without NFS looks like). Every record reaches the controller through xdist."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from benchhelpers import BenchProject
from test_distributed import KILL_ITS_WORKER_ONCE, distributed_bench

from pytest_benchmark_agent.engine.detach import _progress

pytest.importorskip("xdist")


def isolating_python(project: BenchProject) -> Path:
    """A ``python=`` for ``--tx popen``: ``unshare -m``, a tmpfs over the project's data
    directory, then this interpreter. Skips where mount namespaces cannot be made."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) here")
    project.home.mkdir(exist_ok=True)
    wrapper = project.path.parent / f"{project.path.name}-isolated-python"
    wrapper.write_text(
        "#!/bin/sh\n"
        'exec unshare -m sh -c \'mount -t tmpfs bench-private "$0" && exec "$@"\' '
        f'"{project.home}" "{sys.executable}" "$@"\n'
    )
    wrapper.chmod(0o755)
    probe = subprocess.run([str(wrapper), "-c", "pass"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a private mount namespace here: {probe.stderr.strip()}")
    return wrapper


def isolated(project: BenchProject, *hosts: str) -> list[str]:
    wrapper = isolating_python(project)
    args = ["--dist", "load", "-p", "no:benchmark"]
    for host in hosts:
        args += ["--tx", f"popen//python={wrapper}//env:BENCH_HOST_ID={host}"]
    return args


def test_isolated_workers_send_every_record_to_the_controller(project: BenchProject) -> None:
    project.bench(distributed_bench())
    result = project.run(*isolated(project, "host-a", "host-b"), subprocess=True)
    assert result.ret == 0, result.stdout.str()
    (run_dir,) = project.runs()
    record = project.results()
    ids = [t["id"] for t in record["trials"]]
    assert len(ids) == 8 and len(set(ids)) == 8
    assert record["state"] == "complete" and record["counts"] == {"passed": 8}
    journal = (run_dir / "trials.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["id"] for line in journal) == sorted(ids)
    assert (run_dir / "report.md").is_file() and (run_dir / "index.json").is_file()
    assert (project.home / "results_index.md").is_file()
    hosts = {t["host"] for t in record["trials"]}
    assert hosts <= {"host-a", "host-b"} and hosts
    # each machine built its preps in its own cache, once per signature; none travelled
    for host in hosts:
        built = [p for p in record["preps"] if p["host"] == host and p["action"] == "built"]
        assert len(built) == 2, record["preps"]
    assert not (project.home / "cache").exists()
    beat = json.loads((run_dir / "heartbeat.json").read_text())
    assert beat["trials_done"] == 8
    if len(hosts) > 1:  # what `benchmark-agent status` of a live detached run prints
        assert set(beat["hosts"]) == hosts and sum(beat["hosts"].values()) == 8
        line = _progress(beat)
        assert all(f"; {host} {beat['hosts'][host]}" in line for host in hosts), line


def test_a_killed_isolated_worker_keeps_every_finished_trial(project: BenchProject) -> None:
    document = distributed_bench()
    document["stages"][1]["cmd"] = KILL_ITS_WORKER_ONCE
    project.bench(document)
    result = project.run(*isolated(project, "host-a", "host-b"), subprocess=True)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    record = project.results()
    ids = [t["id"] for t in record["trials"]]
    assert len(ids) == 8 and len(set(ids)) == 8
    statuses = [t["status"] for t in record["trials"]]
    assert statuses.count("interrupted") == 1 and statuses.count("passed") == 7
    assert record["state"] == "interrupted"
    report = (project.runs()[-1] / "report.md").read_text()
    assert "crashed" in report


def test_records_that_never_arrive_are_interrupted_not_missing(project: BenchProject) -> None:
    """An xdist that does not carry the records (simulated: the workers' reports lose them)."""
    project.write(
        "conftest.py",
        """
import os

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        report.user_properties = []
""",
    )
    project.bench(distributed_bench(replicates=2))
    result = project.run("-n", "2", "-p", "no:benchmark", subprocess=True)
    assert result.ret == 0, result.stdout.str()
    record = project.results()
    assert record["state"] == "interrupted"
    assert {t["status"] for t in record["trials"]} == {"interrupted"}
    assert len(record["trials"]) == 4
    assert all("never reached the controller" in t["reason"] for t in record["trials"])
    report = (project.runs()[-1] / "report.md").read_text()
    assert "never reached the controller" in report


def test_a_worker_with_another_environment_is_named(project: BenchProject) -> None:
    document = distributed_bench(replicates=2)
    document["env_vars"] = ["BENCH_FLAVOUR"]
    project.bench(document)
    result = project.run(
        "--dist",
        "load",
        "--tx",
        "popen//env:BENCH_FLAVOUR=plain",
        "--tx",
        "popen//env:BENCH_FLAVOUR=spiced",
        "-p",
        "no:benchmark",
        subprocess=True,
    )
    assert result.ret == 0, result.stdout.str()
    caveats = project.results()["caveats"]
    named = [c for c in caveats if "runs another environment" in c]
    assert len(named) == 1 and "BENCH_FLAVOUR" in named[0], caveats
    report = (project.runs()[-1] / "report.md").read_text()
    assert "runs another environment" in report
