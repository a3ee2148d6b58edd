"""The GPU layer: NVML inventory, device pinning, a VRAM guard, CUDA OOM recognition, GPU-hours.

Every NVML call goes through one seam, the module attribute ``_nvml``: ``None`` means "import
``pynvml`` on first use" (it costs ~10-20 ms, and a Linux machine without the NVIDIA driver's
device node never pays it: :func:`gpu_probe` answers from the node's absence), and
:func:`use_backend` swaps in anything with pynvml's function names. Tests swap in the NVML test
double of ``tests/nvml_double.py`` and so run this module's real code.

Device numbers are NVML indices, which follow PCI bus order. CUDA numbers devices "fastest
first" unless told otherwise, so :func:`pin_devices` sets ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` beside
``CUDA_VISIBLE_DEVICES``: the index a stage is given is the card NVML measured.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pytest_benchmark_agent.errors import BenchError

_nvml: Any = None
"""The NVML backend (``pynvml`` or a stand-in with its names); see :func:`_backend`."""

_MB = 1024 * 1024

#: The NVIDIA driver's control node, and WSL 2's GPU node (NVML answers there without the first).
_DEVICE_NODES = ("/dev/nvidiactl", "/dev/dxg")


class GpuUnavailable(BenchError):
    """The GPUs a config asks for are not there: NVML is absent, or there are too few devices."""


@dataclass(frozen=True)
class GpuInfo:
    """One NVIDIA device as NVML reports it (static facts only: what a fingerprint records)."""

    index: int
    uuid: str
    name: str
    memory_total_mb: float
    driver_version: str
    cuda_driver_version: str


@dataclass(frozen=True)
class GpuProbe:
    """The outcome of asking NVML for the devices: ``devices`` or, when it cannot answer, why."""

    devices: list[GpuInfo] | None
    reason: str | None


def _backend() -> Any:
    global _nvml
    if _nvml is None:
        import pynvml

        _nvml = pynvml
    return _nvml


@contextlib.contextmanager
def use_backend(backend: Any) -> Iterator[Any]:
    """Route every NVML call of this module to ``backend`` inside the block (tests, tools)."""
    global _nvml
    previous, _nvml = _nvml, backend
    try:
        yield backend
    finally:
        _nvml = previous


@contextlib.contextmanager
def _session() -> Iterator[Any]:
    """nvmlInit ... nvmlShutdown around a block; NVML counts the inits, so nesting is fine."""
    nv = _backend()
    nv.nvmlInit()
    try:
        yield nv
    finally:
        nv.nvmlShutdown()


def _why(error: Exception) -> str:
    nv = _backend()
    if isinstance(error, nv.NVMLError_LibraryNotFound):
        return "NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver on this machine"
    if isinstance(error, nv.NVMLError_DriverNotLoaded):
        return "the NVIDIA driver is not loaded"
    return f"NVML error: {error}"


def _cuda_version(encoded: int) -> str:
    """NVML encodes CUDA 12.4 as 12040."""
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def _no_device_node() -> str | None:
    """Why NVML cannot answer, known without importing pynvml: on Linux, no NVIDIA device node
    (the driver creates ``/dev/nvidiactl``). None where NVML must be asked (a swapped-in backend
    is always asked)."""
    if _nvml is not None or not sys.platform.startswith("linux"):
        return None
    if any(os.path.exists(node) for node in _DEVICE_NODES):
        return None
    return f"no NVIDIA device node ({_DEVICE_NODES[0]} is absent): no NVIDIA driver on this machine"


def gpu_probe() -> GpuProbe:
    """Ask NVML for every device; never raises: a machine without NVML gets the reason."""
    if why := _no_device_node():
        return GpuProbe(devices=None, reason=why)
    nv = _backend()
    try:
        with _session():
            driver = nv.nvmlSystemGetDriverVersion()
            cuda = _cuda_version(nv.nvmlSystemGetCudaDriverVersion())
            devices = []
            for index in range(nv.nvmlDeviceGetCount()):
                handle = nv.nvmlDeviceGetHandleByIndex(index)
                devices.append(
                    GpuInfo(
                        index=index,
                        uuid=nv.nvmlDeviceGetUUID(handle),
                        name=nv.nvmlDeviceGetName(handle),
                        memory_total_mb=round(nv.nvmlDeviceGetMemoryInfo(handle).total / _MB, 1),
                        driver_version=driver,
                        cuda_driver_version=cuda,
                    )
                )
    except nv.NVMLError as error:
        return GpuProbe(devices=None, reason=_why(error))
    return GpuProbe(devices=devices, reason=None)


def gpu_inventory() -> list[GpuInfo] | None:
    """The devices NVML sees (possibly none), or None where NVML does not answer."""
    return gpu_probe().devices


def nvml_unavailable_reason() -> str | None:
    """None where NVML answers; otherwise why it does not (shown in preflight and fingerprints)."""
    return gpu_probe().reason


def _allowed(env: dict[str, str], devices: list[GpuInfo]) -> list[GpuInfo]:
    """Devices an operator's own CUDA_VISIBLE_DEVICES (indices or UUIDs) still allows."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return devices
    wanted = {item.strip() for item in value.split(",") if item.strip()}
    return [d for d in devices if str(d.index) in wanted or d.uuid in wanted]


