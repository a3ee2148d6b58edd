"""The engine end to end with real subprocesses and files: stages, quoting, cache, metrics,
effective params, interruption and the hooks."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from benchhelpers import BenchProject, simple_bench


def prep_runs(project: BenchProject) -> int:
    counter = project.path / "prep_runs.txt"
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_trials_run_interleaved_and_are_recorded(project: BenchProject) -> None:
    project.bench(simple_bench())
    result = project.run("-v")
    assert result.ret == pytest.ExitCode.OK
    record = project.results()
    assert [(t["id"], t["position"]) for t in record["trials"]] == [
        ("measure[mode=a-rep0]", 0),  # the order inside blocks alternates: A B, then B A
        ("measure[mode=b-rep0]", 1),
        ("measure[mode=b-rep1]", 0),
        ("measure[mode=a-rep1]", 1),
    ]
    assert record["state"] == "complete" and record["tag"] == "EXPLORATORY"
    assert record["treatment_variable"] == "mode" and record["control"] == "a"
    trial = record["trials"][0]
    assert trial["metrics"]["score"] == 6.0
    assert trial["exit_code"] == 0 and trial["started"] < trial["ended"]
    assert {"wall_s", "cpu_s", "peak_rss_mb"} <= set(trial["metrics"])
    assert record["summary"]["score"]["b"]["ratio_to_control"] == 1.0
    assert Path(trial["stdout"]).read_text().startswith("score=6")
    run_dir = project.runs()[-1]
    frozen = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert frozen["config"]["params"] == {"mode": "a", "size": 3}
    assert (project.home / "results_index.md").read_text().count(f"[{run_dir.name}]") == 1
    assert "benchmark summary" in result.stdout.str()


def test_prep_shared_by_treatments_runs_once_and_not_at_all_next_session(
    project: BenchProject,
) -> None:
    project.bench(simple_bench())
    assert project.run().ret == 0
    assert prep_runs(project) == 1  # build does not use {mode}: one signature for both
    assert project.run().ret == 0
    assert prep_runs(project) == 1
    assert [p["action"] for p in project.results()["preps"]] == ["reused"]


def test_setup_show_lists_each_prep_once(project: BenchProject) -> None:
    project.bench(simple_bench())
    result = project.run("--setup-show")
    assert result.stdout.str().count("SETUP    S bench_prep_build_") == 1


def test_cache_invalidated_by_a_param_change(project: BenchProject) -> None:
    project.bench(simple_bench())
    project.run()
    project.run("--bench-set", "size=4")
    assert prep_runs(project) == 2
    assert project.results()["trials"][0]["metrics"]["score"] == 8.0


def test_cache_invalidated_by_an_input_file_change(project: BenchProject) -> None:
    project.write("gen.sh", "echo v1\n")
    document = simple_bench()
    document["stages"][0]["inputs"] = ["gen.sh"]
    project.bench(document)
    project.run()
    project.run()
    assert prep_runs(project) == 1
    project.write("gen.sh", "echo v2\n")
    project.run()
    assert prep_runs(project) == 2


def test_corrupted_cache_entry_is_rebuilt_not_used(project: BenchProject) -> None:
    project.bench(simple_bench())
    project.run()
    (artifact,) = (project.home / "cache").glob("*/data")
    artifact.write_text("999\n")  # corrupt the cached artifact
    assert project.run().ret == 0
    assert prep_runs(project) == 2
    record = project.results()
    assert record["preps"][0]["action"] == "built"
    assert "does not match its recorded hash" in record["preps"][0]["rebuild_reason"]
    assert artifact.read_text() == "3\n"
    assert any("was rebuilt" in c for c in record["caveats"])


def test_treatment_dependent_prep_builds_per_treatment(project: BenchProject) -> None:
    document = simple_bench()
    document["stages"][0]["cmd"] = "echo {mode} > {data}; echo built >> prep_runs.txt"
    document["stages"][1]["cmd"] = "echo score=$(wc -c < {data})"
    project.bench(document)
    assert project.run().ret == 0
    assert prep_runs(project) == 2


def test_hostile_treatment_value_is_passed_as_data(project: BenchProject) -> None:
    hostile = "x; touch pwned1 $(touch pwned2) `touch pwned3` ' \" && touch pwned4"
    document = simple_bench(params={"mode": "a", "size": 3}, treatments=["a", hostile])
    document["stages"][1]["cmd"] = "printf '%s\\n' {mode} >> seen.txt; echo score=1"
    project.bench(document)
    assert project.run().ret == 0
    assert not list(project.path.glob("pwned*"))
    assert (project.path / "seen.txt").read_text().splitlines() == ["a", hostile, hostile, "a"]
    assert [t["treatment"] for t in project.results()["trials"]] == ["a", hostile, hostile, "a"]


def test_crashing_stage_fails_the_trial_with_its_stderr(project: BenchProject) -> None:
    document = simple_bench()
    document["stages"][1]["cmd"] = "echo {mode}; echo 'disk on fire' >&2; exit 3"
    project.bench(document)
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = result.stdout.str()
    assert "stage 'measure' exited with code 3" in text and "disk on fire" in text
    trial = project.results()["trials"][0]
    assert trial["status"] == "failed" and trial["exit_code"] == 3
    assert "disk on fire" in trial["reason"]


def test_failing_prep_fails_its_trials_and_runs_once(project: BenchProject) -> None:
    document = simple_bench()
    document["stages"][0]["cmd"] = "echo built >> prep_runs.txt; echo nope >&2; exit 1"
    project.bench(document)
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert prep_runs(project) == 1
    statuses = {t["status"] for t in project.results()["trials"]}
    assert statuses == {"failed"}
    assert "stage 'build' exited with code 1" in result.stdout.str()


def test_prep_that_does_not_create_its_artifact_fails(project: BenchProject) -> None:
    document = simple_bench()
    document["stages"][0]["cmd"] = "true"
    project.bench(document)
    assert project.run().ret == pytest.ExitCode.TESTS_FAILED
    assert "did not create its artifact(s) 'data'" in project.results()["trials"][0]["reason"]


@pytest.mark.parametrize(
    "output, message",
    [
        ("echo score=fast", "metric 'score' on stdout is 'fast', not a number"),
        ("echo other=1", "metric 'score' was not reported on stdout"),
        ("echo score=nan", "not a finite number"),
    ],
)
def test_bad_metric_fails_loudly(project: BenchProject, output: str, message: str) -> None:
    document = simple_bench()
    document["stages"][1]["cmd"] = f"echo {{mode}} >/dev/null; {output}"
    project.bench(document)
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert message in result.stdout.str()
    trial = project.results()["trials"][0]
    assert trial["status"] == "failed" and "score" not in trial["metrics"]


def test_metrics_from_json_line_and_file(project: BenchProject) -> None:
    document = simple_bench()
    document["stages"][1]["cmd"] = (
        "echo {mode} >/dev/null; echo '{{\"score\": 2.5}}'; echo 'lat: 4' > {out}/m.txt"
    )
    document["stages"][1]["metrics_from"] = {"stdout": True, "fields": ["score"]}
    project.bench(document)
    assert project.run().ret == 0
    assert project.results()["trials"][0]["metrics"]["score"] == 2.5
    document["stages"][1]["metrics_from"] = {"file": "{out}/m.txt", "fields": ["lat"]}
    document["metrics"] = {"lat": {"direction": "lower"}}
    project.bench(document)
    assert project.run().ret == 0
    assert project.results()["trials"][0]["metrics"]["lat"] == 4.0


def test_exact_metrics_from_a_file_keep_every_digit_and_their_text(project: BenchProject) -> None:
    document = simple_bench()
    document["stages"][1]["cmd"] = (
        'echo {mode} >/dev/null; printf \'{{"score": 6, "h": 123456789012345678901234567890, '
        '"tag": "0x1f"}}\' > {out}/m.json'
    )
    document["stages"][1]["metrics_from"] = {
        "file": "{out}/m.json",
        "fields": ["score", "h", "tag"],
    }
    document["metrics"].update(h={"direction": "equal"}, tag={"direction": "equal"})
    project.bench(document)
    assert project.run(subprocess=True).ret == 0  # its own process: the identity loads numpy
    record = project.results()
    metrics = record["trials"][0]["metrics"]
    assert metrics["h"] == 123456789012345678901234567890 and metrics["tag"] == "0x1f"
    assert metrics["score"] == 6.0 and type(metrics["score"]) is float
    assert record["summary"]["tag"]["b"] == {
        "n": 2,
        "distinct": 1,
        "values": [{"value": "0x1f", "count": 2}],
    }
    assert record["verdicts"]["h"]["b"]["verdict"] == "no_change"


def test_effective_param_differing_from_declared_is_not_comparable(project: BenchProject) -> None:
    document = simple_bench()
    document["stages"][1]["cmd"] = (
        "echo {mode} >/dev/null; echo BENCH_EFFECTIVE mode=a; echo score=1"
    )
    project.bench(document)
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    trials = project.results()["trials"]  # run as a b, then b a
    assert [(t["treatment"], t["status"]) for t in trials] == [
        ("a", "passed"),
        ("b", "not_comparable"),
        ("b", "not_comparable"),
        ("a", "passed"),
    ]
    assert "mode: declared 'b', effective 'a'" in trials[1]["reason"]


def test_effective_json_file_is_read(project: BenchProject) -> None:
    document = simple_bench()
    document["stages"][1]["cmd"] = (
        "echo '{{\"size\": 3.0}}' > {out}/effective.json; echo {mode} > /dev/null; echo score=1"
    )
    project.bench(document)
    assert project.run().ret == 0
    assert project.results()["trials"][0]["effective"] == {"size": "3.0"}


def test_conftest_hookimpl_receives_the_run_record(project: BenchProject) -> None:
    project.bench(simple_bench())
    project.write(
        "conftest.py",
        """
        import json
        def pytest_bench_trial_finished(trial, run):
            with open("exported.jsonl", "a") as f:
                f.write(json.dumps({"id": trial.id, "status": trial.status}) + "\\n")
        def pytest_bench_run_finished(run):
            with open("exported_run.json", "w") as f:
                json.dump({
                    "state": run.state,
                    "trials": len(run.trials),
                    "n": run.stats("score")["a"]["n"],
                    "verdicts": {
                        m: {label: v.verdict for label, v in per.items()}
                        for m, per in run.verdicts.items()
                    },
                }, f)
    """,
    )
    assert project.run().ret == 0
    lines = (project.path / "exported.jsonl").read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[0])["status"] == "passed"
    exported = json.loads((project.path / "exported_run.json").read_text())
    assert exported == {
        "state": "complete",
        "trials": 4,
        "n": 2,
        "verdicts": {
            m: {label: v["verdict"] for label, v in per.items()}
            for m, per in project.results()["verdicts"].items()
        },
    }  # the record the hooks see is the one written


def test_budget_of_trials_stops_the_run_cleanly(project: BenchProject) -> None:
    project.bench(simple_bench(budget={"trials": 3}))
    result = project.run()
    assert result.ret == pytest.ExitCode.OK
    record = project.results()
    assert [t["status"] for t in record["trials"]] == ["passed"] * 3 + ["not_run"]
    assert "budget.trials spent" in record["trials"][-1]["reason"]
    assert record["state"] == "halted"


def test_without_bench_nothing_is_collected(project: BenchProject) -> None:
    project.bench(simple_bench())
    project.write("test_plain.py", "def test_ok():\n    assert True\n")
    result = project.pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert not project.home.exists()
    disabled = project.pytester.runpytest_subprocess("-p", "no:benchmark_agent")
    disabled.assert_outcomes(passed=1)


def _start_session(project: BenchProject, home: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "--bench",
            "bench.yaml",
            "-p",
            "no:cacheprovider",
            "--bench-home",
            str(home),
        ],
        cwd=project.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _wait_for_trials(home: Path, count: int) -> Path:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for journal in home.glob("runs/*/trials.jsonl"):
            if len(journal.read_text().splitlines()) >= count:
                return journal.parent
        time.sleep(0.05)
    raise AssertionError("the session never finished its first trials")


def slow_bench() -> dict:
    document = simple_bench(replicates=50)
    document["stages"][1]["cmd"] = "echo {mode} > /dev/null; sleep 0.2; echo score=1"
    return document


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_session_keeps_its_samples(project: BenchProject, signum: int) -> None:
    project.bench(slow_bench())
    home = project.path / "home"
    proc = _start_session(project, home)
    run_dir = _wait_for_trials(home, 2)
    os.kill(proc.pid, signum)
    output = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, output
    from pytest_benchmark_agent.records.reader import load_results

    record = load_results(run_dir)
    statuses = [t["status"] for t in record["trials"]]
    assert record["state"] == "interrupted"
    assert statuses.count("passed") >= 2
    assert "not_run" in statuses and len(statuses) == 100
    assert (run_dir / "report.md").exists()
    assert not _stage_processes_left(project.path)


def test_killed_session_keeps_every_finished_trial_on_disk(project: BenchProject) -> None:
    project.bench(slow_bench())
    home = project.path / "home"
    proc = _start_session(project, home)
    run_dir = _wait_for_trials(home, 3)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    from pytest_benchmark_agent.records.reader import load_results

    record = load_results(run_dir)
    journal = (run_dir / "trials.jsonl").read_text().splitlines()
    assert len(record["trials"]) == len(journal) >= 3
    assert all(t["status"] == "passed" and "score" in t["metrics"] for t in record["trials"])
    assert record["state"] == "running"  # nobody could say otherwise; the journal holds the truth


def _stage_processes_left(folder: Path) -> bool:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return "sleep 0.2" in out and str(folder) in out


def test_stage_over_its_memory_ceiling_is_stopped_and_recorded(project: BenchProject) -> None:
    project.write(
        "hog.py",
        """
        import sys, time
        blocks = []
        if sys.argv[1] == "b":
            for _ in range(200):            # 200 x 8 MiB, touched: far past the 100 MiB ceiling
                blocks.append(bytearray(8 << 20))
                time.sleep(0.005)
        print("score=1")
    """,
    )
    document = simple_bench()
    document["stages"][1].update(cmd=f"{sys.executable} hog.py {{mode}}", mem_mb=100)
    project.bench(document)
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    trials = project.results()["trials"]  # run as a b, then b a
    assert [(t["treatment"], t["status"]) for t in trials] == [
        ("a", "passed"),
        ("b", "guard:memory"),
        ("b", "guard:memory"),
        ("a", "passed"),
    ]
    event = trials[1]["guard_events"][0]
    assert event["kind"] == "memory" and event["ceiling_mb"] == 100
    assert event["series"] and event["stage"] == "measure"
    assert "stopped by the memory guard" in trials[1]["reason"]
    assert trials[0]["metrics"]["score"] == 1.0 and trials[0]["peak_rss_mb"] < 100


def test_preflight_refuses_a_benchmark_that_cannot_fit(project: BenchProject) -> None:
    project.bench(simple_bench(resources={"mem_mb": 10_000_000}))
    result = project.run("--collect-only")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    text = result.stdout.str()
    assert "resources: preflight: the declared resources do not fit this run" in text
    assert "MiB" in text


def test_tuning_round_runs_each_point_as_a_treatment(project: BenchProject) -> None:
    document = simple_bench(
        search_space={"size": [3, 5]}, objective={"metric": "score", "direction": "higher"}
    )
    del document["treatment_variable"], document["treatments"]
    project.bench(document)
    project.write("round.json", json.dumps({"points": [{"size": 3}, {"size": 5}]}))
    assert project.run("--bench-round", "round.json").ret == 0
    record = project.results()
    assert record["treatment_variable"] == "point" and record["control"] == "size=3"
    assert record["summary"]["score"]["size=5"]["median"] == 10.0
    assert [t["id"] for t in record["trials"]][:2] == [
        "measure[point=size=3-rep0]",
        "measure[point=size=5-rep0]",
    ]


def test_stage_start_and_progress_are_published(project: BenchProject) -> None:
    document = simple_bench(replicates=1)
    document["stages"][1]["cmd"] = "sleep 0.3; echo score=1 # {mode}"
    project.bench(document)
    project.write(
        "conftest.py",
        """
        seen = []
        def pytest_bench_stage_started(run, stage, trial_id):
            seen.append(("start", stage, trial_id))
        def pytest_bench_stage_progress(run, stage, trial_id, elapsed_s, peak_rss_mb):
            seen.append(("progress", stage, trial_id))
        def pytest_bench_run_finished(run):
            import json
            open("seen.json", "w").write(json.dumps(seen))
    """,
    )
    assert project.run("--bench-progress-every", "0.05").ret == 0
    seen = json.loads((project.path / "seen.json").read_text())
    assert ["start", "build", None] in seen
    assert ["start", "measure", "measure[mode=a-rep0]"] in seen
    assert ["progress", "measure", "measure[mode=b-rep0]"] in seen


def test_collected_objects_stay_frozen_until_pytests_exit_collections_are_done(
    project: BenchProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What collection made is out of the collector's scans through the run and pytest's
    ``gc.collect()`` calls at exit (~20 ms each otherwise); the host process is left unfrozen."""
    import _pytest.unraisableexception as unraisable

    frozen_at_exit: list[int] = []
    collect_harder = unraisable.gc_collect_harder

    def spy(iterations: int) -> None:
        frozen_at_exit.append(gc.get_freeze_count())
        collect_harder(iterations)

    monkeypatch.setattr(unraisable, "gc_collect_harder", spy)
    project.bench(simple_bench())
    project.write(
        "conftest.py",
        """
        import gc
        def pytest_bench_run_finished(run):
            open("frozen.txt", "w").write(str(gc.get_freeze_count()))
    """,
    )
    assert project.run().ret == 0
    assert int((project.path / "frozen.txt").read_text()) > 0
    assert frozen_at_exit and frozen_at_exit[0] > 0
    assert gc.get_freeze_count() == 0


