"""pytest-xdist: one merged run record, preps built once, measurements never overlapping, a
crashed worker losing only its own trial, and per-host figures for several hosts."""

from __future__ import annotations

import pytest
from benchhelpers import BenchProject, simple_bench

pytest.importorskip("xdist")


def distributed_bench(replicates: int = 4) -> dict:
    document = simple_bench(replicates=replicates)
    # the prep uses the treatment, so there are two signatures; each must be built exactly once
    document["stages"][0]["cmd"] = "echo {mode} >> prep_runs.txt; sleep 0.3; echo {size} > {data}"
    document["stages"][1]["cmd"] = "cat {data} >/dev/null; sleep 0.05; echo score={size} # {mode}"
    return document


def test_two_workers_make_one_record_with_every_trial_once(project: BenchProject) -> None:
    project.bench(distributed_bench())
    result = project.run("-n", "2", "-p", "no:benchmark", subprocess=True)
    assert result.ret == 0, result.stdout.str()
    (run_dir,) = project.runs()
    record = project.results()
    ids = [t["id"] for t in record["trials"]]
    assert len(ids) == 8 and len(set(ids)) == 8
    assert record["state"] == "complete" and record["counts"] == {"passed": 8}
    builds = (project.path / "prep_runs.txt").read_text().split()
    assert sorted(builds) == ["a", "b"]  # once per signature across both workers
    actions = sorted(p["action"] for p in record["preps"])
    assert actions.count("built") == 2
    workers = {p["worker"] for p in record["preps"]}
    assert workers == {"gw0", "gw1"}
    windows = sorted((t["started"], t["ended"]) for t in record["trials"])
    pairs = zip(windows, windows[1:], strict=False)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in pairs)
    report = (run_dir / "report.md").read_text()
    assert "0 overlap(s) on a host" in report


def test_isolation_none_is_recorded_as_a_caveat(project: BenchProject) -> None:
    project.bench(distributed_bench(replicates=2))
    result = project.run(
        "-n", "2", "-p", "no:benchmark", "--bench-isolation", "none", subprocess=True
    )
    assert result.ret == 0
    assert any("isolation 'none'" in c for c in project.results()["caveats"])


#: A measure command whose first trial of ``b`` kills the worker running it (``$PPID``: the
#: stage's shell's parent), then every trial scores.
KILL_ITS_WORKER_ONCE = (
    "if [ {mode} = b ] && [ ! -e crashed ]; then touch crashed; "
    "kill -9 $PPID; sleep 5; fi; echo score={size}"
)


def test_a_crashed_worker_loses_only_its_trial(project: BenchProject) -> None:
    document = distributed_bench()
    document["stages"][1]["cmd"] = KILL_ITS_WORKER_ONCE
    project.bench(document)
    result = project.run("-n", "2", "-p", "no:benchmark", subprocess=True)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    record = project.results()
    statuses = [t["status"] for t in record["trials"]]
    assert statuses.count("interrupted") == 1
    assert statuses.count("passed") == 7
    crashed = next(t for t in record["trials"] if t["status"] == "interrupted")
    assert "crashed" in crashed["reason"] and crashed["treatment"] == "b"
    assert record["state"] == "interrupted"
    assert any("crashed" in c for c in record["caveats"])


def test_two_hosts_run_every_treatment_and_get_per_host_rows(project: BenchProject) -> None:
    project.bench(distributed_bench())
    result = project.run(
        "--dist",
        "load",
        "--tx",
        "popen//env:BENCH_HOST_ID=host-a",
        "--tx",
        "popen//env:BENCH_HOST_ID=host-b",
        "-p",
        "no:benchmark",
        subprocess=True,
    )
    assert result.ret == 0, result.stdout.str()
    record = project.results()
    by_host: dict[str, set[str]] = {}
    for trial in record["trials"]:
        by_host.setdefault(trial["host"], set()).add(trial["treatment"])
    assert by_host == {"host-a": {"a", "b"}, "host-b": {"a", "b"}}
    blocks = {(t["host"], t["replicate"]) for t in record["trials"]}
    assert len(blocks) == 4  # each block ran whole on one host
    report = (project.runs()[-1] / "report.md").read_text()
    assert "| host-a | `score` | `a` |" in report and "| host-b | `score` | `b` |" in report


def test_a_python_domain_file_merges_with_its_metrics(project: BenchProject) -> None:
    project.write(
        "tiny.py",
        """
from pytest_benchmark_agent.domains.api import Domain, measure


class Tiny(Domain):
    manifest = {"mode": {"default": "a", "why": "the treatment"}}
    metrics = {"score": {"direction": "higher", "primary": True}}

    @measure(params=["mode"], metrics=["score"])
    def run(self, call):
        return {"score": float(len(call.params["mode"]))}
""",
    )
    project.bench(
        {
            "domain": "tiny.py:Tiny",
            "name": "tiny",
            "params": {"mode": "a"},
            "treatment_variable": "mode",
            "treatments": ["a", "bb"],
            "replicates": 2,
        }
    )
    result = project.run("-n", "2", "-p", "no:benchmark", subprocess=True)
    assert result.ret == 0, result.stdout.str()
    summary = project.results()["summary"]
    assert summary["score"]["bb"]["median"] == 2.0  # the domain's metrics survive the merge
