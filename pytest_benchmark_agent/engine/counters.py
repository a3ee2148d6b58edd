"""Deterministic counters of a measure stage (``counters: [instructions]``): the backends.

Instruction counts hardly move on a loaded, shared machine where wall and CPU time vary by
6-58% (docs/benchmark/STATISTICS.md), so a 1% change in the work a stage does can be decided
at a few blocks. Two backends count them, chosen once per process by :func:`detect`:

* ``perf``: ``perf stat -x, -e instructions:u`` where the kernel exposes a hardware PMU
  (``/sys/bus/event_source/devices/cpu``); user-space instructions of the stage and every
  child it starts, at almost no slowdown.
* ``cachegrind``: valgrind's ``--tool=cachegrind --cache-sim=no --trace-children=yes``, which
  follows every exec (pyenv shims, ``sh -c``) and writes one file per process; the counts are
  summed over the whole process tree. It runs the code on a synthetic CPU, ~50-90x slower.

Under either backend the stage's timings (and, under valgrind, its memory) measure the backend
as much as the code: :attr:`Backend.distorts` names them, and a counted trial records them
apart from its metrics, so no verdict uses them. The backend and its version are part of the
environment fingerprint (:func:`fingerprint_label`): counts of different backends are never
compared. The stage still runs in its own process group under the memory guard and its
deadline: the backend is simply the first process of its command.
"""

from __future__ import annotations

import contextlib
import functools
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_benchmark_agent.engine.metrics import file_lines
from pytest_benchmark_agent.errors import MetricError
from pytest_benchmark_agent.records.hashseeds import hash_seed

#: Where the kernel lists a hardware PMU; without it ``perf stat -e instructions`` cannot count.
PMU = Path("/sys/bus/event_source/devices/cpu")
#: Each counter's event name per backend.
EVENTS = {"instructions": {"perf": "instructions:u", "cachegrind": "Ir"}}
#: The fix gate 1 names when no backend is found.
INSTALL_HINT = (
    "install valgrind (Debian/Ubuntu: apt-get install -y valgrind), or run where the kernel "
    "exposes a hardware PMU (/sys/bus/event_source/devices/cpu) and perf is installed"
)
_VERSION_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Backend:
    """A counting backend found on this machine: its name, version and executable."""

    name: str
    version: str
    executable: str

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"

    @property
    def distorts(self) -> tuple[str, ...]:
        """Built-in metrics of a counted trial that measure the backend too."""
        base = ("wall_s", "cpu_s")
        return (*base, "peak_rss_mb") if self.name == "cachegrind" else base


def detect(pmu: Path = PMU, path: str | None = None) -> Backend | None:
    """The backend counting on this machine: perf where a PMU is exposed, else cachegrind,
    else None. ``path`` is the search path for the executables (default: ``$PATH``)."""
    perf = shutil.which("perf", path=path)
    if perf and pmu.exists():
        version = _version([perf, "--version"])
        if version:
            return Backend("perf", version.removeprefix("perf version "), perf)
    valgrind = shutil.which("valgrind", path=path)
    if valgrind:
        version = _version([valgrind, "--version"])
        if version:
            return Backend("cachegrind", version.removeprefix("valgrind-"), valgrind)
    return None


@functools.lru_cache(maxsize=1)
def backend() -> Backend | None:
    """:func:`detect` on this machine, once per process (it runs the tools' ``--version``)."""
    return detect()


def fingerprint_label() -> str | None:
    """The backend as the environment fingerprint records it (``cachegrind 3.19.0``)."""
    found = backend()
    return found.label if found else None


