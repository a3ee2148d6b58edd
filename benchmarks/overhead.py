"""The harness's own cost, side by side with the tools people would use instead.

Four comparisons, each measured against its reference in the same run, the contenders
interleaved (every repetition runs each of them, in a rotated order, so drift of this shared
machine hits them alike; the marginal and inert lines, differences of two whole-process walls,
take a few pairs per repetition), and a table of medians and ratios at the end. Each target
also gets a 95% interval (a bootstrap of its samples), and the verdict follows benchstat's rule
of refusing a noise-level answer: ``met`` when the whole interval is within the limit,
``MISSED`` when none of it is, ``within noise`` when the limit falls inside it. The
comparisons:

* **marginal cost per trial**: sessions of a measure stage running ``true`` with N and 2N
  trials, ``(wall(2N) - wall(N)) / N``, against ``hyperfine -N --runs N true`` (the median of
  its runs; its mean, the figure hyperfine prints, is shown beside it: the marginal is a mean
  too, but a mean of hyperfine's 0.2-second window swings with this VM's stalls), a
  bare Python ``subprocess.run(["true"])`` loop, and plain pytest items each running ``true``.
  The stage's shell runs ``true`` as a builtin, so a trial spawns one program (``/bin/sh``) as
  hyperfine's run spawns one (``true``). Also shown: the in-session cycle per trial, from the
  ``started`` stamps in ``trials.jsonl`` (no start-up noise in it).
* **cached session**: a two-stage pipeline (a prep, cached, and one measure trial of ``true``)
  as a whole ``pytest --bench`` process, against ``dvc repro`` of the same pipeline with
  everything cached (a no-op).
* **planning scale**: ``pytest --bench --collect-only`` of a file with 10,000 trials, against
  plain pytest collecting 10,000 parametrized cases.
* **inert cost**: a normal 200-test suite with the plugin installed but no ``--bench``, against
  the same with ``-p no:benchmark_agent`` (the median of paired differences). A difference of
  two whole-process walls spreads over +-100 ms per pair on a busy machine, far wider than the
  target, so the line below it gives the main part of that cost without the walls' noise: the
  import time of the plugin's own modules (``python -X importtime``, after ``import pytest``,
  as pytest's entry-point loading imports them).

Every pytest run disables the other pytest plugins installed here (``-p no:NAME``), so only
this plugin differs between the contenders. Child processes write bytecode to a cache in the
temporary folder (``PYTHONPYCACHEPREFIX``, ``PYTHONDONTWRITEBYTECODE`` removed), as a normal
installation does, and the full mode runs each contender once unmeasured first.

hyperfine: ``apt-get install hyperfine`` (Debian/Ubuntu). DVC: install it in its own
environment (``python -m venv /tmp/dvc-venv && /tmp/dvc-venv/bin/pip install dvc``) and pass
``--dvc /tmp/dvc-venv/bin/dvc``. A missing tool skips its line with a note.

Run: ``python benchmarks/overhead.py`` (full mode, a few minutes on a busy 2-core machine) or
``python benchmarks/overhead.py --quick`` (tiny sizes, one repetition: a smoke run whose figures
mean little). ``--json FILE`` keeps every sample; ``--only marginal,inert`` runs only those
comparisons (the others' lines say they were not selected).
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

PLUGIN = "benchmark_agent"
PACKAGE = "pytest_benchmark_agent"
#: A line of ``python -X importtime``: self and cumulative microseconds, the (indented) module.
IMPORT_TIME = re.compile(r"^import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)\s*$", re.MULTILINE)
#: The four comparisons, in the table's order (``--only`` picks some).
ROWS = ("marginal", "cached", "planning", "inert")
DISTRIBUTION = "pytest-benchmark-agent"
#: Each target's interval: a percentile bootstrap of its median (or ratio of medians), with a
#: fixed seed so the same samples always print the same table.
CONFIDENCE = 0.95
RESAMPLES = 4000
SEED = 20261203
HYPERFINE_HINT = "apt-get install hyperfine (Debian/Ubuntu), then rerun"
DVC_HINT = (
    "python -m venv /tmp/dvc-venv && /tmp/dvc-venv/bin/pip install dvc, "
    "then pass --dvc /tmp/dvc-venv/bin/dvc"
)
BARE_LOOP = """
import subprocess, sys, time
n = int(sys.argv[1])
t0 = time.perf_counter()
for _ in range(n):
    subprocess.run(["true"])
