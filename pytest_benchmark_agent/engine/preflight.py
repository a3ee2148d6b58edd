"""Preflight: check that the declared resources fit before any trial runs, and show the arithmetic.

``resources.mem_mb`` plus a 10% margin must fit in the memory available to the run: the tighter
of the machine's ``MemAvailable`` and the free room of every limited level of the process's own
memory cgroup (v1 or v2; its limit minus its working set, i.e. usage less inactive page cache).
``resources.disk_mb`` plus 10% must fit on every filesystem holding the cache or the run folder.
A need larger than what is available is an error; a need that fits with less than the margin to
spare runs only when the risk is accepted, and is then recorded as a caveat.

GPU-hours are estimated before anything runs: each measure trial at its stage's
``est_gpu_hours`` (else ``resources.est_gpu_hours``, the estimate per trial), each prep build at
its stage's; a plan whose estimate, or that times ``resources.price_per_gpu_hour``, exceeds
``budget.gpu_hours`` or ``budget.cost_usd`` is refused with the arithmetic. The tuner sizes its
rounds with the same per-trial estimate (:func:`declared_per_trial`).

Gate 1 (config/gate1.py) asks neither the records nor the machine: :func:`gate_one` runs it with
what they say, the latest RELIABLE run's values and :func:`counter_problems` (a stage's
``counters:`` need a counting backend here, and a timing it distorts is no metric).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.config import gate1
from pytest_benchmark_agent.config.manifest import LatestReliable
from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.config.stage import Stage
from pytest_benchmark_agent.errors import Problem
from pytest_benchmark_agent.guards.cgroup import MIB, CgroupMemory

MARGIN = 0.10


@dataclass(frozen=True)
class PreflightResult:
    """The verdict: ``ok`` to run, a ``caveat`` to record for an accepted risk, the arithmetic."""

    ok: bool
    caveat: str | None
    message: str
    lines: list[str]


@dataclass(frozen=True)
class _Fit:
    what: str
    need_mb: float
    available_mb: float | None

    @property
    def headroom(self) -> float | None:
        if self.available_mb is None:
            return None
        return (self.available_mb - self.need_mb) / self.need_mb


def _mb(n_bytes: float) -> str:
    return f"{n_bytes / MIB:.1f} MiB"


def _mem_available(proc_root: Path) -> int | None:
    try:
        text = (proc_root / "meminfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name == "MemAvailable":
            return int(rest.split()[0]) * 1024
    return None


def _memory_fit(mem_mb: float, proc_root: Path, cgroup_root: Path, lines: list[str]) -> _Fit:
    lines.append(
        f"memory: need {mem_mb:g} MiB (resources.mem_mb) + {MARGIN:.0%} margin "
        f"= {mem_mb * (1 + MARGIN):.1f} MiB"
    )
    candidates: list[int] = []
    machine = _mem_available(proc_root)
    if machine is None:
        lines.append(f"  machine: unknown (no MemAvailable in {proc_root / 'meminfo'})")
    else:
        candidates.append(machine)
        lines.append(f"  machine: MemAvailable {_mb(machine)} ({proc_root / 'meminfo'})")
    cgroup = CgroupMemory.of_self(proc_root=proc_root, cgroup_root=cgroup_root)
    if cgroup is None:
        lines.append(f"  cgroup: no memory controller found under {cgroup_root}")
    else:
        room = cgroup.headroom()
        if room is None:
            lines.append(f"  cgroup v{cgroup.version} {cgroup.path}: no limit on it or above it")
        else:
            candidates.append(room.free_bytes)
            lines.append(
                f"  cgroup v{cgroup.version} {room.cgroup.path}: limit {_mb(room.limit_bytes)}"
                f" - in use {_mb(room.in_use_bytes)} (usage {_mb(room.usage_bytes)}"
                f" - inactive file {_mb(room.inactive_file_bytes)}) = {_mb(room.free_bytes)} free"
            )
    available = min(candidates) / MIB if candidates else None
    if available is not None:
        lines.append(f"  available: {available:.1f} MiB (the tighter of the above)")
    return _Fit("memory", mem_mb, available)


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing ancestor (the cache or run folder may not exist yet)."""
    path = path.absolute()
    while not path.exists():
        path = path.parent
    return path


