"""GPU stages through the engine, on the NVML test double (no GPU here): pinning, the VRAM
guard killing a real stage, CUDA out-of-memory recognition, GPU-hours, cost and GPU budgets.

Each session loads ``FakeNvml`` from ``tests/nvml_double.py`` through a conftest, so the
engine's real NVML code path runs against scripted devices and real stage pids.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from benchhelpers import BenchProject, simple_bench

TESTS = Path(__file__).resolve().parent

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
import psutil
from nvml_double import FakeDevice, FakeNvml
from pytest_benchmark_agent.guards import gpu as nvml


class AttachingNvml(FakeNvml):
    '''Gives every live process whose command line says "vram_hog" 100 MB of VRAM on
    device 1, growing by 200 MB per sample: a stage that runs away on its GPU.'''

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle):
        if handle is self.devices[1]:
            for proc in psutil.process_iter(["cmdline"]):
                cmdline = " ".join(proc.info["cmdline"] or [])
                if "vram_hog" in cmdline and proc.pid not in handle.compute:
                    self.add_process(1, proc.pid, 100, step_mb=200)
        return super().nvmlDeviceGetComputeRunningProcesses_v2(handle)


_scope = nvml.use_backend(AttachingNvml([FakeDevice(base_used_mb=30000), FakeDevice()]))


def pytest_configure(config):
    _scope.__enter__()


def pytest_unconfigure(config):
    _scope.__exit__(None, None, None)
"""


def gpu_bench(**overrides) -> dict:
    document = simple_bench(resources={"gpus": 1, "price_per_gpu_hour": 3600.0}, **overrides)
    document["stages"][1]["cmd"] = (
        "echo visible=$CUDA_VISIBLE_DEVICES {mode}; sleep 0.05; echo score=1"
    )
    document["stages"][0]["gpus"] = 0
    document["stages"][0]["cmd"] = (
        'echo "[$CUDA_VISIBLE_DEVICES]" > prep_saw.txt; echo {size} > {data}'
    )
    return document


def test_gpu_stage_is_pinned_to_the_least_used_device_and_accounted(project: BenchProject) -> None:
    project.write("conftest.py", CONFTEST)
    project.bench(gpu_bench())
    result = project.run(subprocess=True)
    assert result.ret == 0, result.stdout.str()
    trial = project.results()["trials"][0]
    assert Path(trial["stdout"]).read_text().startswith("visible=1")  # device 0 is busier
    assert trial["gpus"] == [1]
    assert trial["gpu_hours"] == pytest.approx(trial["wall_s"] / 3600, rel=1e-3)
    assert trial["cost_usd"] == pytest.approx(trial["gpu_hours"] * 3600.0)
    assert (project.path / "prep_saw.txt").read_text() == "[]\n"  # gpus: 0 hides every GPU
    assert project.results()["spent"]["gpu_hours"] > 0


def test_vram_overrun_is_stopped_by_the_guard(project: BenchProject) -> None:
    project.write("conftest.py", CONFTEST)
    document = gpu_bench(replicates=1)
    document["resources"]["vram_mb"] = 500
    document["stages"][1]["cmd"] = (
        "if [ {mode} = b ]; then sh -c 'sleep 5 # vram_hog'; fi; echo score=1"
    )
    project.bench(document)
    result = project.run(subprocess=True)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    trials = project.results()["trials"]
    assert [t["status"] for t in trials] == ["passed", "guard:vram"]
    event = next(e for e in trials[1]["guard_events"] if e["kind"] == "vram")
    assert event["ceiling_mb"] == 500 and event["peak_mb"] > 500
    assert "stopped by the vram guard" in trials[1]["reason"]
    assert trials[1]["wall_s"] < 5  # killed, not waited for


def test_cuda_out_of_memory_is_reported_as_such(project: BenchProject) -> None:
    project.write("conftest.py", CONFTEST)
    document = gpu_bench(replicates=1)
    document["stages"][1]["cmd"] = (
        "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to "
        "allocate 2.00 GiB' >&2; exit 1 # {mode}"
    )
    project.bench(document)
    project.run(subprocess=True)
    reason = project.results()["trials"][0]["reason"]
    assert "ran out of GPU memory (CUDA out of memory)" in reason
    assert "Tried to allocate 2.00 GiB" in reason


def test_gpu_hours_budget_stops_the_session(project: BenchProject) -> None:
    project.write("conftest.py", CONFTEST)
    project.bench(gpu_bench(budget={"gpu_hours": 1e-9}))
    assert project.run(subprocess=True).ret == 0
    record = project.results()
    assert [t["status"] for t in record["trials"]] == ["passed"] + ["not_run"] * 3
    assert "budget.gpu_hours spent" in record["trials"][-1]["reason"]


def test_gpu_stage_without_nvml_fails_at_preflight(project: BenchProject) -> None:
    project.bench(gpu_bench())
    result = project.run("--collect-only")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "resources.gpus: asks for GPUs but NVML does not answer" in result.stdout.str()
