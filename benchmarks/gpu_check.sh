#!/usr/bin/env bash
# gpu_check.sh: prove pytest_benchmark_agent.guards.gpu against a real NVIDIA GPU.
#
#   bash benchmarks/gpu_check.sh            (PYTHON=... to choose the interpreter)
#
# What it shows, printing what it saw:
#   1. inventory: NVML lists the devices (name, memory, driver, CUDA version);
#   2. pinning:   pin_devices(1) sets CUDA_VISIBLE_DEVICES; the child process sees it, CUDA in
#                 the child sees exactly one device, and it is the PCI bus NVML chose;
#   3. sampling:  VramGuard follows a child that allocates 1 GiB on the GPU and records the peak;
#   4. overrun:   a child that keeps allocating past vram_mb is killed by the guard (SIGKILL to
#                 its process group), the event is recorded, and the driver frees its memory;
#   5. OOM:       a real CUDA out-of-memory error in a child's stderr is recognised;
#   6. the gpu-marked pytest test, where pytest is installed.
# Exit status 0 only if every check passed. GPU allocation uses PyTorch where it is installed
# with CUDA, else the CUDA driver API (libcuda.so.1) through ctypes: nothing to download.
# The package is used from this checkout through PYTHONPATH (no pip install, so no network).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo "== gpu_check: $(date -u +%FT%TZ) on $(hostname)"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L || true
else
    echo "(nvidia-smi not found; NVML is asked directly)"
fi
if ! "$PY" -c "import pynvml, psutil" 2>/dev/null; then
    echo "installing nvidia-ml-py and psutil"
    "$PY" -m pip install -q nvidia-ml-py psutil || {
        echo "FAIL: need the Python packages nvidia-ml-py and psutil"; exit 1; }
fi

# The GPU workload: `info` | `alloc STEP_MB MAX_MB DELAY_S HOLD_S` | `oom`.
cat >"$WORK/gpu_child.py" <<'CHILD'
import ctypes
import sys
import time

MB = 1024 * 1024


def torch_backend():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


