"""Class 7 of issue 19: a full disk stops the session cleanly, loses no finished trial and never
leaves a partial prep artifact to be reused.

The data home is a real, small tmpfs mounted for the test (skipped, with the reason, where this
machine does not let the test mount one). A stage fills it the ways a disk fills in practice:
another writer takes the space between trials, the stage's own output is larger than the disk,
and a prep writes an artifact that does not fit but ignores the failed write.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from benchhelpers import BenchProject
from hostilehelpers import agent, assert_clean_exit, assert_trials_on_disk, tiny_bench

from pytest_benchmark_agent.records.reader import load_results

ENOSPC_TEXT = "No space left on device"


def mount_tmpfs(folder: Path, size: str, remount: bool = False) -> None:
    options = f"remount,size={size}" if remount else f"size={size}"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")


@pytest.fixture
def small_home(project: BenchProject):
    """The project's data home on a 4 MiB tmpfs, unmounted afterwards."""
    project.home.mkdir()
    mount_tmpfs(project.home, "4m")
    yield project.home
    subprocess.run(["umount", "-l", str(project.home)], check=False)


def with_measure(command: str, **overrides: object) -> dict:
    document = tiny_bench(**overrides)
    document["stages"][1]["cmd"] = command
    return document


def test_a_disk_filled_between_trials_stops_the_session_and_keeps_the_journal(
    project: BenchProject, small_home: Path
) -> None:
    """The second trial's stage fills the disk, so its journal line cannot be written (each
    line is longer than a page, ``: <8 KiB>`` in the command, so it needs a new one)."""
    filler = small_home / "filler"
    project.bench(
        with_measure(
            f"if [ -f first.done ]; then head -c 64M /dev/zero > {filler} 2>/dev/null; fi; "
            f": {'x' * 8192}; touch first.done; echo score=1; echo mode={{mode}}",
            replicates=2,
        )
    )
    result = project.run(subprocess=True)  # its own process: gone once it ended
    text = assert_clean_exit(result, {2})
    [run_dir] = project.runs()
    assert f"could not write the records of run {run_dir.name}" in text
    assert ENOSPC_TEXT in text and str(run_dir) in text
    journalled = assert_trials_on_disk(run_dir)
    assert [t["status"] for t in journalled] == ["passed"]  # whole lines only: none torn
    assert (run_dir / "trials.jsonl").read_bytes().endswith(b"\n")

    filler.unlink()  # room again: the next verb finishes the run the full disk cut short
    history = agent(project, "history")
    assert f"{run_dir.name}  interrupted" in assert_clean_exit(history, {0})
    results = load_results(run_dir)
    assert results["state"] == "interrupted"
    assert [t["status"] for t in results["trials"]].count("passed") == 1
    assert (run_dir / "report.md").is_file() and (run_dir / "index.json").is_file()


def test_stage_output_larger_than_the_disk_fails_its_trial_naming_the_file(
    project: BenchProject, small_home: Path
) -> None:
    project.bench(with_measure("head -c 16M /dev/zero; echo; echo score=1; echo mode={mode}"))
    result = project.run()
    text = assert_clean_exit(result, {2})
    assert "the disk is full" in text
    [run_dir] = project.runs()
    results = load_results(run_dir)
    assert results["state"] == "interrupted"
    first = results["trials"][0]
    assert first["status"] == "failed"
    assert "could not keep its output" in first["reason"]
    assert "stdout.txt" in first["reason"] and ENOSPC_TEXT in first["reason"]
    assert {t["status"] for t in results["trials"][1:]} == {"not_run"}
    assert_trials_on_disk(run_dir)