def pin_devices(
    requested: int, env: dict[str, str], *, vram_mb: float = 0, field: str = "resources.gpus"
) -> tuple[list[int], dict[str, str]]:
    """Choose ``requested`` devices, least used first, and return them with a pinned copy of env.

    The copy has ``CUDA_VISIBLE_DEVICES`` (the chosen NVML indices, ascending) and
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID``. Zero devices hides every GPU (``CUDA_VISIBLE_DEVICES=""``)
    so a stage cannot use a GPU it did not declare. An ``env`` that already restricts
    ``CUDA_VISIBLE_DEVICES`` limits the choice to those devices. "Least used" is by memory in
    use, then utilisation, then index. With ``vram_mb``, the chosen devices must have that much
    memory in total. Raises :class:`GpuUnavailable` naming ``field`` when this cannot be met.
    """
    if requested < 0:
        raise GpuUnavailable(f"{field}: {requested} is negative. Fix: give a count >= 0.")
    pinned = dict(env)
    pinned["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    if requested == 0:
        pinned["CUDA_VISIBLE_DEVICES"] = ""
        return [], pinned
    probe = gpu_probe()
    if probe.devices is None:
        raise GpuUnavailable(
            f"{field}: {requested} GPU(s) requested but NVML is not available here "
            f"({probe.reason}). Fix: run on a machine with an NVIDIA driver, or set {field}: 0."
        )
    candidates = _allowed(env, probe.devices)
    if len(candidates) < requested:
        seen = ", ".join(f"{d.index}: {d.name}" for d in candidates) or "none"
        limit = (
            f" (CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']!r} allows only these)"
            if "CUDA_VISIBLE_DEVICES" in env
            else ""
        )
        raise GpuUnavailable(
            f"{field}: {requested} GPU(s) requested but {len(candidates)} available "
            f"[{seen}]{limit}. Fix: lower {field} to at most {len(candidates)}."
        )
    with _session() as nv:
        load = {d.index: _load(nv, d.index) for d in candidates}
    ranked = sorted(candidates, key=lambda d: load[d.index])
    chosen = sorted(ranked[:requested], key=lambda d: d.index)
    total = sum(d.memory_total_mb for d in chosen)
    if vram_mb > total:
        raise GpuUnavailable(
            f"resources.vram_mb: {vram_mb:g} MB exceeds the {total:g} MB of the {requested} "
            f"device(s) pinned. Fix: lower resources.vram_mb or raise {field}."
        )
    pinned["CUDA_VISIBLE_DEVICES"] = ",".join(str(d.index) for d in chosen)
    return [d.index for d in chosen], pinned


def _load(nv: Any, index: int) -> tuple[int, int, int]:
    """Sort key for pinning: memory in use, then GPU utilisation, then index."""
    handle = nv.nvmlDeviceGetHandleByIndex(index)
    used = nv.nvmlDeviceGetMemoryInfo(handle).used
    try:
        busy = nv.nvmlDeviceGetUtilizationRates(handle).gpu
    except nv.NVMLError:  # some devices (MIG, vGPU) do not report utilisation
        busy = 0
    return used, busy, index


def process_tree(root_pid: int) -> Callable[[], set[int]]:
    """A ``pids_provider`` for :class:`VramGuard`: ``root_pid`` and its live descendants."""

    def pids() -> set[int]:
        import psutil  # ~9 ms, only for GPU stages

        try:
            root = psutil.Process(root_pid)
            return {root_pid} | {child.pid for child in root.children(recursive=True)}
        except psutil.Error:
            return set()

    return pids


@dataclass
class VramReport:
    """What a :class:`VramGuard` saw: peak VRAM of the stage, its breach event (or None).

    ``attribution`` is ``"pids"`` when the stage's VRAM was read per process, ``"device"``
    when at least one sample had to use the growth of its pinned devices (see VramGuard).
    """

    stage: str
    peak_vram_mb: float
    event: dict[str, Any] | None
    n_samples: int
    attribution: str


class VramGuard:
    """Samples the VRAM a stage's processes hold on its pinned devices, and stops a runaway.

    Each sample sums NVML's per-process ``usedGpuMemory`` (compute and graphics contexts) of
    the pids ``pids_provider()`` returns. Inside a container NVML reports the host's pids,
    which match nothing here, and some drivers report no per-process usage at all; when a
    sample finds no usage of the stage's pids but a process it cannot attribute (a pid that
    does not exist in this pid namespace, or one of the stage's pids without a reading), the
    guard counts the growth of the pinned devices' used memory since ``start()`` instead
    (``attribution: "device"``: measurements never overlap, so pinned devices are the stage's
    alone). Over ``ceiling_mb`` (0: record only) it calls ``on_breach`` once (the engine
    kills the stage's process group) and records the event; the event's ``peak_mb`` and
    ``series`` run until ``stop()``, so they show how far past the ceiling the stage got.
    """

    max_series = 2000

    def __init__(
        self,
        pids_provider: Callable[[], Iterable[int]],
        devices: Sequence[int],
        ceiling_mb: float,
        stage: str,
        on_breach: Callable[[], None],
        interval_s: float = 0.05,
    ):
        if interval_s <= 0:
            raise ValueError(f"VramGuard interval_s: {interval_s} must be > 0")
        self.pids_provider = pids_provider
        self.devices = list(devices)
        self.ceiling_mb = ceiling_mb
        self.stage = stage
        self.on_breach = on_breach
        self.interval_s = interval_s
        self._series: list[list[float]] = []
        self._peak = 0.0
        self._samples = 0
        self._event: dict[str, Any] | None = None
        self._attribution = "pids"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handles: dict[int, Any] = {}
        self._baseline: dict[int, int] = {}
        self._t0 = 0.0
        self._error: Exception | None = None
        self._nv: Any = None

    def start(self) -> VramGuard:
        """Open NVML, note each pinned device's used memory, and sample on a daemon thread."""
        nv = self._nv = _backend()
        try:
            nv.nvmlInit()
        except nv.NVMLError as error:
            raise GpuUnavailable(
                f"stage '{self.stage}': cannot watch its VRAM: {_why(error)}. Fix: run on a "
                f"machine with an NVIDIA driver, or set resources.gpus: 0."
            ) from error
        try:
            self._handles = {i: nv.nvmlDeviceGetHandleByIndex(i) for i in self.devices}
            self._baseline = {
                i: nv.nvmlDeviceGetMemoryInfo(h).used for i, h in self._handles.items()
            }
        except nv.NVMLError:
            nv.nvmlShutdown()
            raise
        self._t0 = time.monotonic()
        self._thread = threading.Thread(
            target=self._run, name=f"vram-guard:{self.stage}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> VramReport:
        """Take a last sample, stop sampling, close NVML, and report.

        Raises RuntimeError when NVML stopped answering mid-stage (a lost GPU): a stage whose
        VRAM went unwatched must not pass as guarded.
        """
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            if self._error is None:
                self._guarded_sample()
            self._nv.nvmlShutdown()
        if self._error is not None:
            raise RuntimeError(
                f"VRAM guard for stage {self.stage!r} stopped watching: {self._error!r}"
            ) from self._error
        if self._event is not None:
            self._event.update(peak_mb=round(self._peak, 1), series=self._series)
        return VramReport(
            stage=self.stage,
            peak_vram_mb=round(self._peak, 1),
            event=self._event,
            n_samples=self._samples,
            attribution=self._attribution,
        )

    def _run(self) -> None:
        while not self._stop.is_set() and self._guarded_sample():
            self._stop.wait(self.interval_s)

    def _guarded_sample(self) -> bool:
        """A sample whose failure (NVML gone, ``on_breach`` failing) is kept for ``stop()``."""
        try:
            self.sample()
        except Exception as error:  # re-raised by stop(): an unwatched stage fails loud
            self._error = error
            return False
        return True

    def sample(self) -> float:
        """One reading of the stage's VRAM in MB; updates the peak and fires on a breach."""
        import psutil  # ~9 ms, only for GPU stages

        nv = self._nv
        try:
            pids = set(self.pids_provider())
        except Exception:  # a provider racing a dying process tree must not kill the guard
            pids = set()
        by_pid = 0
        unattributable = False
        for handle in self._handles.values():
            for proc in _processes(nv, handle):
                if proc.pid in pids:
                    by_pid += proc.usedGpuMemory or 0
                    unattributable |= proc.usedGpuMemory is None
                elif not psutil.pid_exists(proc.pid):
                    unattributable = True
        used_mb = by_pid / _MB
        if by_pid == 0 and unattributable:
            self._attribution = "device"
            grown = sum(
                max(0, nv.nvmlDeviceGetMemoryInfo(h).used - self._baseline[i])
                for i, h in self._handles.items()
            )
            used_mb = grown / _MB
        self._record(used_mb)
        return used_mb

    def _record(self, used_mb: float) -> None:
        self._samples += 1
        self._peak = max(self._peak, used_mb)
        self._series.append([round(time.monotonic() - self._t0, 3), round(used_mb, 1)])
        if len(self._series) > self.max_series:
            self._series = self._series[::2]
        if self.ceiling_mb and used_mb > self.ceiling_mb and self._event is None:
            self._event = {
                "kind": "vram",
                "stage": self.stage,
                "reason": f"VRAM {used_mb:.0f} MB above vram_mb {self.ceiling_mb:g}",
                "peak_mb": round(self._peak, 1),
                "ceiling_mb": self.ceiling_mb,
                "devices": self.devices,
                "attribution": self._attribution,
                "at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
                "series": self._series,
            }
            self.on_breach()


def _processes(nv: Any, handle: Any) -> list[Any]:
    """Compute and graphics contexts on a device, one entry per pid (the larger reading).

    pynvml's unversioned queries call the newest struct version; a driver older than the
    bindings answers with a version mismatch, and the ``_v2`` query is asked instead.
    """
    found: dict[int, Any] = {}
    mismatch = getattr(nv, "NVMLLibraryMismatchError", nv.NVMLError_FunctionNotFound)  # 13.x
    for kind in ("Compute", "Graphics"):
        for name in (
            f"nvmlDeviceGet{kind}RunningProcesses",
            f"nvmlDeviceGet{kind}RunningProcesses_v2",
        ):
            try:
                listed = getattr(nv, name)(handle)
            except (mismatch, nv.NVMLError_FunctionNotFound):
                continue
            except nv.NVMLError_NotSupported:  # e.g. graphics contexts on data-centre cards
                break
            for proc in listed:
                known = found.get(proc.pid)
                if known is None or (proc.usedGpuMemory or 0) > (known.usedGpuMemory or 0):
                    found[proc.pid] = proc
            break
    return list(found.values())


@functools.cache
def _cuda_oom() -> re.Pattern[str]:
    """The GPU out-of-memory pattern, compiled (~1 ms) on the first failed stage that needs it."""
    return re.compile(
        r"CUDA out of memory|\b(?:torch|cupy)[\w.]*OutOfMemoryError"
        r"|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|CUFFT_ALLOC_FAILED"
        r"|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY"
        r"|RESOURCE_EXHAUSTED.*(?:[Oo]ut of memory|allocat)|OOM when allocating"
        r"|ran out of memory trying to allocate"
        r"|(?i:\b(?:cuda\w*|gpu)\b.*\bout of memory\b)"
    )


def cuda_oom_in(stderr_text: str) -> str | None:
    """The last line of ``stderr_text`` that reports a GPU out-of-memory, or None.

    Recognises PyTorch (``CUDA out of memory``, ``torch.OutOfMemoryError``), cuBLAS / cuDNN /
    cuFFT allocation failures, CUDA runtime and driver codes (``cudaErrorMemoryAllocation``,
    ``CUDA_ERROR_OUT_OF_MEMORY``, "CUDA error: out of memory"), CuPy's ``OutOfMemoryError``,
    JAX/XLA ``RESOURCE_EXHAUSTED`` allocation failures and TensorFlow's "OOM when allocating".
    A host out-of-memory (the kernel's, Java's, Python's MemoryError) is not a CUDA one. The
    last match is the error the program died of; earlier ones are often warnings.
    """
    for line in reversed(stderr_text.splitlines()):
        if _cuda_oom().search(line):
            return line.strip()[:500]
    return None


def gpu_hours(wall_s: float, n_gpus: int) -> float:
    """GPU-hours a stage used: its wall time times the devices pinned to it."""
    if wall_s < 0 or n_gpus < 0:
        raise ValueError(f"gpu_hours: wall_s ({wall_s}) and n_gpus ({n_gpus}) must be >= 0")
    return wall_s * n_gpus / 3600.0


def cost_usd(gpu_hours: float, price_per_gpu_hour: float) -> float:
    """Dollars for ``gpu_hours`` at ``resources.price_per_gpu_hour``."""
    if gpu_hours < 0 or price_per_gpu_hour < 0:
        raise ValueError(
            f"cost_usd: gpu_hours ({gpu_hours}) and resources.price_per_gpu_hour "
            f"({price_per_gpu_hour}) must be >= 0"
        )
    return gpu_hours * price_per_gpu_hour
