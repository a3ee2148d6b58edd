"""Benchmarks of one configuration (no ``treatment_variable``/``treatments``), end to end with
real subprocess stages: their replicates run as ``default``, nothing is compared inside the run,
and neither the record, the report nor the terminal shows a comparison that was not made."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

import pytest
from benchhelpers import BenchProject

from pytest_benchmark_agent.domains.api import Domain, StageCall, measure

LOOP = """\
import hashlib, sys, time
n = int(sys.argv[1])
data = open(sys.argv[2]).read()
start = time.perf_counter()
digest = hashlib.sha256()
for i in range(n):
    digest.update(data.encode() + str(i).encode())
print(f"loop_ms={(time.perf_counter() - start) * 1000:.4f}")
print(f"checksum={int(digest.hexdigest()[:12], 16)}")
"""


def loop_bench(**overrides) -> dict:
    """One configuration: a prep writing a data file, a measure timing a loop over it."""
    python = shlex.quote(sys.executable)
    document = {
        "name": "loop",
        "hypothesis": "the loop's time, recorded for comparison with later commits",
        "params": {"loop.n": 2000, "data.text": "abc"},
        "replicates": 3,
        "stages": [
            {
                "name": "build",
                "kind": "prep",
                "cmd": "echo {data.text} > {data}",
                "produces": ["data"],
            },
            {
                "name": "loop",
                "kind": "measure",
                "needs": ["build"],
                "inputs": ["loop.py"],
                "cmd": f"{python} loop.py {{loop.n}} {{data}}",
                "metrics_from": {"stdout": True, "fields": ["loop_ms", "checksum"]},
            },
        ],
        "metrics": {
            "loop_ms": {
                "direction": "lower",
                "primary": True,
                "noise_threshold": 0.05,
                "min_replicates": 3,
            },
            "checksum": {"direction": "equal", "guard": True},
        },
    }
    document.update(overrides)
    return document


@pytest.fixture
def loop_project(project: BenchProject) -> BenchProject:
    project.write("loop.py", LOOP)
    project.bench(loop_bench())
    return project


def test_runs_its_replicates_and_compares_nothing_within_the_run(
    loop_project: BenchProject,
) -> None:
    result = loop_project.run("-v")
    assert result.ret == pytest.ExitCode.OK
    record = loop_project.results()
    assert [t["id"] for t in record["trials"]] == [
        "loop[default-rep0]",
        "loop[default-rep1]",
        "loop[default-rep2]",
    ]
    assert {t["status"] for t in record["trials"]} == {"passed"}
    assert record["treatment_variable"] is None
    assert record["control"] == "default" and record["treatments"] == ["default"]
    row = record["summary"]["loop_ms"]["default"]
    assert row["n"] == 3 and row["median"] > 0 and "ratio_to_control" not in row
    assert list(record["summary"]["loop_ms"]) == ["default"]
    assert record["verdicts"] == {} and record["verdicts_by_host"] == {}
    assert record["refusals"] == []
    assert record["tag"] == "EXPLORATORY"
    assert record["tag_reasons"][0].startswith(
        "one configuration (`default`), compared with nothing within this run"
    )
    index = json.loads((loop_project.runs()[-1] / "index.json").read_text())
    assert index["control"] == "default" and index["treatment_variable"] is None
    listing = (loop_project.home / "results_index.md").read_text()
    assert "| 3/3 | one configuration: no in-run ratio |" in listing

    text = result.stdout.str()
    assert "needs two" not in text and "refused:" not in text
    result.stdout.fnmatch_lines(
        [
            "*EXPLORATORY: one configuration (`default`), compared with nothing within this run*",
            "*metric*median (default)*CV*n",
            "*loop_ms*%*3",
        ]
    )
    row_line = next(line for line in text.splitlines() if line.startswith("  loop_ms"))
    assert not re.search(r" x[0-9-]", row_line)  # no ratio to a control that does not exist

    report = (loop_project.runs()[-1] / "report.md").read_text()
    assert "- **Configuration:** one, `default` (no treatment_variable)" in report
    assert "| configuration | n | median | mean | stdev | CV | min | max |" in report
    assert "| configuration | n | values (count of each) |" in report  # the exact checksum
    assert "| verdict" not in report and "ratio of medians" not in report
    assert "against `default`" not in report
    assert "Verdicts per host" not in report and "(control)" not in report
    assert "Verdicts compare each treatment" not in report
    assert "the treatment order inside each block" not in report

    done = subprocess.run(
        ["benchmark-agent", "--home", str(loop_project.home), "analyze", "latest"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    outline = done.stdout[done.stdout.index("## Skeptical reading") :]
    assert "- One configuration (`default`): nothing was compared within the run" in outline
    assert "Guard `checksum`: no in-run verdict (one configuration" in outline
    assert "the control runs first" not in outline


def test_k_selects_replicates_of_the_one_configuration(loop_project: BenchProject) -> None:
    result = loop_project.run("-k", "rep0 or rep2")
    assert result.ret == pytest.ExitCode.OK
    record = loop_project.results()
    assert [t["id"] for t in record["trials"] if t["status"] == "passed"] == [
        "loop[default-rep0]",
        "loop[default-rep2]",
    ]
    assert record["summary"]["loop_ms"]["default"]["n"] == 2
    assert record["verdicts"] == {} and record["refusals"] == []


def test_collect_only_and_the_plan_verb_plan_it_without_running(loop_project: BenchProject) -> None:
    result = loop_project.run("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "bench.yaml::loop[[]default-rep0[]]",
            "bench.yaml::loop[[]default-rep2[]]",
            "*3 tests collected*",
        ]
    )
    assert not loop_project.home.exists()
    done = subprocess.run(
        ["benchmark-agent", "--home", str(loop_project.home), "plan", "bench.yaml"],
        cwd=loop_project.path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bench.yaml::loop[default-rep1]" in done.stdout
    rows = [line.split() for line in done.stdout.splitlines()]
    assert ["loop.n", "-", "2000", "CONTROL"] in rows
    assert "TREATMENT" not in done.stdout
    assert not (loop_project.home / "runs").exists()


def test_its_guards_still_hold(project: BenchProject) -> None:
    """A floor is checked on the one configuration, and an exact metric whose values differ
    between its trials is a caveat (seeds make them differ here)."""
    project.bench(
        {
            "name": "guarded",
            "params": {"size": 3},
            "replicates": 1,
            "seeds": [1, 2],
            "stages": [
                {
                    "name": "measure",
                    "kind": "measure",
                    "cmd": "echo score=$(( {size} * 2 )); echo checksum={seed}",
                    "metrics_from": {"stdout": True, "fields": ["score", "checksum"]},
                }
            ],
            "metrics": {
                "score": {"direction": "higher", "primary": True, "floor": 10},
                "checksum": {"direction": "equal", "guard": True},
            },
        }
    )
    result = project.run()
    assert result.ret == pytest.ExitCode.OK
    record = project.results()
    assert [t["id"] for t in record["trials"]] == [
        "measure[default-rep0-seed1]",
        "measure[default-rep0-seed2]",
    ]
    assert "default: guard score median 6 is below its floor 10" in record["caveats"]
    assert "checksum: its values are not all identical" in record["caveats"]
    assert record["verdicts"] == {} and record["refusals"] == []
    report = (project.runs()[-1] / "report.md").read_text()
    assert "- default: guard score median 6 is below its floor 10" in report


class Counting(Domain):
    """A one-stage Python Domain (run by file path in the bench fixture's subprocess)."""

    manifest = {"count": {"default": 4, "why": "how many items are counted"}}
    metrics = {"items": {"direction": "higher", "primary": True}}

    @measure(params=["count"], metrics=["items"])
    def count(self, call: StageCall) -> dict[str, float]:
        return {"items": float(call.params["count"])}


def test_the_bench_fixture_runs_a_domain_of_one_configuration(bench) -> None:
    result = bench.run_domain(Counting, params={"count": 4}, replicates=2)
    assert result.session is not None and result.session.exit_code == 0, result.session
    assert result.counts == {"passed": 2}
    assert result.samples("items") == {"default": [4.0, 4.0]}
    assert result.stats("items")["default"]["n"] == 2
    assert result.verdicts == {}
    assert result.tag == "EXPLORATORY"
