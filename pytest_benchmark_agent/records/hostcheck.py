"""The environment that makes numbers lie, checked at a session's start and by ``doctor``.

pyperf's ``system show`` warns about frequency scaling, turbo and load; here the same suspects
are read where the machine exposes them (anything unreadable is recorded as ``None`` and never
warned about): load against the CPUs this process may use and the other processes keeping them
busy, the CPU frequency governor and turbo, the cgroup's CPU quota and how often it throttled,
``PYTHONDONTWRITEBYTECODE`` (every Python import recompiles), ``PYTHONHASHSEED`` for counted
stages, and swapping. Each finding that distorts a measurement carries one sentence saying what
it does to the numbers. The findings are recorded under ``host_check`` in every run's
fingerprint (never blocking a comparison: they describe the moment, not the machine).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_benchmark_agent.util.safetext import one_line

#: Load above this share of the usable CPUs is "busy": trials queue behind other work.
BUSY_LOAD_SHARE = 0.5
#: A process using more than this share of one CPU over the window is listed as busy.
BUSY_PROCESS_SHARE = 0.2
#: How long ``doctor`` watches swapping and processes' CPU use (a session watches collection).
WINDOW_S = 0.1
#: Busy processes named at most (the busiest first).
BUSY_SHOWN = 5
_NAME_MAX = 60

if TYPE_CHECKING:
    import psutil
#: cgroup v2's default CPU period, where ``cpu.max`` gives the quota alone.
_V2_PERIOD_US = 100_000


@dataclass(frozen=True)
class Finding:
    """One suspect: what was read (None: not readable here) and, where it distorts the
    numbers, the sentence saying how."""

    name: str
    value: Any
    warning: str | None = None
    #: What a ``None`` value means for this suspect, as ``doctor`` prints it.
    absent: str = "not readable here"

    @property
    def shown(self) -> str:
        """The value as a person reads it: ``load_1m 9.63; cpus 2; busy_processes a 33%, b``,
        never a Python dict or list."""
        return self.absent if self.value is None else _readable(self.value)


def _readable(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{key} {_readable(item)}" for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_readable(item) for item in value) or "none"
    return str(value)


class HostWatch:
    """The suspects watched over a window: started when made, read by :meth:`findings`.

    A session makes one at configure time and reads it when its trials start, so collection is
    the window and no time is spent waiting; ``doctor`` waits :data:`WINDOW_S`. Other processes'
    CPU use is watched only while the load is high (listing them costs milliseconds).
    """

    def __init__(
        self,
        *,
        proc: Path = Path("/proc"),
        sys_cpu: Path = Path("/sys/devices/system/cpu"),
        cgroup_root: Path = Path("/sys/fs/cgroup"),
    ) -> None:
        self.proc, self.sys_cpu, self.cgroup_root = proc, sys_cpu, cgroup_root
        self._swapped = _swapped(proc)
        self._watched = _start_watching() if _busy_load() else []

    def findings(
        self, *, counted: bool = False, environ: Mapping[str, str] | None = None
    ) -> list[Finding]:
        """Every suspect, in a fixed order; ``counted``: a stage counts instructions."""
        env = os.environ if environ is None else environ
        found = [
            _load(_busy_processes(self._watched)),
            _governor(self.sys_cpu),
            _turbo(self.sys_cpu),
            *_cpu_quota(self.proc, self.cgroup_root),
            _bytecode(env),
            _swap(self._swapped, _swapped(self.proc)),
        ]
        if counted:
            found.append(_hash_seed(env))
        return found


def check_host(*, counted: bool = False, window_s: float = WINDOW_S) -> list[Finding]:
    """Every suspect, watched over ``window_s`` (``benchmark-agent doctor``)."""
    watch = HostWatch()
    time.sleep(window_s)
    return watch.findings(counted=counted)


def as_record(findings: list[Finding]) -> dict[str, Any]:
    """The findings as a fingerprint section: name -> value, and the warnings given."""
    return {
        **{finding.name: finding.value for finding in findings},
        "warnings": [f"{f.name}: {f.warning}" for f in findings if f.warning],
    }


def warning_lines(findings: list[Finding]) -> list[str]:
    """The warnings as lines for a terminal, each naming its suspect."""
    return [f"{finding.name}: {finding.warning}" for finding in findings if finding.warning]


def _usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _busy_load() -> bool:
    """Whether the load is above :data:`BUSY_LOAD_SHARE` of the usable CPUs."""
    try:
        return os.getloadavg()[0] > BUSY_LOAD_SHARE * _usable_cpus()
    except OSError:
        return False


def _start_watching() -> list[psutil.Process]:
    """Every other process, its CPU time noted (psutil measures from this call on); psutil
    (~10 ms to import) loads only here, on a busy machine. An interpreter without psutil (a
    stage's own virtualenv running pytest) watches none: the load is still read and warned
    about, and the check never decides whether a session starts."""
    try:
        import psutil
    except ImportError:
        return []

    own = {os.getpid(), os.getppid()}
    watched = []
    for process in psutil.process_iter():
        if process.pid in own:
            continue
        try:
            process.cpu_percent(None)
        except psutil.Error:
            continue
        watched.append(process)
    return watched


def _busy_processes(watched: list[psutil.Process]) -> list[tuple[str, float]]:
    """(``name[pid]``, share of one CPU) of the watched processes busy since watching began,
    busiest first; names are made one inert line (a process names itself)."""
    if not watched:
        return []
    import psutil

    busy = []
    for process in watched:
        try:
            share = process.cpu_percent(None) / 100
            if share >= BUSY_PROCESS_SHARE:
                busy.append((f"{one_line(process.name(), _NAME_MAX)}[{process.pid}]", share))
        except psutil.Error:
            continue
    return sorted(busy, key=lambda item: -item[1])


def _load(busy: list[tuple[str, float]]) -> Finding:
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:
        return Finding("load", None)
    cpus = _usable_cpus()
    value = {
        "load_1m": load,
        "cpus": cpus,
        "busy_processes": [f"{name} {share:.0%}" for name, share in busy[:BUSY_SHOWN]],
    }
    if load <= BUSY_LOAD_SHARE * cpus and not busy:
        return Finding("load", value)
    names = ", ".join(value["busy_processes"]) or "none seen in the window"
    return Finding(
        "load",
        value,
        f"load {load} on {cpus} usable CPU(s), busy: {names}; trials wait for CPUs and share "
        "caches, so wall_s grows and varies (cpu_s less): run on a quiet machine or judge cpu_s",
    )


def _governor(sys_cpu: Path) -> Finding:
    governors = sorted({_read(path) for path in sys_cpu.glob("cpu[0-9]*/cpufreq/scaling_governor")})
    governors = [g for g in governors if g]
    if not governors:
        return Finding("cpu_governor", None)
    if governors == ["performance"]:
        return Finding("cpu_governor", governors)
    return Finding(
        "cpu_governor",
        governors,
        f"CPU frequency governor {'/'.join(governors)}: the clock follows the load, so the "
        "first trials run slower and short ones vary; set the governor to performance "
        "(cpupower frequency-set -g performance)",
    )


def _turbo(sys_cpu: Path) -> Finding:
    no_turbo = _read(sys_cpu / "intel_pstate" / "no_turbo")
    boost = _read(sys_cpu / "cpufreq" / "boost")
    if no_turbo is None and boost is None:
        return Finding("turbo", None)
    on = no_turbo == "0" if no_turbo is not None else boost == "1"
    if not on:
        return Finding("turbo", False)
    return Finding(
        "turbo",
        True,
        "turbo boost is on: the clock rises while the package is cool and falls as it heats, so "
        "a trial's speed depends on what ran before it; turn it off for timings",
    )


def _cpu_quota(proc: Path, cgroup_root: Path) -> list[Finding]:
    """The cgroup's CPU quota (in CPUs) and its throttling so far (v2 ``cpu.max``/``cpu.stat``,
    v1 ``cpu.cfs_quota_us``/``cpu.stat``)."""
    folder, version = _cpu_cgroup(proc, cgroup_root)
    if folder is None:
        return [Finding("cpu_quota", None), Finding("cpu_throttled", None)]
    if version == 2:
        limit, _, period = (_read(folder / "cpu.max") or "max").partition(" ")
        quota = None if limit == "max" else int(limit) / int(period or _V2_PERIOD_US)
    else:
        raw, period = _read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us")
        quota = int(raw) / int(period) if raw and period and int(raw) > 0 else None
    stat = _pairs(folder / "cpu.stat")
    throttled = stat.get("nr_throttled")
    found = [Finding("cpu_quota", None if quota is None else round(quota, 2), absent="no quota")]
    if throttled:
        found.append(
            Finding(
                "cpu_throttled",
                throttled,
                f"the cgroup's CPU quota ({quota} CPUs) throttled it {throttled} time(s): a "
                "throttled trial stops for the rest of a period, so wall_s jumps by whole "
                "periods (cpu_s does not); give it more quota or fewer parallel stages",
            )
        )
    else:
        found.append(Finding("cpu_throttled", throttled))
    return found


def _cpu_cgroup(proc: Path, root: Path) -> tuple[Path | None, int]:
    try:
        lines = (proc / "self" / "cgroup").read_text().splitlines()
    except OSError:
        return None, 0
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            for mount in (root / "cpu", root / "cpu,cpuacct", root / "cpuacct,cpu"):
                if (mount / path.lstrip("/") / "cpu.cfs_quota_us").exists():
                    return mount / path.lstrip("/"), 1
        if controllers == "" and (root / path.lstrip("/") / "cpu.max").exists():
            return root / path.lstrip("/"), 2
    return None, 0


def _bytecode(env: Mapping[str, str]) -> Finding:
    value = env.get("PYTHONDONTWRITEBYTECODE")
    if not value:
        return Finding("PYTHONDONTWRITEBYTECODE", None, absent="unset")
    return Finding(
        "PYTHONDONTWRITEBYTECODE",
        value,
        "is set: Python writes no .pyc files, so every import in every stage recompiles its "
        "modules, which adds the same cost to both sides and hides a real difference in "
        "import time; unset it for the session",
    )


def _hash_seed(env: Mapping[str, str]) -> Finding:
    value = env.get("PYTHONHASHSEED")
    if value is not None and value != "random":
        return Finding("PYTHONHASHSEED", value)
    return Finding(
        "PYTHONHASHSEED",
        value,
        absent="unset",
        warning="is unset or random: a Python process started with its own environment "
        "hashes strings with a random seed, so its instruction counts change from run to run "
        "with its dicts' and sets' layout (counted stages get their block's seed); "
        "set it to a number",
    )


def _swap(before: int | None, after: int | None) -> Finding:
    if before is None or after is None:
        return Finding("swap_pages", None)
    moved = after - before
    if moved <= 0:
        return Finding("swap_pages", 0)
    return Finding(
        "swap_pages",
        moved,
        f"{moved} page(s) swapped in the check's window: a trial whose memory is swapped out "
        "waits on the disk, so its times jump; free memory or lower the benchmark's",
    )


def _swapped(proc: Path) -> int | None:
    stat = _pairs(proc / "vmstat")
    if "pswpin" not in stat:
        return None
    return stat["pswpin"] + stat.get("pswpout", 0)


def _pairs(path: Path) -> dict[str, int]:
    """``name value`` lines of a kernel statistics file (empty where unreadable)."""
    pairs = {}
    for line in (_read(path) or "").splitlines():
        name, _, number = line.partition(" ")
        if number.strip().isdigit():
            pairs[name] = int(number)
    return pairs


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, ValueError):
        return None
