"""FakeNvml: an NVML test double, for machines without an NVIDIA GPU.

It answers the pynvml functions ``pytest_benchmark_agent.guards.gpu`` calls, with the same names,
return shapes (bytes, ``.pid`` / ``.usedGpuMemory`` records) and the real ``pynvml.NVMLError``
classes, from a scripted state: devices with memory and utilisation, and per-process VRAM that
can grow on every sample. Install it with ``nvml.use_backend(FakeNvml(...))``; the module under
test then runs its real code path. Processes are real pids: a process that has exited no
longer holds VRAM, as with the real driver; a ``foreign`` pid stands for a process of another
pid namespace (NVML inside a container reports host pids).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import psutil
import pynvml
from pynvml import (
    NVMLError,
    NVMLError_DriverNotLoaded,
    NVMLError_FunctionNotFound,
    NVMLError_LibraryNotFound,
    NVMLError_NotSupported,
    NVMLLibraryMismatchError,
)

MB = 1024 * 1024


@dataclass
class FakeProcess:
    """VRAM held by one pid: ``used_mb`` now, growing by ``step_mb`` per sample."""

    used_mb: float
    step_mb: float = 0.0
    foreign: bool = False
    reports_usage: bool = True


@dataclass
class FakeDevice:
    """One scripted GPU."""

    name: str = "NVIDIA Fake H100 80GB HBM3"
    uuid: str = ""
    total_mb: float = 81559.0
    base_used_mb: float = 0.0
    utilization: int = 0
    compute: dict[int, FakeProcess] = field(default_factory=dict)


class FakeNvml:
    """A scriptable stand-in for the ``pynvml`` module."""

    NVMLError = NVMLError
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_FunctionNotFound = NVMLError_FunctionNotFound
    NVMLLibraryMismatchError = NVMLLibraryMismatchError

    def __init__(
        self,
        devices: list[FakeDevice] | None = None,
        *,
        absent: bool = False,
        driver: str = "550.54.15",
        cuda: int = 12040,
        old_driver: bool = False,
    ):
        self.devices = devices if devices is not None else []
        for index, device in enumerate(self.devices):
            device.uuid = device.uuid or f"GPU-fake0000-0000-0000-0000-{index:012d}"
        self.absent = absent
        self.driver = driver
        self.cuda = cuda
        self.inits = 0
        self.old_driver = old_driver  # True: only the _v2 process queries exist
        self.lost = False  # True: the GPU fell off the bus, process queries fail
        self.process_queries = 0

    # -- scripting ---------------------------------------------------------------------------
    def add_process(
        self,
        device: int,
        pid: int,
        used_mb: float,
        *,
        step_mb: float = 0.0,
        foreign: bool = False,
        reports_usage: bool = True,
    ) -> FakeProcess:
        """Give ``pid`` a context on ``device`` holding ``used_mb`` (+``step_mb`` per sample)."""
        proc = FakeProcess(used_mb, step_mb, foreign, reports_usage)
        self.devices[device].compute[pid] = proc
        return proc

    # -- the pynvml surface ------------------------------------------------------------------
    def _check(self) -> None:
        if self.inits <= 0:
            raise NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)

    def nvmlInit(self) -> None:
        if self.absent:
            raise NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self._check()
        self.inits -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._check()
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._check()
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        self._check()
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeDevice:
        self._check()
        if not 0 <= index < len(self.devices):
            raise NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self.devices[index]

    def nvmlDeviceGetName(self, handle: FakeDevice) -> str:
        self._check()
        return handle.name

    def nvmlDeviceGetUUID(self, handle: FakeDevice) -> str:
        self._check()
        return handle.uuid

    def _live(self, handle: FakeDevice) -> dict[int, FakeProcess]:
        """Drop contexts of processes that have exited (the driver frees their memory)."""
        for pid in [
            pid for pid, proc in handle.compute.items() if not proc.foreign and not _alive(pid)
        ]:
            del handle.compute[pid]
        return handle.compute

    def nvmlDeviceGetMemoryInfo(self, handle: FakeDevice) -> SimpleNamespace:
        self._check()
        used = handle.base_used_mb + sum(p.used_mb for p in self._live(handle).values())
        return SimpleNamespace(
            total=int(handle.total_mb * MB),
            used=int(used * MB),
            free=int((handle.total_mb - used) * MB),
        )

    def nvmlDeviceGetUtilizationRates(self, handle: FakeDevice) -> SimpleNamespace:
        self._check()
        return SimpleNamespace(gpu=handle.utilization, memory=handle.utilization)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeDevice) -> list[SimpleNamespace]:
        if self.old_driver:
            raise NVMLLibraryMismatchError("Unversioned function called")
        return self.nvmlDeviceGetComputeRunningProcesses_v2(handle)

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: FakeDevice) -> list[SimpleNamespace]:
        self._check()
        if self.lost:
            raise NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        self.process_queries += 1
        listed = []
        for pid, proc in self._live(handle).items():
            proc.used_mb += proc.step_mb
            usage = int(proc.used_mb * MB) if proc.reports_usage else None
            listed.append(SimpleNamespace(pid=pid, usedGpuMemory=usage))
        return listed

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: FakeDevice) -> list[SimpleNamespace]:
        self._check()
        raise NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)  # as on data-centre cards


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