class Driver:
    """The CUDA driver API through ctypes: enough to count devices and allocate memory."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.call("cuInit", 0)
        self.dev = ctypes.c_int()
        self.call("cuDeviceGet", ctypes.byref(self.dev), 0)
        self.ctx = ctypes.c_void_p()
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(self.ctx), self.dev)
        self.call("cuCtxSetCurrent", self.ctx)

    def call(self, name, *args):
        code = getattr(self.lib, name)(*args)
        if code != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorName(code, ctypes.byref(text))
            raise RuntimeError(f"{name} failed: {text.value.decode()} (CUresult {code})")

    def count(self):
        n = ctypes.c_int()
        self.call("cuDeviceGetCount", ctypes.byref(n))
        return n.value

    def bus_id(self):
        buf = ctypes.create_string_buffer(64)
        self.call("cuDeviceGetPCIBusId", buf, 64, self.dev)
        return buf.value.decode()

    def alloc(self, nbytes):
        ptr = ctypes.c_uint64()
        self.call("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(nbytes))
        return ptr

    def total(self):
        size = ctypes.c_size_t()
        self.call("cuDeviceTotalMem_v2", ctypes.byref(size), self.dev)
        return size.value


def main():
    mode = sys.argv[1]
    if mode == "info":  # what CUDA itself sees, through the driver API
        driver = Driver()
        print(f"backend=cuda-driver count={driver.count()} bus={driver.bus_id()}")
        return
    torch = torch_backend()
    driver = None if torch is not None else Driver()
    backend = "torch" if torch is not None else "cuda-driver"
    print(f"backend={backend}", file=sys.stderr, flush=True)
    if mode == "alloc":
        step, most = int(sys.argv[2]), int(sys.argv[3])
        delay, hold = float(sys.argv[4]), float(sys.argv[5])
        blocks, done = [], 0
        while done < most:
            if torch is not None:
                blocks.append(torch.empty(step * MB, dtype=torch.uint8, device="cuda"))
            else:
                blocks.append(driver.alloc(step * MB))
            done += step
            print(f"allocated {done}", flush=True)
            time.sleep(delay)
        time.sleep(hold)
    elif mode == "oom":
        if torch is not None:
            total = torch.cuda.get_device_properties(0).total_memory
            torch.empty(2 * total, dtype=torch.uint8, device="cuda")  # raises OutOfMemoryError
        else:
            driver.alloc(2 * driver.total())  # raises CUDA_ERROR_OUT_OF_MEMORY


main()
CHILD

status=0
GPU_CHILD="$WORK/gpu_child.py" "$PY" - <<'DRIVER' || status=$?
import os
import signal
import subprocess
import sys
import time

import pynvml

from pytest_benchmark_agent.guards import gpu as nvml

CHILD = os.environ["GPU_CHILD"]
results = []


def check(name, ok, detail):
    results.append(ok)
    print(f"[{'PASS' if ok else 'FAIL'}] {name}: {detail}", flush=True)


def start(env, *args):
    return subprocess.Popen([sys.executable, CHILD, *map(str, args)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def finish(proc, timeout):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    return out, err


def bus_key(bus):
    """'00000000:18:00.0' (NVML) and '0000:18:00.0' (CUDA) name the same bus."""
    domain, rest = bus.lower().split(":", 1)
    return f"{int(domain, 16):x}:{rest}"


def device_used_mb(index):
    pynvml.nvmlInit()
    try:
        return pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(index)).used / 2**20
    finally:
        pynvml.nvmlShutdown()


# 1. inventory
devices = nvml.gpu_inventory()
if devices is None:
    check("inventory", False, f"NVML does not answer: {nvml.nvml_unavailable_reason()}")
    sys.exit(1)
for d in devices:
    print(f"    device {d.index}: {d.name}, {d.memory_total_mb:.0f} MB, {d.uuid}, "
          f"driver {d.driver_version}, CUDA {d.cuda_driver_version}")
check("inventory", len(devices) >= 1, f"{len(devices)} device(s) listed by NVML")

# 2. pinning
chosen, env = nvml.pin_devices(1, dict(os.environ))
pynvml.nvmlInit()
nvml_bus = pynvml.nvmlDeviceGetPciInfo(pynvml.nvmlDeviceGetHandleByIndex(chosen[0])).busId
nvml_bus = nvml_bus.decode() if isinstance(nvml_bus, bytes) else nvml_bus
pynvml.nvmlShutdown()
seen = subprocess.run([sys.executable, "-c", "import os; print(os.environ['CUDA_VISIBLE_DEVICES'],"
                       " os.environ['CUDA_DEVICE_ORDER'])"], env=env, capture_output=True,
                      text=True).stdout.strip()
check("pinning: environment", seen == f"{chosen[0]} PCI_BUS_ID",
      f"chose device {chosen}, child saw CUDA_VISIBLE_DEVICES/CUDA_DEVICE_ORDER = {seen!r}")
out, err = finish(start(env, "info"), 120)
fields = dict(item.split("=", 1) for item in out.split()) if out else {}
cuda_bus = fields.get("bus", "?")
check("pinning: CUDA sees the pinned device",
      fields.get("count") == "1" and cuda_bus != "?" and bus_key(cuda_bus) == bus_key(nvml_bus),
      f"{fields.get('backend', '?')}: {fields.get('count', '?')} device(s), bus {cuda_bus} "
      f"(NVML's choice: {nvml_bus}){'; stderr: ' + err.strip()[-300:] if err.strip() else ''}")

# 3. sampling: 4 x 256 MiB, held for 2 s, no ceiling
before = device_used_mb(chosen[0])
proc = start(env, "alloc", 256, 1024, 0.05, 2.0)
guard = nvml.VramGuard(nvml.process_tree(proc.pid), chosen, ceiling_mb=0, stage="sample",
                       on_breach=lambda: None, interval_s=0.05).start()
out, err = finish(proc, 120)
report = guard.stop()
check("sampling", proc.returncode == 0 and 1024 <= report.peak_vram_mb < 1024 + 4096
      and report.event is None,
      f"child exit {proc.returncode}, allocated {out.split()[-1] if out.split() else 0} MiB, "
      f"guard peak {report.peak_vram_mb} MiB (CUDA context included) over "
      f"{report.n_samples} samples, attribution {report.attribution}"
      f"{'; stderr: ' + err.strip()[-300:] if proc.returncode else ''}")

# 4. overrun: 256 MiB every 50 ms (about 5 GiB/s) towards 16 GiB, ceiling 2 GiB
ceiling = 2048
proc = start(env, "alloc", 256, 16384, 0.05, 30)
t0 = time.monotonic()
guard = nvml.VramGuard(nvml.process_tree(proc.pid), chosen, ceiling_mb=ceiling, stage="overrun",
                       on_breach=lambda: os.killpg(proc.pid, signal.SIGKILL),
                       interval_s=0.05).start()
out, err = finish(proc, 120)
wall = time.monotonic() - t0
time.sleep(1.0)
report = guard.stop()
after = device_used_mb(chosen[0])
event = report.event or {}
allocated = int(out.split()[-1]) if out.split() else 0
shown = {k: v for k, v in event.items() if k != "series"}
check("overrun: guard killed the stage",
      proc.returncode == -signal.SIGKILL and event.get("kind") == "vram" and allocated < 16384,
      f"child exit {proc.returncode}, it had allocated {allocated} MiB of 16384; "
      f"event {shown}; child {err.strip().splitlines()[0] if err.strip() else ''}")
check("overrun: peak recorded past the ceiling", event.get("peak_mb", 0) > ceiling,
      f"peak {report.peak_vram_mb} MiB vs vram_mb {ceiling} (overshoot "
      f"{report.peak_vram_mb - ceiling:.0f} MiB), {len(event.get('series', []))} points in "
      f"the series, attribution {report.attribution}")
check("overrun: driver freed the memory", after < before + 256,
      f"device used {before:.0f} MiB before, {after:.0f} MiB after the kill")
hours = nvml.gpu_hours(wall, len(chosen))
print(f"    accounting: {wall:.2f} s x {len(chosen)} GPU = {hours:.6f} GPU-hours, "
      f"${nvml.cost_usd(hours, 3.0):.6f} at $3/GPU-hour")

# 5. OOM recognition from a real CUDA error
proc = start(env, "oom")
out, err = finish(proc, 120)
line = nvml.cuda_oom_in(err)
check("CUDA OOM recognised", proc.returncode != 0 and line is not None,
      f"child exit {proc.returncode}, matched: {line!r}"
      f"{'' if line else '; stderr tail: ' + err.strip()[-300:]}")

print(f"== {sum(results)}/{len(results)} checks passed")
sys.exit(0 if all(results) else 1)
DRIVER

# 6. the gpu-marked test of the suite, where pytest is there to run it
if "$PY" -c "import pytest" 2>/dev/null; then
    if (cd "$ROOT" && "$PY" -m pytest -p no:cacheprovider -p no:benchmark_agent --noconftest -q -m gpu \
            tests/test_nvml.py); then
        echo "[PASS] pytest -m gpu tests/test_nvml.py"
    else
        echo "[FAIL] pytest -m gpu tests/test_nvml.py"
        status=1
    fi
else
    echo "(pytest not installed: the gpu-marked test was not run)"
fi
exit "$status"