def test_the_interpreters_exit_skips_collecting_what_is_left(project: BenchProject) -> None:
    """At exit everything left is frozen (the interpreter's own collections then walk nothing;
    an atexit hook registered before the session's runs after its one)."""
    project.bench(simple_bench(replicates=1))
    project.write(
        "conftest.py",
        """
        import atexit, gc
        atexit.register(lambda: open("at_exit.txt", "w").write(str(gc.get_freeze_count())))
    """,
    )
    assert project.run(subprocess=True).ret == 0
    assert int((project.path / "at_exit.txt").read_text()) > 0


def test_editing_the_benchmark_file_leaves_the_code_fingerprint_alone(
    project: BenchProject,
) -> None:
    """With no ``code:`` outside git the files the stages name in ``inputs:`` are the code,
    never the benchmark file: its content is the frozen config, compared on its own."""
    document = simple_bench(replicates=1)
    document["stages"][0]["cmd"] = "echo {size} > {data}"  # nothing written beside the code
    document["stages"][1]["inputs"] = ["helper.sh"]
    project.write("helper.sh", "true\n")
    project.bench(document)
    assert project.run().ret == 0
    project.bench({**document, "hypothesis": "reworded"})
    assert project.run().ret == 0
    project.write("helper.sh", "false\n")
    assert project.run().ret == 0
    first, second, third = (
        yaml.safe_load((run / "config.yaml").read_text())["fingerprint"]["code"]
        for run in project.runs()
    )
    assert first == second != third


def test_a_plain_session_loads_no_module_it_does_not_use(project: BenchProject) -> None:
    """A fresh ``pytest --bench`` process with no GPU, no accepted deviation and no recipe
    imports neither pynvml (no NVIDIA device node), planning (no deviations folder) nor the
    domain layer (a command benchmark)."""
    project.bench(simple_bench(replicates=1))
    project.write(
        "conftest.py",
        """
        import json, sys
        def pytest_bench_run_finished(run):
            heavy = ("pynvml", "pytest_benchmark_agent.judge.review",
                     "pytest_benchmark_agent.domains.api")
            open("loaded.json", "w").write(json.dumps([m for m in heavy if m in sys.modules]))
    """,
    )
    assert project.run(subprocess=True).ret == 0
    loaded = json.loads((project.path / "loaded.json").read_text())
    no_node = sys.platform.startswith("linux") and not any(
        os.path.exists(node) for node in ("/dev/nvidiactl", "/dev/dxg")
    )
    assert loaded == ([] if no_node else ["pynvml"])
