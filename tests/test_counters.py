"""Deterministic counters (issue 24): ``counters: [instructions]`` on a measure stage.

Real parts: sessions run a small Python loop under valgrind's cachegrind (this machine has no
hardware PMU); the perf path runs through a clearly named test double of ``perf`` here, and for
real where the kernel exposes a PMU. Cachegrind is ~50-90x slower, so the sessions are few.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from pytest_benchmark_agent.config.metric import COUNTER_NOISE_THRESHOLD
from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.engine import counters
from pytest_benchmark_agent.engine.invocation import StageInvocation
from pytest_benchmark_agent.engine.preflight import gate_one
from pytest_benchmark_agent.engine.stages import run_stage
from pytest_benchmark_agent.errors import ConfigError
from pytest_benchmark_agent.records.fingerprint import compare_fingerprints
from pytest_benchmark_agent.records.hashseeds import hash_seed
from pytest_benchmark_agent.stats.counter_noise import NOISE_FLOORS

needs_valgrind = pytest.mark.skipif(
    counters.backend() is None or counters.backend().name != "cachegrind",
    reason="valgrind is not installed (.ci/run installs it)",
)
needs_pmu = pytest.mark.skipif(
    not counters.PMU.exists() or shutil.which("perf") is None,
    reason="no hardware PMU exposed here (/sys/bus/event_source/devices/cpu), or no perf",
)
#: The issue's workload, its size from argv (so '0250000' is the same work, written apart); the
#: interpreter itself, not a shim (a pyenv shim under --trace-children=yes is a dozen more
#: counted processes).
LOOP = "import sys; sum(range(int(sys.argv[1])))"
PYTHON = os.path.realpath(sys.executable)


def loop_command() -> str:
    return f"{PYTHON} -S -c '{LOOP}' {{work}}"


def counted_bench(treatments: list[str], replicates: int, **stage: object) -> dict:
    return {
        "name": "counted",
        "params": {"work": treatments[0]},
        "treatment_variable": "work",
        "treatments": treatments,
        "replicates": replicates,
        "stages": [
            {
                "name": "loop",
                "kind": "measure",
                "cmd": loop_command(),
                "counters": ["instructions"],
                **stage,
            }
        ],
        "metrics": {"instructions": {"primary": True}},
    }


def busy_loops() -> list[subprocess.Popen]:
    """One busy loop per CPU: the loaded machine of the issue."""
    return [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 1)
    ]


@needs_valgrind
def test_a_counted_session_decides_a_one_percent_change_at_three_blocks_on_a_loaded_machine(
    project,
):
    """Three treatments in one run: the sum (250000), the same sum written differently (an
    A/A pair: '0250000' is the same work) and +1% of its range; 3 blocks (the counters' t
    rule has no 2/2^n floor: issue 35); the machine busy on every core throughout. A rerun
    draws other hash seeds, and ``--bench-hash-seeds`` replays the first run's."""
    project.bench(counted_bench(["250000", "0250000", "252500"], replicates=3))
    burners = busy_loops()
    try:
        result = project.run("bench.yaml", "-rw", subprocess=True)
        rerun = project.run("bench.yaml", subprocess=True)
        base = str(project.results(0)["hash_seed_base"])
        replay = project.run(
            "bench.yaml", "--bench-hash-seeds", base, "-k", "rep0", subprocess=True
        )
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()
    assert result.ret == 0, result.stdout.str()
    assert "UndecidableReplicatesWarning" not in result.stdout.str()  # counters decide at 3
    assert rerun.ret == 0, rerun.stdout.str()
    results, again = project.results(0), project.results(1)
    seeds = {t["hash_seed"] for t in results["trials"]}
    assert seeds.isdisjoint({t["hash_seed"] for t in again["trials"]})  # other layouts
    assert again["hash_seed_base"] != results["hash_seed_base"]
    replayed = project.results(2)
    assert replayed["hash_seed_base"] == results["hash_seed_base"], replay.stdout.str()
    first_block = {t["treatment"]: t for t in results["trials"] if t["replicate"] == 0}
    floor = NOISE_FLOORS["cachegrind"]
    for trial in replayed["trials"]:  # the same seeds: the same counts but for the run's paths
        if trial["status"] == "passed":
            first = first_block[trial["treatment"]]
            assert trial["hash_seed"] == first["hash_seed"]
            ratio = trial["metrics"]["instructions"] / first["metrics"]["instructions"]
            assert abs(ratio - 1) < floor / 2, (trial["metrics"], first["metrics"])
    report = (project.runs()[0] / "report.md").read_text()
    assert "Across Python hash seeds (3 distinct, one per block" in report
    assert f"--bench-hash-seeds {results['hash_seed_base']}" in report
    trials = [t for t in results["trials"] if t["status"] == "passed"]
    assert len(trials) == 9
    control = [t["metrics"]["instructions"] for t in trials if t["treatment"] == "250000"]
    assert statistics.stdev(control) / statistics.mean(control) < 0.005
    for trial in trials:
        assert trial["counted_by"] == f"cachegrind {counters.backend().version}"
        assert set(trial["distorted"]) == {"wall_s", "cpu_s", "peak_rss_mb"}
        assert set(trial["metrics"]) == {"instructions"}  # distorted timings are no metric
        assert trial["wall_s"] > 0  # still recorded, apart from the metrics
        expected = hash_seed(results["hash_seed_base"], trial["replicate"])
        assert trial["hash_seed"] == str(expected)  # one per block, the run's own
        assert not (Path(trial["logs"]) / "counters").exists()  # the backend's files removed
    verdicts = results["verdicts"]["instructions"]
    assert verdicts["0250000"]["verdict"] == "no_change"
    assert verdicts["0250000"]["reason"].startswith("within the noise threshold 0.20%")
    assert verdicts["252500"]["verdict"] == "regressed"
    assert verdicts["252500"]["test"].startswith("paired t on log ratios")
    config = yaml.safe_load((project.runs()[-1] / "config.yaml").read_text())
    assert config["fingerprint"]["env"]["counter_backend"] == counters.backend().label