def _version(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=_VERSION_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else None


class Counting:
    """One counted run of a stage: the command to run instead, then the counts it left.

    The backend writes into ``folder`` (inside the trial's log folder, so in the data home);
    :meth:`read` sums what it wrote and removes it.
    """

    def __init__(self, found: Backend, counters: Sequence[str], folder: Path):
        self.backend = found
        self.counters = list(counters)
        self.folder = folder

    def environment(self, env: Mapping[str, str], block: int, base: int = 0) -> dict[str, str]:
        """``env`` with Python's hash seed set from the trial's block and the run's ``base``
        (:func:`hash_seed`), unless already set.

        A random hash seed moves a Python loop's instruction count by up to 10% (dict probe
        sequences); one seed per block gives both treatments of a block the same layout (the
        pair's difference is the code's) while blocks still vary it (the verdict is not one
        layout's), and runs vary it too (a rerun is not the same layouts again)."""
        if "PYTHONHASHSEED" in env:
            return dict(env)
        return {**env, "PYTHONHASHSEED": str(hash_seed(base, block))}

    def command(self, command: str) -> str:
        """``command`` run by ``/bin/sh -c`` under the backend (quoted: nothing is re-parsed)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        inner = f"/bin/sh -c {shlex.quote(command)}"
        tool = shlex.quote(self.backend.executable)
        if self.backend.name == "perf":
            events = ",".join(EVENTS[name]["perf"] for name in self.counters)
            out = shlex.quote(str(self.folder / "perf.csv"))
            return f"{tool} stat -x, -e {events} -o {out} -- {inner}"
        out = shlex.quote(str(self.folder / "cachegrind.out.%p"))
        return (
            f"{tool} --tool=cachegrind --cache-sim=no --trace-children=yes -q "
            f"--cachegrind-out-file={out} -- {inner}"
        )

    def read(self) -> dict[str, int]:
        """Each counter's total over the stage's processes; removes the backend's files.

        Raises MetricError naming the file when a count is missing or unreadable.
        """
        try:
            if self.backend.name == "perf":
                return self._read_perf(self.folder / "perf.csv")
            return self._read_cachegrind()
        finally:
            self.discard()

    def discard(self) -> None:
        """Remove what the backend wrote (a stage that failed leaves no counts behind)."""
        if self.folder.is_dir():
            for entry in self.folder.iterdir():
                with contextlib.suppress(OSError):
                    entry.unlink()
            with contextlib.suppress(OSError):
                self.folder.rmdir()

    def _read_perf(self, path: Path) -> dict[str, int]:
        if not path.is_file():
            raise MetricError(f"perf wrote no counts ({path} is missing).")
        found: dict[str, str] = {}
        for line in file_lines(path):
            fields = line.split(",")
            if len(fields) >= 3 and not line.startswith("#"):
                found[fields[2]] = fields[0]
        counts = {}
        for name in self.counters:
            event = EVENTS[name]["perf"]
            raw = found.get(event)
            if raw is None or not raw.isdigit():
                raise MetricError(
                    f"perf did not count {event} (read {raw!r} from {path}); the kernel may "
                    "refuse it: check /proc/sys/kernel/perf_event_paranoid (<= 2 counts user "
                    "space)."
                )
            counts[name] = int(raw)
        return counts

    def _read_cachegrind(self) -> dict[str, int]:
        files = sorted(self.folder.glob("cachegrind.out.*")) if self.folder.is_dir() else []
        if not files:
            raise MetricError(f"cachegrind wrote no counts (nothing in {self.folder}).")
        totals = dict.fromkeys(self.counters, 0)
        for path in files:
            events: list[str] = []
            summary: list[str] | None = None
            for line in file_lines(path):
                if line.startswith("events:"):
                    events = line.split()[1:]
                elif line.startswith("summary:"):
                    summary = line.split()[1:]
            if summary is None or len(summary) != len(events):
                raise MetricError(f"cachegrind's {path} has no summary line (cut short?).")
            counted = dict(zip(events, summary, strict=True))
            for name in self.counters:
                raw = counted.get(EVENTS[name]["cachegrind"], "")
                if not raw.isdigit():
                    raise MetricError(f"cachegrind's {path} has no count of {name}.")
                totals[name] += int(raw)
        return totals


def counting(counters: Sequence[str], log_dir: Path) -> Counting | None:
    """A :class:`Counting` for a stage asking for ``counters`` (None when it asks for none).

    Raises MetricError when no backend is found (gate 1 refuses that first).
    """
    if not counters:
        return None
    found = backend()
    if found is None:
        raise MetricError(f"no counting backend for counters {list(counters)}: {INSTALL_HINT}.")
    return Counting(found, counters, log_dir / "counters")