def _disk_fits(
    disk_mb: float, disk_paths: Sequence[str | os.PathLike[str]], lines: list[str]
) -> list[_Fit]:
    lines.append(
        f"disk: need {disk_mb:g} MiB (resources.disk_mb) + {MARGIN:.0%} margin "
        f"= {disk_mb * (1 + MARGIN):.1f} MiB on each filesystem of the cache and run folder"
    )
    fits: list[_Fit] = []
    seen: set[int] = set()
    for raw in disk_paths:
        where = _existing(Path(raw))
        device = os.stat(where).st_dev
        if device in seen:
            lines.append(f"  {raw}: same filesystem as above")
            continue
        seen.add(device)
        vfs = os.statvfs(where)
        free = vfs.f_bavail * vfs.f_frsize
        lines.append(f"  {raw}: {_mb(free)} free on the filesystem of {where}")
        fits.append(_Fit(f"disk at {raw}", disk_mb, free / MIB))
    return fits


def _judge(fit: _Fit, accept_risk: bool, lines: list[str], caveats: list[str]) -> bool:
    """Append the verdict line for one need; return False where the run must not start."""
    headroom = fit.headroom
    if headroom is None:
        lines.append(f"  -> {fit.what}: cannot tell what is available")
        if accept_risk:
            caveats.append(f"{fit.what} available could not be measured; ran at accepted risk")
            return True
        lines.append("     rerun with --bench-accept-risk to run without this check")
        return False
    if headroom < 0:
        lines.append(
            f"  -> {fit.what} does not fit: need {fit.need_mb:g} MiB > "
            f"{fit.available_mb:.1f} MiB available; lower the resources value or free some"
        )
        return False
    if headroom < MARGIN:
        lines.append(
            f"  -> {fit.what}: headroom {headroom:.1%} is under the {MARGIN:.0%} margin"
            f" ({fit.need_mb:g} of {fit.available_mb:.1f} MiB)"
        )
        if accept_risk:
            caveats.append(
                f"{fit.what} headroom {headroom:.1%} under the {MARGIN:.0%} margin "
                f"(need {fit.need_mb:g} MiB, available {fit.available_mb:.1f} MiB); "
                "ran with --bench-accept-risk"
            )
            return True
        lines.append("     rerun with --bench-accept-risk to run anyway")
        return False
    lines.append(f"  -> {fit.what} fits with {headroom:.1%} headroom")
    return True


def check_resources(
    mem_mb: float | None,
    disk_mb: float | None,
    disk_paths: Sequence[str | os.PathLike[str]],
    accept_risk: bool,
    *,
    proc_root: str | os.PathLike[str] = "/proc",
    cgroup_root: str | os.PathLike[str] = "/sys/fs/cgroup",
) -> PreflightResult:
    """Check declared memory and disk against what this machine and cgroup can give the run."""
    if mem_mb is not None and mem_mb <= 0:
        raise ValueError(f"resources.mem_mb must be > 0 MiB, got {mem_mb}; fix the config")
    if disk_mb is not None and disk_mb <= 0:
        raise ValueError(f"resources.disk_mb must be > 0 MiB, got {disk_mb}; fix the config")
    if disk_mb is not None and not disk_paths:
        raise ValueError("preflight: resources.disk_mb is set but no folders were given to check")
    lines: list[str] = []
    caveats: list[str] = []
    verdicts: list[bool] = []
    if mem_mb is None:
        lines.append("memory: no resources.mem_mb declared; not checked")
    else:
        fit = _memory_fit(mem_mb, Path(proc_root), Path(cgroup_root), lines)
        verdicts.append(_judge(fit, accept_risk, lines, caveats))
    if disk_mb is not None:
        for fit in _disk_fits(disk_mb, disk_paths, lines):
            verdicts.append(_judge(fit, accept_risk, lines, caveats))
    ok = all(verdicts)
    if not ok:
        head = "preflight: the declared resources do not fit this run"
    elif caveats:
        head = "preflight: resources fit only at accepted risk"
    else:
        head = "preflight: resources fit"
    return PreflightResult(
        ok=ok,
        caveat="; ".join(caveats) or None,
        message="\n".join([head, *lines]),
        lines=lines,
    )


def _stage_estimate(stage: Stage, config: BenchmarkConfig) -> tuple[float, str]:
    """GPU-hours of one execution of ``stage`` and the field it comes from."""
    if stage.est_gpu_hours is not None:
        return stage.est_gpu_hours, f"stage {stage.name}'s resources.est_gpu_hours"
    if stage.kind == "measure":
        return config.resources.est_gpu_hours, "resources.est_gpu_hours"
    return 0.0, "no est_gpu_hours"