def test_counters_without_a_backend_are_a_gate_one_error_naming_the_fix(project):
    """PATH without valgrind or perf: the session refuses before running anything."""
    project.bench(counted_bench(["20000", "20200"], replicates=7))
    env = {**os.environ, "PATH": str(project.path / "no-tools-here")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--bench", "-p", "no:randomly", "bench.yaml"],
        cwd=project.path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "stages (loop).counters" in done.stdout
    assert "no counting backend is available" in done.stdout
    assert "apt-get install -y valgrind" in done.stdout
    assert not project.runs()  # nothing ran, nothing recorded


def test_counters_are_measure_stage_metrics_with_a_calibrated_noise_band():
    config = BenchmarkConfig.model_validate(counted_bench(["1", "2"], replicates=7))
    assert config.metrics["instructions"].noise_threshold == COUNTER_NOISE_THRESHOLD < 0.01
    explicit = counted_bench(["1", "2"], replicates=7)
    explicit["metrics"]["instructions"]["noise_threshold"] = "1%"
    assert BenchmarkConfig.model_validate(explicit).metrics["instructions"].noise_threshold == 0.01
    for stage, message in (
        ({"kind": "prep", "produces": ["x"]}, "counted on a measure stage only"),
        ({"counters": [], "metrics_from": {"fields": ["instructions"]}}, "add counters:"),
        ({"counters": ["cycles"]}, "'instructions'"),
    ):
        document = counted_bench(["1", "2"], replicates=7)
        document["stages"][0].update(stage)
        with pytest.raises(ValueError, match=message):
            BenchmarkConfig.model_validate(document)


@needs_valgrind
def test_a_timing_only_counted_stages_report_is_refused_at_gate_one(tmp_path):
    document = counted_bench(["1", "2"], replicates=7)
    document["metrics"]["wall_s"] = {"direction": "lower"}
    config = BenchmarkConfig.model_validate(document)
    with pytest.raises(ConfigError) as caught:
        gate_one(config, tmp_path / "bench.yaml", tuning=False, home=None)
    assert "metrics.wall_s" in str(caught.value)
    assert "distorts it" in str(caught.value)
    assert "a stage without counters:" in str(caught.value)


def test_counts_of_different_backends_are_never_compared():
    cachegrind = {"env": {"python": "3.11.7", "counter_backend": "cachegrind 3.19.0"}}
    perf = {"env": {"python": "3.11.7", "counter_backend": "perf 6.1.76"}}
    uncounted = {"env": {"python": "3.11.7"}}
    assert compare_fingerprints(cachegrind, perf).blocking == [
        "env.counter_backend: cachegrind 3.19.0 -> perf 6.1.76"
    ]
    assert not compare_fingerprints(cachegrind, uncounted).comparable
    newer = {"env": {"python": "3.11.7", "counter_backend": "cachegrind 3.22.0"}}
    assert not compare_fingerprints(cachegrind, newer).comparable


@needs_valgrind
def test_the_deadline_and_the_memory_guard_hold_under_the_backend(tmp_path):
    """Run straight through the stage runner: a counted stage past its timeout is stopped, and
    one past its memory ceiling is stopped by the guard; neither leaves counts or files."""
    late = run_stage(
        StageInvocation(
            "late",
            "sleep 30",
            cwd=tmp_path,
            env=dict(os.environ),
            log_dir=tmp_path / "late",
            timeout_s=2,
            counters=["instructions"],
        )
    )
    assert late.timed_out and late.counts == {} and late.count_error is None
    assert not (tmp_path / "late" / "counters").exists()
    big = run_stage(
        StageInvocation(
            "big",
            f"{PYTHON} -S -c 'import time; x = bytearray(400 << 20); time.sleep(30)'",
            cwd=tmp_path,
            env=dict(os.environ),
            log_dir=tmp_path / "big",
            timeout_s=120,
            mem_ceiling_mb=150,
            counters=["instructions"],
        )
    )
    assert [event["kind"] for event in big.guard_events] == ["memory"]
    assert not big.timed_out and big.counts == {}
    assert not (tmp_path / "big" / "counters").exists()


def fake_perf(folder: Path) -> Path:
    """A test double of ``perf``: ``stat -x, -e EVENTS -o FILE -- CMD...`` runs CMD and writes
    perf's CSV with a fixed count of each event (what this machine's kernel cannot count)."""
    tools = folder / "fake-perf-test-double"
    tools.mkdir()
    script = tools / "perf"
    script.write_text(
        textwrap.dedent(
            """\
            #!/bin/sh
            if [ "$1" = --version ]; then echo "perf version 0.0-test-double"; exit 0; fi
            shift  # stat
            while [ "$1" != -- ]; do
              case "$1" in -e) events=$2; shift 2;; -o) out=$2; shift 2;; *) shift;; esac
            done
            shift
            "$@"; code=$?
            echo "# started on a test double" > "$out"
            for event in $(echo "$events" | tr , ' '); do
              echo "123456789,,$event,1000,100.00,," >> "$out"
            done
            exit $code
            """
        )
    )
    script.chmod(0o755)
    return tools


def test_perf_is_chosen_where_a_pmu_is_exposed_and_its_counts_are_read(tmp_path):
    tools = fake_perf(tmp_path)
    pmu = tmp_path / "devices" / "cpu"
    assert counters.detect(pmu=pmu, path=str(tools)) is None  # no PMU, no valgrind on this path
    pmu.mkdir(parents=True)
    found = counters.detect(pmu=pmu, path=str(tools))
    assert found is not None and found.label == "perf 0.0-test-double"
    assert found.distorts == ("wall_s", "cpu_s")
    counting = counters.Counting(found, ["instructions"], tmp_path / "log" / "counters")
    done = subprocess.run(
        ["/bin/sh", "-c", counting.command("echo 'it ran; $HOME stays quoted' > out.txt")],
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0
    assert (tmp_path / "out.txt").read_text() == "it ran; $HOME stays quoted\n"
    assert counting.read() == {"instructions": 123456789}
    assert not (tmp_path / "log" / "counters").exists()


def test_a_count_the_kernel_refused_is_an_error_naming_the_file(tmp_path):
    tools = fake_perf(tmp_path)
    (tmp_path / "cpu").mkdir()
    found = counters.detect(pmu=tmp_path / "cpu", path=str(tools))
    assert found is not None
    counting = counters.Counting(found, ["instructions"], tmp_path / "counters")
    counting.command("true")
    (tmp_path / "counters" / "perf.csv").write_text("<not counted>,,instructions:u,0,0.00,,\n")
    with pytest.raises(Exception, match="perf did not count instructions:u .*perf.csv"):
        counting.read()


@needs_pmu
def test_perf_counts_a_loop_where_the_kernel_exposes_a_pmu(tmp_path):
    found = counters.detect()
    assert found is not None and found.name == "perf"
    run = run_stage(
        StageInvocation(
            "loop",
            f"{PYTHON} -S -c '{LOOP}' 20000",
            cwd=tmp_path,
            env=dict(os.environ),
            log_dir=tmp_path / "log",
            counters=["instructions"],
        )
    )
    assert run.exit_code == 0 and run.counts["instructions"] > 1_000_000
