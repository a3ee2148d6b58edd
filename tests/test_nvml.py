"""The GPU layer: pinning, the VRAM guard on real processes, OOM recognition, GPU accounting.

NVML itself is played by the FakeNvml test double (tests/nvml_double.py); everything else is
real: the module's code path, the subprocesses, their pids and the kill of their group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from nvml_double import FakeDevice, FakeNvml

from pytest_benchmark_agent.guards import gpu as nvml
from pytest_benchmark_agent.guards.gpu import GpuUnavailable, VramGuard


@pytest.fixture
def four_gpus() -> FakeNvml:
    """Four devices; 1 and 3 are the least used, 3 is also the busier of the two."""
    double = FakeNvml(
        [
            FakeDevice(base_used_mb=5000),
            FakeDevice(base_used_mb=100, utilization=0),
            FakeDevice(base_used_mb=3000),
            FakeDevice(base_used_mb=100, utilization=40),
        ]
    )
    with nvml.use_backend(double):
        yield double


@pytest.fixture
def sleeper():
    """A real process in its own process group, killed and reaped after the test."""
    started: list[subprocess.Popen] = []

    def start(code: str = "import time; time.sleep(30)") -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE, text=True
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()


def kill_group(proc: subprocess.Popen):
    return lambda: os.killpg(proc.pid, signal.SIGKILL)


def test_inventory_reports_each_device(four_gpus):
    devices = nvml.gpu_inventory()
    assert [d.index for d in devices] == [0, 1, 2, 3]
    first = devices[0]
    assert first.name == "NVIDIA Fake H100 80GB HBM3"
    assert first.uuid.startswith("GPU-")
    assert first.memory_total_mb == 81559.0
    assert (first.driver_version, first.cuda_driver_version) == ("550.54.15", "12.4")
    assert nvml.nvml_unavailable_reason() is None
    assert four_gpus.inits == 0  # every nvmlInit was paired with a shutdown


def test_absent_nvml_gives_none_and_the_reason():
    with nvml.use_backend(FakeNvml(absent=True)):
        assert nvml.gpu_inventory() is None
        assert "libnvidia-ml.so.1" in nvml.nvml_unavailable_reason()


def test_pinning_picks_the_least_used_and_the_child_sees_it(four_gpus):
    env = {"PATH": os.environ["PATH"]}
    chosen, pinned = nvml.pin_devices(2, env)
    assert chosen == [1, 3]
    assert pinned["CUDA_VISIBLE_DEVICES"] == "1,3"
    assert pinned["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert "CUDA_VISIBLE_DEVICES" not in env
    seen = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"],
        env=pinned,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert seen == "1,3"


def test_utilisation_breaks_a_tie_in_memory(four_gpus):
    chosen, _ = nvml.pin_devices(1, {})
    assert chosen == [1]


def test_an_operator_restriction_limits_the_choice(four_gpus):
    uuid2 = four_gpus.devices[2].uuid
    chosen, pinned = nvml.pin_devices(2, {"CUDA_VISIBLE_DEVICES": f"0,{uuid2}"})
    assert chosen == [0, 2]
    assert pinned["CUDA_VISIBLE_DEVICES"] == "0,2"


def test_zero_gpus_hides_every_device_without_nvml():
    with nvml.use_backend(FakeNvml(absent=True)):
        chosen, pinned = nvml.pin_devices(0, {"CUDA_VISIBLE_DEVICES": "0"})
    assert chosen == []
    assert pinned["CUDA_VISIBLE_DEVICES"] == ""


def test_too_few_devices_names_the_field_and_the_fix(four_gpus):
    with pytest.raises(
        GpuUnavailable,
        match=r"resources\.gpus: 5 GPU\(s\) requested but 4 "
        r"available.*at most 4",
    ):
        nvml.pin_devices(5, {})
    with pytest.raises(
        GpuUnavailable,
        match=r"stages\[1\]\.gpus: 2 .* but 1 available.*"
        r"CUDA_VISIBLE_DEVICES='3' allows only",
    ):
        nvml.pin_devices(2, {"CUDA_VISIBLE_DEVICES": "3"}, field="stages[1].gpus")


def test_absent_nvml_fails_pinning_with_a_clear_message():
    with (
        nvml.use_backend(FakeNvml(absent=True)),
        pytest.raises(
            GpuUnavailable,
            match=r"resources\.gpus: 1 GPU\(s\) requested but NVML is not "
            r"available here \(NVML library .* set resources\.gpus: 0",
        ),
    ):
        nvml.pin_devices(1, {})


def test_vram_ceiling_larger_than_the_devices_is_refused(four_gpus):
    with pytest.raises(GpuUnavailable, match=r"resources\.vram_mb: 200000 MB exceeds"):
        nvml.pin_devices(2, {}, vram_mb=200000)


def test_negative_request_is_refused(four_gpus):
    with pytest.raises(GpuUnavailable, match="negative"):
        nvml.pin_devices(-1, {})


def test_guard_kills_a_real_process_that_overruns_its_vram(four_gpus, sleeper):
    stage = sleeper()
    four_gpus.add_process(1, stage.pid, used_mb=100, step_mb=50)
    guard = VramGuard(
        nvml.process_tree(stage.pid),
        [1],
        ceiling_mb=400,
        stage="train",
        on_breach=kill_group(stage),
        interval_s=0.01,
    ).start()
    assert stage.wait(timeout=20) == -signal.SIGKILL
    report = guard.stop()
    event = report.event
    assert event["kind"] == "vram" and event["stage"] == "train"
    assert event["ceiling_mb"] == 400 and event["devices"] == [1]
    assert event["peak_mb"] == report.peak_vram_mb > 400
    assert event["at"].endswith("Z") and event["reason"].startswith("VRAM ")
    assert max(mb for _, mb in event["series"]) == report.peak_vram_mb
    assert event["series"][-1][1] == 0  # the driver freed the killed process's memory
    assert report.n_samples >= 7 and report.attribution == "pids"
    assert four_gpus.inits == 0


def test_guard_watches_the_whole_process_tree(four_gpus, sleeper):
    parent = sleeper(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; "
        "time.sleep(30)'])\nprint(child.pid, flush=True)\ntime.sleep(30)"
    )
    grandchild = int(parent.stdout.readline())
    four_gpus.add_process(0, grandchild, used_mb=900)
    guard = VramGuard(
        nvml.process_tree(parent.pid),
        [0],
        ceiling_mb=512,
        stage="infer",
        on_breach=kill_group(parent),
        interval_s=0.01,
    ).start()
    assert parent.wait(timeout=20) == -signal.SIGKILL
    report = guard.stop()
    assert report.event["peak_mb"] == report.peak_vram_mb == 900


def test_an_older_driver_is_asked_with_the_v2_query(sleeper):
    double = FakeNvml([FakeDevice()], old_driver=True)
    stage = sleeper()
    double.add_process(0, stage.pid, used_mb=600)
    with nvml.use_backend(double):
        guard = VramGuard(
            nvml.process_tree(stage.pid),
            [0],
            ceiling_mb=0,
            stage="eval",
            on_breach=kill_group(stage),
            interval_s=0.01,
        ).start()
        report = guard.stop()
    assert report.peak_vram_mb == 600 and report.attribution == "pids"


def test_guard_under_its_ceiling_only_records(four_gpus, sleeper):
    stage = sleeper()
    four_gpus.add_process(3, stage.pid, used_mb=300)
    four_gpus.add_process(3, os.getpid(), used_mb=5000)  # a co-tenant: not the stage's
    breaches = []
    guard = VramGuard(
        nvml.process_tree(stage.pid),
        [3],
        ceiling_mb=1000,
        stage="eval",
        on_breach=lambda: breaches.append(1),
        interval_s=0.01,
    ).start()
    for _ in range(3):
        guard.sample()
    report = guard.stop()
    assert stage.poll() is None and breaches == []
    assert report.event is None and report.peak_vram_mb == 300
    assert report.n_samples >= 4


def test_zero_ceiling_records_the_peak_without_a_kill(four_gpus, sleeper):
    stage = sleeper()
    four_gpus.add_process(1, stage.pid, used_mb=70000)
    guard = VramGuard(
        nvml.process_tree(stage.pid),
        [1],
        ceiling_mb=0,
        stage="eval",
        on_breach=kill_group(stage),
        interval_s=0.01,
    ).start()
    report = guard.stop()
    assert stage.poll() is None
    assert report.event is None and report.peak_vram_mb == 70000


def test_foreign_pids_fall_back_to_the_devices_growth(four_gpus, sleeper):
    """Inside a container NVML lists host pids: the pinned device's growth is the stage's."""
    stage = sleeper()
    four_gpus.add_process(1, 4_999_999, used_mb=0, step_mb=64, foreign=True)
    guard = VramGuard(
        nvml.process_tree(stage.pid),
        [1],
        ceiling_mb=512,
        stage="train",
        on_breach=kill_group(stage),
        interval_s=0.01,
    ).start()
    assert stage.wait(timeout=20) == -signal.SIGKILL
    report = guard.stop()
    assert report.attribution == "device"
    assert report.event["peak_mb"] > 512


def test_missing_per_process_usage_falls_back_to_the_devices_growth(four_gpus, sleeper):
    stage = sleeper()
    guard = VramGuard(
        nvml.process_tree(stage.pid),
        [1],
        ceiling_mb=1024,
        stage="train",
        on_breach=kill_group(stage),
        interval_s=0.01,
    ).start()
    four_gpus.add_process(1, stage.pid, used_mb=2048, reports_usage=False)
    assert stage.wait(timeout=20) == -signal.SIGKILL
    report = guard.stop()
    assert report.attribution == "device" and report.event["peak_mb"] == 2048


def test_a_gpu_lost_mid_stage_fails_the_guard_loud(four_gpus, sleeper):
    stage = sleeper()
    guard = VramGuard(
        nvml.process_tree(stage.pid),
        [1],
        ceiling_mb=1024,
        stage="train",
        on_breach=kill_group(stage),
        interval_s=0.01,
    ).start()
    four_gpus.lost = True
    with pytest.raises(RuntimeError, match="VRAM guard for stage 'train' stopped watching"):
        guard.stop()
    assert four_gpus.inits == 0


def test_a_failing_kill_fails_the_guard_loud(four_gpus, sleeper):
    stage = sleeper()
    four_gpus.add_process(1, stage.pid, used_mb=2048)

    def cannot_kill():
        raise PermissionError("not allowed to signal the stage")

    guard = VramGuard(
        nvml.process_tree(stage.pid),
        [1],
        ceiling_mb=1024,
        stage="train",
        on_breach=cannot_kill,
        interval_s=0.01,
    ).start()
    with pytest.raises(RuntimeError, match="stopped watching: PermissionError"):
        guard.stop()


def test_guard_without_nvml_fails_loud():
    guard = VramGuard(lambda: [], [0], ceiling_mb=10, stage="train", on_breach=lambda: None)
    with (
        nvml.use_backend(FakeNvml(absent=True)),
        pytest.raises(GpuUnavailable, match="stage 'train': cannot watch its VRAM"),
    ):
        guard.start()


@pytest.mark.parametrize(
    "line",
    [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a "
        "total capacity of 79.10 GiB of which 3.06 GiB is free.",
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB (GPU 0; 15.78 GiB total)",
        "torch.cuda.OutOfMemoryError: out of memory",
        "RuntimeError: CUDA error: out of memory",
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "cudnn error: CUDNN_STATUS_ALLOC_FAILED",
        "cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 8,589,934,592 bytes",
        "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorMemoryAllocation: out of memory",
        "numba.cuda.cudadrv.driver.CudaAPIError: [2] Call to cuMemAlloc results in "
        "CUDA_ERROR_OUT_OF_MEMORY",
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
        "allocate 17179869184 bytes.",
        "XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request for 32.00MiB on device 0",
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
        "tensor with shape[1024,1024,1024]",
        "ggml_cuda_host_malloc: cudaMalloc failed: out of memory",
        "CUDA failure 2: out of memory ; GPU=0 ; hostname=node1",
    ],
)
def test_cuda_oom_is_recognised(line):
    stderr = f'Traceback (most recent call last):\n  File "train.py", line 3\n{line}\n'
    assert nvml.cuda_oom_in(stderr) == line


@pytest.mark.parametrize(
    "line",
    [
        "MemoryError",
        "Exception in thread main java.lang.OutOfMemoryError: Java heap space",
        "Out of memory: Killed process 1234 (python) total-vm:123kB",
        "grpc: RESOURCE_EXHAUSTED: too many pings",
        "fatal: Out of memory, malloc failed (tried to allocate 1024 bytes)",
    ],
)
def test_host_and_other_failures_are_not_cuda_oom(line):
    assert nvml.cuda_oom_in(f"starting\n{line}\n") is None


def test_the_last_cuda_oom_line_is_the_one_reported():
    stderr = (
        "warning: CUDA out of memory on first try, retrying smaller batch\n"
        "ok\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB\n"
    )
    assert nvml.cuda_oom_in(stderr).startswith("torch.OutOfMemoryError")


def test_gpu_hours_and_cost():
    assert nvml.gpu_hours(7200, 2) == 4.0
    assert nvml.gpu_hours(1800, 0) == 0.0
    assert nvml.cost_usd(4.0, 2.5) == 10.0
    with pytest.raises(ValueError, match="n_gpus"):
        nvml.gpu_hours(10, -1)
    with pytest.raises(ValueError, match="resources.price_per_gpu_hour"):
        nvml.cost_usd(1.0, -3)


def test_real_nvml_absence_is_explained():
    """The real pynvml backend: where no driver answers, the reason and the preflight error."""
    reason = nvml.nvml_unavailable_reason()
    if reason is None:
        pytest.skip("NVML answers on this machine; the gpu-marked test covers it")
    with pytest.raises(GpuUnavailable, match=r"resources\.gpus.*NVML is not available"):
        nvml.pin_devices(1, dict(os.environ))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="device nodes are Linux's")
def test_no_device_node_answers_without_importing_pynvml(monkeypatch, tmp_path):
    """No NVIDIA device node: absent, with the reason, and pynvml (~10-20 ms) never imported;
    with the node NVML is asked as before."""
    node = tmp_path / "nvidiactl"
    monkeypatch.setattr(nvml, "_DEVICE_NODES", (str(node),))
    monkeypatch.setattr(nvml, "_nvml", None)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # importing it now raises ImportError
    probe = nvml.gpu_probe()
    assert probe.devices is None
    assert probe.reason == (
        f"no NVIDIA device node ({node} is absent): no NVIDIA driver on this machine"
    )
    with pytest.raises(GpuUnavailable, match=r"NVML is not available here \(no NVIDIA device"):
        nvml.pin_devices(1, dict(os.environ))
    node.touch()
    with pytest.raises(ImportError):
        nvml.gpu_probe()


@pytest.mark.gpu
def test_real_nvml_inventory_pinning_and_sampling(sleeper):
    reason = nvml.nvml_unavailable_reason()
    if reason is not None:
        pytest.skip(f"no NVIDIA GPU here: {reason}")
    devices = nvml.gpu_inventory()
    assert devices and all(d.memory_total_mb > 0 and d.uuid for d in devices)
    chosen, pinned = nvml.pin_devices(1, dict(os.environ))
    assert pinned["CUDA_VISIBLE_DEVICES"] == str(chosen[0])
    stage = sleeper()
    guard = VramGuard(
        nvml.process_tree(stage.pid),
        chosen,
        ceiling_mb=0,
        stage="idle",
        on_breach=kill_group(stage),
        interval_s=0.01,
    ).start()
    guard.sample()
    report = guard.stop()
    assert report.event is None and report.n_samples >= 2
    assert report.peak_vram_mb < 1  # a process without a CUDA context holds no VRAM