def declared_per_trial(config: BenchmarkConfig) -> float:
    """The declared GPU-hours of one trial: the mean over the measure stages' estimates."""
    measures = [s for s in config.stages if s.kind == "measure"]
    if not measures:
        return config.resources.est_gpu_hours
    return sum(_stage_estimate(s, config)[0] for s in measures) / len(measures)


def check_gpu_budget(
    config: BenchmarkConfig, trial_stages: Iterable[Stage], prep_stages: Iterable[Stage]
) -> list[str] | None:
    """The arithmetic of a plan's estimated GPU-hours and cost when it exceeds the budget
    (None: it fits, or nothing is estimated or budgeted). ``trial_stages`` holds one stage per
    planned trial, ``prep_stages`` one per planned prep build."""
    budget = config.budget
    if budget.gpu_hours is None and budget.cost_usd is None:
        return None
    trials = Counter(stage.name for stage in trial_stages)
    builds = Counter(stage.name for stage in prep_stages)
    by_name = {stage.name: stage for stage in config.stages}
    planned = sum(trials.values())
    share = 1.0
    lines: list[str] = []
    if budget.trials is not None and budget.trials < planned:
        share = budget.trials / planned
        lines.append(f"budget.trials stops the run after {budget.trials} of {planned} trials")
    total = 0.0
    for name, count in (*trials.items(), *builds.items()):
        each, source = _stage_estimate(by_name[name], config)
        if each == 0:
            continue
        ran = count * share if name in trials else count
        what = "trial(s)" if name in trials else "build(s), if none is cached,"
        lines.append(
            f"{name}: {ran:g} {what} x {each:g} GPU-hours ({source}) = {ran * each:g} GPU-hours."
        )
        total += ran * each
    if total == 0:
        return None
    price = config.resources.price_per_gpu_hour
    over = []
    if budget.gpu_hours is not None and total > budget.gpu_hours:
        over.append(f"estimated {total:g} GPU-hours > budget.gpu_hours {budget.gpu_hours:g}")
    if budget.cost_usd is not None and total * price > budget.cost_usd:
        over.append(
            f"estimated {total:g} GPU-hours x ${price:g}/GPU-hour "
            f"(resources.price_per_gpu_hour) = ${total * price:g} > budget.cost_usd "
            f"${budget.cost_usd:g}"
        )
    if not over:
        return None
    return [f"the plan does not fit its budget: {'; '.join(over)}", *lines]


def gate_one(
    config: BenchmarkConfig,
    path: Path,
    *,
    tuning: bool,
    home: Path | None,
    revisions: bool = False,
) -> None:
    """Gate 1 of ``config`` (read from ``path``), given the latest RELIABLE run under ``home``
    (a missing manifest param's hint) and this machine's counting backend; ``revisions``:
    under ``--bench-against``."""
    gate1.check(
        config,
        path,
        tuning=tuning,
        latest=_latest(home) if home else None,
        machine=counter_problems,
        revisions=revisions,
    )


def _latest(home: Path) -> LatestReliable:
    """The latest RELIABLE run under ``home``, read only when gate 1 asks (a manifest param
    missing): the plan review's imports are not paid by every session."""

    def latest(name: str) -> tuple[str, dict[str, Any]] | None:
        from pytest_benchmark_agent.judge.review import latest_reliable_values  # ~6 ms, rare

        return latest_reliable_values(home, name)

    return latest


def counter_problems(config: BenchmarkConfig) -> list[Problem]:
    """Counters need a backend here; a timing only counted stages report is distorted."""
    counted = [stage for stage in config.stages if stage.counters]
    if not counted:
        return []
    from pytest_benchmark_agent.engine.counters import INSTALL_HINT, backend

    found = backend()
    if found is None:
        return [
            (
                f"stages ({stage.name}).counters",
                f"asks for {stage.counters} but no counting backend is available on this "
                "machine (perf with a hardware PMU, or valgrind's cachegrind).",
                f"{INSTALL_HINT} (docs/benchmark/STATISTICS.md, deterministic counters).",
            )
            for stage in counted
        ]
    measures = [stage for stage in config.stages if stage.kind == "measure"]
    if len(counted) < len(measures):
        return []
    return [
        (
            f"metrics.{name}",
            f"is measured only under the counting backend ({found.label}), which distorts it.",
            "drop it from metrics:, or measure it in a stage without counters:.",
        )
        for name in config.metrics
        if name in found.distorts
    ]