print(repr((time.perf_counter() - t0) / n))
"""


@dataclass(frozen=True)
class Sizes:
    """How big each comparison is, and how often it is repeated."""

    trials: int  # the small marginal session; the large one has twice as many
    runs: int  # hyperfine runs and bare-loop iterations
    planned: int  # trials (and parametrized cases) collected by the planning comparison
    suite: int  # tests in the inert comparison's suite
    repeats: int
    inert_pairs: int  # inert pairs per repetition (its difference is small and noisy)
    #: (N, 2N) session pairs per repetition for the marginal lines: each sample is a difference
    #: of two whole-process walls, so its spread is theirs (about +-2 ms per trial here)
    marginal_pairs: int
    warmup: bool


FULL = Sizes(
    trials=200,
    runs=200,
    planned=10_000,
    suite=200,
    repeats=7,
    inert_pairs=3,
    marginal_pairs=5,
    warmup=True,
)
QUICK = Sizes(
    trials=6,
    runs=20,
    planned=200,
    suite=20,
    repeats=1,
    inert_pairs=1,
    marginal_pairs=1,
    warmup=False,
)


class OverheadError(RuntimeError):
    """A contender did not do what it is measured doing (so its time would mean nothing)."""


@dataclass
class Line:
    """One measured line of the table: samples in seconds, or the reason it was skipped."""

    row: str
    what: str
    samples: list[float] = field(default_factory=list)
    skipped: str | None = None

    def median(self) -> float | None:
        return statistics.median(self.samples) if self.samples and not self.skipped else None


@dataclass(frozen=True)
class Target:
    """A ratio (or, with ``absolute``, a value in seconds) the harness must stay within."""

    row: str
    what: str
    ours: str
    reference: str | None
    limit: float
    absolute: bool = False

    def value(self, lines: dict[str, Line]) -> float | None:
        ours = lines[self.ours].median()
        if self.reference is None:
            return ours
        reference = lines[self.reference].median()
        return None if ours is None or reference is None else ours / reference

    def interval(self, lines: dict[str, Line]) -> tuple[float, float] | None:
        """The ``CONFIDENCE`` interval of :meth:`value`, both lines' samples resampled; None
        without a value or where a line has one sample (a smoke run: its noise unmeasured).
        """
        ours = lines[self.ours].samples
        reference = lines[self.reference].samples if self.reference else None
        if self.value(lines) is None or min(len(ours), len(reference or ours)) < 2:
            return None
        rng = random.Random(SEED)

        def resampled_median(samples: list[float]) -> float:
            return statistics.median(rng.choices(samples, k=len(samples)))

        estimates = sorted(
            resampled_median(ours) / (resampled_median(reference) if reference else 1.0)
            for _ in range(RESAMPLES)
        )
        tail = (1 - CONFIDENCE) / 2
        return (
            estimates[int(tail * (RESAMPLES - 1))],
            estimates[int((1 - tail) * (RESAMPLES - 1))],
        )

    def verdict(self, value: float, interval: tuple[float, float] | None) -> str:
        """``met`` only when the whole interval is within the limit, ``MISSED`` only when none
        of it is: a limit inside the interval is this machine's noise, not a result. Without
        an interval, the value alone is judged, and the verdict says so."""
        if value <= 0 and not self.absolute:  # a cost is never negative: noise won
            return "no estimate (noise: median <= 0; more repetitions)"

        def within(x: float) -> bool:
            return x < self.limit if self.absolute else x <= self.limit

        if interval is None:
            return ("met" if within(value) else "MISSED") + " (one sample: noise not measured)"
        low, high = interval
        if within(high):
            return "met"
        if not within(low):
            return "MISSED"
        return "within noise (the interval spans the limit; more repetitions)"


class Workspace:
    """The temporary folder the contenders run in, their environment and pytest command."""

    def __init__(self, root: Path, sizes: Sizes):
        self.root = root
        self.sizes = sizes
        self.env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONDONTWRITEBYTECODE", "PYTEST_ADDOPTS", "BENCHMARK_HOME")
        }
        self.env.update(
            PYTHONPYCACHEPREFIX=str(root / "pycache"),
            DVC_NO_ANALYTICS="1",
            DVC_SITE_CACHE_DIR=str(root / "dvc-site"),
        )
        self.others = foreign_plugins()
        (root / "pytest.ini").write_text("[pytest]\n")  # no configuration from above root

    def pytest(self, *args: str) -> list[str]:
        off = [arg for name in self.others for arg in ("-p", f"no:{name}")]
        return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *off, *args]

    def run(
        self,
        command: list[str],
        expect: str | None = None,
        cwd: Path | None = None,
    ) -> tuple[float, str]:
        """Wall time (seconds) and output of ``command``, which must exit 0 and print ``expect``."""
        t0 = time.perf_counter()
        proc = subprocess.run(
            command,
            cwd=cwd or self.root,
            env=self.env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - t0
        if proc.returncode != 0 or (expect and not re.search(expect, proc.stdout)):
            wanted = f" and print /{expect}/" if expect else ""
            raise OverheadError(
                f"{' '.join(command)} (in {cwd or self.root}) should exit 0"
                f"{wanted}; it exited {proc.returncode}:\n{proc.stdout[-3000:]}"
            )
        return wall, proc.stdout


@dataclass(frozen=True)
class Tool:
    """An outside tool a line compares against: its executable, or why it is not measured."""

    path: str | None
    missing: str | None = None

    @classmethod
    def find(cls, name: str, given: str | None, hint: str) -> Tool:
        if given == "none":
            return cls(None, f"--{name} none")
        path = shutil.which(given or name)
        if path is None and given:
            raise ValueError(f"--{name} {given}: not an executable; give its path or 'none'")
        return cls(path, None if path else f"{name} not found: {hint}")


def foreign_plugins() -> list[str]:
    """Entry-point names of the installed pytest plugins other than this one."""
    names = set()
    for dist in metadata.distributions():
        if (dist.metadata["Name"] or "").lower() == DISTRIBUTION:
            continue
        names.update(ep.name for ep in dist.entry_points if ep.group == "pytest11")
    return sorted(names)


# -- the files each comparison runs --------------------------------------------------------


def measure_bench(name: str, trials: int) -> str:
    """A benchmark of ``trials`` trials of a measure stage running ``true`` (two treatments)."""
    return f"""name: {name}
