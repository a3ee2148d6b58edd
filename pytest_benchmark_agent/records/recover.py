"""Who owns a run: the claims by which a later session or verb tells a run whose session is gone.

A session killed with SIGKILL (or by the OOM killer, or a power cut) never reaches its end, so
its run would stay ``running`` forever. Each process that records into a run first *claims* it:
``owners/<pid>-<start>.json`` in the run folder names the host, the process by its pid *and*
its start time (a pid alone is reused), the boot, and for an xdist worker its controller. A run
with no ``index.json`` whose every owner on this host is gone is finalized as the session would
have finalized it, as ``interrupted``: the trials of its journal kept, the one in flight (as
its last heartbeat names it) ``interrupted``, the rest ``not_run``, its report (with What Went
Wrong), ``index.json`` and ``results_index.md`` written. A run claimed from another host is
left alone (its owner cannot be checked from here); so is a run with no claim at all (written
before claims existed). Finalizing such a run is the engine's (:mod:`.engine.recovery`).
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.errors import BenchError
from pytest_benchmark_agent.records.bounded import MAX_STATE_BYTES, BadJson, read_json
from pytest_benchmark_agent.util.fsutil import atomic_write

OWNERS = "owners"


def start_ticks(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (with its pid, its identity); None
    for a zombie: it has ended, only its exit status is left for its parent to collect (so a
    killed session counts as gone at once, as ``status`` sees it, not once it is reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return None if fields[0] == b"Z" else int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            return boot.read().strip()
    except OSError:
        return None


def _process(pid: int) -> dict[str, Any]:
    return {"pid": pid, "start_ticks": start_ticks(pid)}


def claim(run_dir: Path) -> Path:
    """Record this process as an owner of ``run_dir`` (made if missing); under xdist only the
    controller, which alone writes the record."""
    me = _process(os.getpid())
    owner = {"host": socket.gethostname(), "boot_id": _boot_id(), **me}
    path = run_dir / OWNERS / f"{me['pid']}-{me['start_ticks']}.json"
    atomic_write(path, json.dumps(owner))
    return path


class RunTaken(BenchError):
    """A run id already claimed by another session, or holding a finished run's record."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        super().__init__(
            f"run {run_dir.name} already exists in {run_dir.parent} (recorded, or claimed by "
            "another session); a run id names one run, and its record is never overwritten "
            "or mixed. Fix: give another --bench-run-id, or leave it out for a fresh one."
        )


def taken(run_dir: Path) -> bool:
    """Whether ``run_dir`` is claimed or holds a record (a look only: :func:`claim_new` claims)."""
    return any(os.path.lexists(run_dir / name) for name in (OWNERS, "results.yaml", "index.json"))


def claim_new(run_dir: Path) -> Path:
    """Claim ``run_dir`` for a new run: its ``owners/`` folder is made with one ``mkdir``, so
    of two sessions given the same run id at once exactly one wins; a folder already claimed
    or holding a record raises :class:`RunTaken` (a detached session's folder, holding only
    its log, is not yet claimed)."""
    if taken(run_dir):
        raise RunTaken(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        (run_dir / OWNERS).mkdir()
    except FileExistsError:
        raise RunTaken(run_dir) from None
    return claim(run_dir)


def _alive(process: dict[str, Any]) -> bool:
    pid, ticks = process.get("pid"), process.get("start_ticks")
    return isinstance(pid, int) and ticks is not None and start_ticks(pid) == ticks


def owner_state(owner: dict[str, Any]) -> str:
    """``alive``, ``gone`` or ``unknown`` (claimed from another host)."""
    if owner.get("host") != socket.gethostname():
        return "unknown"
    if owner.get("boot_id") != _boot_id():
        return "gone"  # the machine rebooted since
    controller = owner.get("controller")
    if _alive(owner) or (isinstance(controller, dict) and _alive(controller)):
        return "alive"
    return "gone"


def orphaned(run_dir: Path) -> bool:
    """Whether ``run_dir`` is unfinished and every one of its owners is gone."""
    return not (run_dir / "index.json").exists() and abandoned(run_dir)


def abandoned(folder: Path) -> bool:
    """Whether ``folder`` (a run, or a session's worktrees) is claimed and every one of its
    owners is gone."""
    try:
        files = list((folder / OWNERS).iterdir())
    except OSError:
        return False
    states = []
    for path in files:
        try:
            owner = read_json(path, MAX_STATE_BYTES)
        except (OSError, BadJson):
            return False  # a claim being written, or unreadable: not ours to judge
        states.append(owner_state(owner) if isinstance(owner, dict) else "unknown")
    return bool(states) and all(state == "gone" for state in states)