def test_a_prep_artifact_cut_short_by_a_full_disk_is_never_reused(
    project: BenchProject, small_home: Path
) -> None:
    document = tiny_bench()
    document["stages"][0]["cmd"] = "head -c 16M /dev/zero > {data} 2>/dev/null; true"
    project.bench(document)
    first = project.run()
    assert_clean_exit(first, {1, 2})
    [run_dir] = project.runs()
    [prep] = load_results(run_dir)["preps"]
    assert prep["action"] == "failed" and "may have written partial artifacts" in prep["reason"]
    assert not list((small_home / "cache").glob("*/manifest.json"))

    mount_tmpfs(small_home, "64m", remount=True)
    second = project.run()
    assert_clean_exit(second, {0})
    [prep] = load_results(project.runs()[-1])["preps"]
    assert prep["action"] == "built" and prep["rebuild_reason"] == "no cache entry"
    [manifest] = (small_home / "cache").glob("*/manifest.json")
    [artifact] = json.loads(manifest.read_text())["artifacts"].values()
    assert artifact["bytes"] == 16 << 20


def test_output_a_full_disk_takes_only_part_of_fails_its_trial_with_the_disk_error(
    project: BenchProject, small_home: Path
) -> None:
    """Issue 45: with 512 KiB left, the stage's 700 KB of stdout was written in part (an
    unbuffered write said so and raised nothing), its metric line was lost, and the trial failed
    as ``metric 'score' was not reported``. It now fails with the disk's error and the file."""
    filler = small_home / "filler"
    project.bench(
        with_measure(
            f"head -c 64M /dev/zero > {filler} 2>/dev/null; truncate -s -512K {filler}; "
            "head -c 700000 /dev/zero | tr '\\0' x; echo; echo score=1; echo mode={mode}"
        )
    )
    text = assert_clean_exit(project.run(), {2})
    assert "the disk is full" in text
    [run_dir] = project.runs()
    first = load_results(run_dir)["trials"][0]
    assert first["status"] == "failed"
    assert "could not keep its output" in first["reason"]
    assert "stdout.txt" in first["reason"] and ENOSPC_TEXT in first["reason"]
    assert "was not reported" not in first["reason"]
    assert_trials_on_disk(run_dir)


def test_a_warmup_round_whose_output_a_full_disk_refused_says_so(
    project: BenchProject, small_home: Path
) -> None:
    """The first run (the warm-up round) leaves 512 KiB on the disk and prints 700 KB; the
    trial after it frees the room. The round is recorded failed with the disk's error and its
    file, where it was recorded as passed."""
    filler = small_home / "filler"
    document = with_measure(
        f"if [ -f warmed ]; then rm -f {filler}; else touch warmed; "
        f"head -c 64M /dev/zero > {filler} 2>/dev/null; truncate -s -512K {filler}; fi; "
        "head -c 700000 /dev/zero | tr '\\0' x; echo; echo score=1; echo mode={mode}",
    )
    del document["treatment_variable"], document["treatments"]
    document["stages"][1]["warmup"] = 1
    project.bench(document)
    assert_clean_exit(project.run(), {0})
    results = load_results(project.runs()[-1])
    [warmup] = results["warmups"]
    assert warmup["status"] == "failed"
    assert warmup["reason"].startswith("the warm-up round could not keep its output: ")
    assert "stdout.txt" in warmup["reason"] and ENOSPC_TEXT in warmup["reason"]
    assert [t["status"] for t in results["trials"]] == ["passed"]


def test_a_record_a_full_disk_refused_names_its_file(
    project: BenchProject, small_home: Path
) -> None:
    """The warm-up round fills the disk, so its journal line cannot be written: the trial
    fails naming ``trials.jsonl``, where the reason said ``(path unknown)`` (a failed write
    names no file)."""
    filler = small_home / "filler"
    document = with_measure(
        f"head -c 64M /dev/zero > {filler} 2>/dev/null; echo score=1; echo mode={{mode}}"
    )
    del document["treatment_variable"], document["treatments"]
    document["stages"][1]["warmup"] = 1
    project.bench(document)
    text = assert_clean_exit(project.run(), {2})
    [run_dir] = project.runs()
    assert f"could not write its records: {run_dir / 'trials.jsonl'}: {ENOSPC_TEXT}" in text
    assert "(path unknown)" not in text