params: {{mode: a}}
treatment_variable: mode
treatments: [a, b]
replicates: {trials // 2}
stages:
  - name: run
    kind: measure
    cmd: "true {{mode}}"
    metrics_from: {{fields: [wall_s]}}
metrics:
  wall_s: {{direction: lower, primary: true}}
"""


CACHED_BENCH = """name: overhead-cached
params: {mode: a, size: 3}
treatment_variable: mode
treatments: [a, b]
replicates: 1
stages:
  - name: prep
    kind: prep
    cmd: "printf {size} > {data}"
    produces: [data]
  - name: run
    kind: measure
    needs: [prep]
    cmd: "true {mode} {data}"
    metrics_from: {fields: [wall_s]}
metrics:
  wall_s: {direction: lower, primary: true}
"""

DVC_PIPELINE = """stages:
  prep:
    cmd: printf 3 > data
    outs: [data]
  run:
    cmd: true a data
    deps: [data]
"""


def parametrized(count: int, body: str) -> str:
    return (
        f"import subprocess\n\nimport pytest\n\n\n@pytest.mark.parametrize('i', "
        f"range({count}))\ndef test_case(i):\n    {body}\n"
    )


def suite_file(start: int, count: int) -> str:
    """Ordinary tests: small functions with plain asserts (rewritten by pytest, as usual)."""
    return "".join(
        f"def test_{i}():\n    values = [{i}, {i} + 1]\n    assert sum(values) == {2 * i + 1}\n\n\n"
        for i in range(start, start + count)
    )


# -- the comparisons ------------------------------------------------------------------------


class Comparisons:
    """Writes every contender's files, then runs them one sample at a time."""

    def __init__(self, ws: Workspace, hyperfine: Tool, dvc: Tool, rows: Sequence[str] = ROWS):
        self.ws = ws
        s = ws.sizes
        n, big = s.trials, 2 * s.trials
        self.lines: dict[str, Line] = {}
        add = self._line
        add("bench", "marginal", f"pytest --bench, per trial (({big} - {n} trial sessions) / {n})")
        add("cycle", "marginal", f"  the same, in-session cycle per trial ({big} trials)")
        add(
            "hyperfine",
            "marginal",
            f"hyperfine -N --runs {s.runs} true, median run",
            hyperfine.missing,
        )
        add(
            "hyperfine_mean",
            "marginal",
            "  the same, mean per run (hyperfine's own figure)",
            hyperfine.missing,
        )
        add("loop", "marginal", f'python subprocess.run(["true"]) loop of {s.runs}, per run')
        add("plain", "marginal", f"plain pytest, per item running true (({big} - {n}) / {n})")
        add("cached", "cached", "pytest --bench, prep cached + 1 trial, whole process")
        add("one", "cached", "plain pytest, one test, whole process")
        add("dvc", "cached", "dvc repro, everything cached (no-op), whole process", dvc.missing)
        add("plan", "planning", f"pytest --bench --collect-only, {s.planned} trials")
        add("collect", "planning", f"pytest --collect-only, {s.planned} parametrized cases")
        add("with", "inert", f"pytest, {s.suite} tests, plugin installed (no --bench)")
        add("without", "inert", f"pytest, {s.suite} tests, -p no:{PLUGIN}")
        add("inert", "inert", "  difference (median of paired runs)")
        add("import", "inert", "  the plugin's own modules, import time (python -X importtime)")
        for line in self.lines.values():  # unselected first: a missing tool is then moot
            if line.row not in rows:
                line.skipped = "not selected (--only)"
        self.hyperfine = hyperfine.path
        self.dvc = dvc.path if "cached" in rows else None  # its project is built only if used
        self.rows = rows
        self._flips = 0
        self._write(n, big)

    def _line(self, key: str, row: str, what: str, skipped: str | None = None) -> None:
        self.lines[key] = Line(row, what, skipped=skipped)

    def _write(self, n: int, big: int) -> None:
        root, s = self.ws.root, self.ws.sizes
        files = {
            "marginal/bench_small.yaml": measure_bench("overhead-small", n),
            "marginal/bench_large.yaml": measure_bench("overhead-large", big),
            "plain/test_small.py": parametrized(n, "subprocess.run(['true'], check=True)"),
            "plain/test_large.py": parametrized(big, "subprocess.run(['true'], check=True)"),
            "cached/bench.yaml": CACHED_BENCH,
            "one/test_one.py": "def test_one():\n    pass\n",
            "planning/bench.yaml": measure_bench("overhead-planning", s.planned),
            "collecting/test_cases.py": parametrized(s.planned, "pass"),
        }
        per_file = max(1, s.suite // 4)
        for start in range(0, s.suite, per_file):
            files[f"suite/test_suite{start // per_file}.py"] = suite_file(
                start, min(per_file, s.suite - start)
            )
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        if self.dvc:
            project = root / "dvc"
            project.mkdir()
            (project / "dvc.yaml").write_text(DVC_PIPELINE)
            self.ws.run([self.dvc, "init", "--no-scm", "-q"], cwd=project)
            self.ws.run([self.dvc, "repro", "-q"], cwd=project)  # builds; later runs are no-ops

    def home(self, name: str, keep_cache: bool = False) -> Path:
        """A data directory with no runs in it (and, unless ``keep_cache``, no cache)."""
        home = self.ws.root / "homes" / name
        shutil.rmtree(home / "runs" if keep_cache else home, ignore_errors=True)
        return home

    # Each probe adds one sample to its lines.

    def marginal(self) -> None:
        ws, n = self.ws, self.ws.sizes.trials
        for _ in range(ws.sizes.marginal_pairs):
            walls = {}
            for size in self._order():
                walls[size], _ = ws.run(
                    ws.pytest(
                        "--bench",
                        f"marginal/bench_{size}.yaml",
                        "--bench-home",
                        str(self.home(size)),
                    ),
                    expect=rf"\b{n if size == 'small' else 2 * n} passed",
                )
            self.lines["bench"].samples.append((walls["large"] - walls["small"]) / n)
            cycle = journal_cycle(self.ws.root / "homes" / "large")
            if cycle is not None:
                self.lines["cycle"].samples.append(cycle)

    def plain(self) -> None:
        ws, n = self.ws, self.ws.sizes.trials
        for _ in range(ws.sizes.marginal_pairs):
            walls = {}
            for size in self._order():
                walls[size], _ = ws.run(
                    ws.pytest(f"plain/test_{size}.py"),
                    expect=rf"\b{n if size == 'small' else 2 * n} passed",
                )
            self.lines["plain"].samples.append((walls["large"] - walls["small"]) / n)

    def _order(self) -> tuple[str, str]:
        """small, large, then large, small on the next call: neither always goes first."""
        self._flips += 1
        return ("small", "large") if self._flips % 2 else ("large", "small")

    def loop(self) -> None:
        _, out = self.ws.run([sys.executable, "-c", BARE_LOOP, str(self.ws.sizes.runs)])
        self.lines["loop"].samples.append(float(out.strip().splitlines()[-1]))

    def hyperfine_run(self) -> None:
        if not self.hyperfine:
            return
        export = self.ws.root / "hyperfine.json"
        self.ws.run(
            [
                self.hyperfine,
                "-N",
                "--runs",
                str(self.ws.sizes.runs),
                "--style",
                "none",
                "--export-json",
                str(export),
                "true",
            ]
        )
        result = json.loads(export.read_text())["results"][0]
        self.lines["hyperfine"].samples.append(statistics.median(result["times"]))
        self.lines["hyperfine_mean"].samples.append(result["mean"])

    def cached(self) -> None:
        home = self.home("cached", keep_cache=True)
        wall, _ = self.ws.run(
            self.ws.pytest(
                "--bench",
                "cached/bench.yaml",
                "--bench-home",
                str(home),
                "--deselect",
                "cached/bench.yaml::run[mode=b-rep0]",
            ),
            expect=r"\b1 passed, 1 deselected",
        )
        record = next((home / "runs").glob("*/results.yaml")).read_text()
        if not re.search(r"action: reused", record):
            raise OverheadError(
                f"the cached session rebuilt its prep ({home}): the cached-session "
                "figure would include a build"
            )
        self.lines["cached"].samples.append(wall)

    def one_test(self) -> None:
        wall, _ = self.ws.run(self.ws.pytest("one/test_one.py"), expect=r"\b1 passed")
        self.lines["one"].samples.append(wall)

    def build_cache(self) -> None:
        """The run that builds the prep every measured cached session then reuses."""
        home = self.home("cached")
        self.ws.run(
            self.ws.pytest(
                "--bench",
                "cached/bench.yaml",
                "--bench-home",
                str(home),
                "--deselect",
                "cached/bench.yaml::run[mode=b-rep0]",
            ),
            expect=r"\b1 passed",
        )

    def dvc_run(self) -> None:
        if not self.dvc:
            return
        project = self.ws.root / "dvc"
        before = (project / "data").stat().st_mtime_ns, (project / "dvc.lock").read_text()
        wall, _ = self.ws.run([self.dvc, "repro"], cwd=project)
        if ((project / "data").stat().st_mtime_ns, (project / "dvc.lock").read_text()) != before:
            raise OverheadError(f"dvc repro in {project} re-ran a stage: it is not a no-op")
        self.lines["dvc"].samples.append(wall)

    def planning(self) -> None:
        ws, count = self.ws, self.ws.sizes.planned
        expect = rf"\b{count} tests collected"
        wall, _ = ws.run(
            ws.pytest(
                "--bench",
                "--collect-only",
                "planning/bench.yaml",
                "--bench-home",
                str(self.home("planning")),
            ),
            expect=expect,
        )
        self.lines["plan"].samples.append(wall)
        wall, _ = ws.run(ws.pytest("--collect-only", "collecting/test_cases.py"), expect=expect)
        self.lines["collect"].samples.append(wall)

    def inert(self) -> None:
        ws, suite = self.ws, self.ws.sizes.suite
        expect = rf"\b{suite} passed"
        for pair in range(ws.sizes.inert_pairs):
            order = ("with", "without") if pair % 2 == 0 else ("without", "with")
            walls = {}
            for side in order:
                extra = ("-p", f"no:{PLUGIN}") if side == "without" else ()
                walls[side], _ = ws.run(ws.pytest(*extra, "suite"), expect=expect)
                self.lines[side].samples.append(walls[side])
            self.lines["inert"].samples.append(walls["with"] - walls["without"])
        _, output = ws.run(
            [sys.executable, "-X", "importtime", "-c", f"import pytest; import {PACKAGE}.plugin"]
        )
        self.lines["import"].samples.append(own_import_s(output, PACKAGE))

    def probes(self) -> list[Callable[[], None]]:
        """The probes of the comparisons (rows) asked for, in the table's order."""
        by_row = {
            "marginal": [self.marginal, self.hyperfine_run, self.loop, self.plain],
            "cached": [self.cached, self.one_test, self.dvc_run],
            "planning": [self.planning],
            "inert": [self.inert],
        }
        return [probe for row in ROWS if row in self.rows for probe in by_row[row]]

    def warm_up(self, probes: Sequence[Callable[[], None]]) -> None:
        """One unmeasured run of each contender: bytecode caches, page cache, dvc's imports."""
        for probe in probes:
            probe()
        for line in self.lines.values():
            line.samples.clear()


def own_import_s(output: str, package: str) -> float:
    """Seconds a process spent importing ``package`` and its submodules (their own times, not
    what they imported from elsewhere), from ``-X importtime`` lines in ``output``."""
    return (
        sum(
            int(self_us)
            for self_us, name in IMPORT_TIME.findall(output)
            if name == package or name.startswith(package + ".")
        )
        / 1e6
    )


def journal_cycle(home: Path) -> float | None:
    """Mean seconds from one trial's start to the next's, from the run's ``trials.jsonl``."""
    journals = list((home / "runs").glob("*/trials.jsonl"))
    if len(journals) != 1:
        return None
    stamps = [json.loads(line).get("started") for line in journals[0].read_text().splitlines()]
    if len(stamps) < 2 or not all(stamps):
        return None
    first, last = (datetime.fromisoformat(s.rstrip("Z")) for s in (stamps[0], stamps[-1]))
    return (last - first).total_seconds() / (len(stamps) - 1)


TARGETS = (
    Target("marginal", "pytest --bench per trial / hyperfine per run", "bench", "hyperfine", 3.0),
    Target("cached", "pytest --bench cached session / dvc no-op repro", "cached", "dvc", 0.6),
    Target("planning", "pytest --bench --collect-only / plain pytest", "plan", "collect", 1.5),
    Target(
        "inert", "plugin installed minus -p no:benchmark_agent", "inert", None, 0.010, absolute=True
    ),
)

#: Ratios printed for context, not judged: where pytest itself stands against the references
#: (a floor no plugin running each trial as a pytest item can go below), and the plugin
#: against pytest.
CONTEXT = (
    Target(
        "marginal",
        "plain pytest per item / hyperfine per run (pytest's floor)",
        "plain",
        "hyperfine",
        0,
    ),
    Target("marginal", "pytest --bench per trial / plain pytest per item", "bench", "plain", 0),
    Target(
        "marginal",
        "pytest --bench per trial / hyperfine's mean per run",
        "bench",
        "hyperfine_mean",
        0,
    ),
    Target("cached", "plain pytest one test / dvc no-op repro (pytest's floor)", "one", "dvc", 0),
    Target("cached", "pytest --bench cached session / plain pytest one test", "cached", "one", 0),
)


# -- the table ------------------------------------------------------------------------------


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f} ms"


#: Per target row: its value and its interval (either None where it cannot be had).
Judged = dict[str, tuple[float | None, tuple[float, float] | None]]


def judge(lines: dict[str, Line]) -> Judged:
    """Every target's value and interval, computed once for the table and the samples file
    (the bootstrap is the only slow part of either)."""
    return {t.row: (t.value(lines), t.interval(lines)) for t in TARGETS}


def render(lines: dict[str, Line], header: list[str], judged: Judged | None = None) -> str:
    out = [*header, "", f"{'row':<10} {'measurement':<64} {'median':>12} {'min':>12} {'n':>3}"]
    for line in lines.values():
        if line.skipped:
            out.append(f"{line.row:<10} {line.what:<64} skipped: {line.skipped}")
            continue
        low = min(line.samples) if line.samples else None
        out.append(
            f"{line.row:<10} {line.what:<64} {ms(line.median()):>12} {ms(low):>12} "
            f"{len(line.samples):>3}"
        )
    out += [
        "",
        f"{'target':<10} {'ratio':<64} {'value':>12} {f'{CONFIDENCE:.0%}-interval':>22} "
        f"{'limit':>12}  result",
    ]
    if judged is None:
        judged = judge(lines)
    for target in TARGETS:
        value, interval = judged[target.row]
        limit = f"< {ms(target.limit)}" if target.absolute else f"<= {target.limit:g}x"
        if value is None:
            missing = [
                lines[k].skipped for k in (target.ours, target.reference) if k and lines[k].skipped
            ]
            shown, spread = "-", "-"
            result = "skipped" + (f" ({missing[0].split(':')[0]})" if missing else "")
        else:
            shown = ms(value) if target.absolute else f"{value:.2f}x"
            spread = (
                "-"
                if interval is None
                else (
                    f"{interval[0] * 1e3:.1f} to {interval[1] * 1e3:.1f} ms"
                    if target.absolute
                    else f"{interval[0]:.2f}x to {interval[1]:.2f}x"
                )
            )
            result = target.verdict(value, interval)
        out.append(
            f"{target.row:<10} {target.what:<64} {shown:>12} {spread:>22} {limit:>12}  {result}"
        )
    out += ["", f"{'context':<10} {'ratio':<64} {'value':>12}"]
    for context in CONTEXT:
        value = context.value(lines)
        out.append(
            f"{context.row:<10} {context.what:<64} {'-' if value is None else f'{value:.2f}x':>12}"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes, one repetition, no warm-up: a smoke run"
    )
    parser.add_argument(
        "--repeats", type=int, default=None, help="repetitions (default: 7 full, 1 quick)"
    )
    parser.add_argument(
        "--hyperfine", default=None, help="hyperfine executable, or 'none' (default: from PATH)"
    )
    parser.add_argument(
        "--dvc", default=None, help="dvc executable, or 'none' (default: from PATH)"
    )
    parser.add_argument("--json", type=Path, default=None, help="write every sample to FILE")
    parser.add_argument(
        "--only",
        default=",".join(ROWS),
        help=f"comma-separated comparisons to run (default: all: {','.join(ROWS)})",
    )
    args = parser.parse_args(argv)
    rows = [row.strip() for row in args.only.split(",") if row.strip()]
    unknown = sorted(set(rows) - set(ROWS))
    if unknown or not rows:
        parser.error(f"--only {args.only}: choose from {', '.join(ROWS)}")
    sizes = QUICK if args.quick else FULL
    if args.repeats is not None:
        if args.repeats < 1:
            parser.error(f"--repeats {args.repeats}: give at least 1")
        sizes = Sizes(**{**asdict(sizes), "repeats": args.repeats})
    try:
        hyperfine = Tool.find("hyperfine", args.hyperfine, HYPERFINE_HINT)
        dvc = Tool.find("dvc", args.dvc, DVC_HINT)
    except ValueError as exc:
        parser.error(str(exc))
    load_before = os.getloadavg()[0]
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="overhead-") as tmp:
        ws = Workspace(Path(tmp), sizes)
        try:
            comparisons = Comparisons(ws, hyperfine, dvc, rows)
            probes = comparisons.probes()
            if "cached" in rows:
                comparisons.build_cache()
            if sizes.warmup:
                comparisons.warm_up(probes)
            for rep in range(sizes.repeats):
                shift = rep % len(probes)
                for probe in probes[shift:] + probes[:shift]:
                    probe()
        except OverheadError as exc:
            print(f"overhead: {exc}", file=sys.stderr)
            return 1
        lines = comparisons.lines
    mode = (
        "quick mode (a smoke run: sizes reduced, figures indicative only)"
        if args.quick
        else "full mode"
    )
    header = [
        f"harness overhead, {mode}: {sizes.repeats} repetition(s) interleaved, medians; "
        f"{os.cpu_count()} CPUs, load {load_before:.1f} -> {os.getloadavg()[0]:.1f}, "
        f"{time.monotonic() - t0:.0f} s",
        "every pytest run: -p no:cacheprovider and the other installed plugins disabled ("
        + (", ".join(ws.others) or "none")
        + "); bytecode cached in the temp folder",
    ]
    judged = judge(lines)
    print(render(lines, header, judged))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "mode": "quick" if args.quick else "full",
                    "sizes": asdict(sizes),
                    "lines": {key: asdict(line) for key, line in lines.items()},
                    "targets": {row: value for row, (value, _) in judged.items()},
                    "target_intervals": {row: interval for row, (_, interval) in judged.items()},
                    "context": {t.what: t.value(lines) for t in CONTEXT},
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
