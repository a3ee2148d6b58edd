"""benchmarks/overhead.py runs end to end in its quick mode and prints its two tables.

Only the structure is checked (which lines and targets appear, in which shape); the figures
themselves are speed and belong to the script's output, never to an assertion.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "overhead.py"
MEASURED = re.compile(
    r"^(?P<row>\w+)\s+(?P<what>.+?)\s+(?P<median>-?\d+\.\d{3} ms)\s+"
    r"(?P<min>-?\d+\.\d{3} ms)\s+(?P<n>\d+)$"
)
SKIPPED = re.compile(r"^(?P<row>\w+)\s+(?P<what>.+?)\s+skipped: (?P<why>.+)$")
TARGET = re.compile(
    r"^(?P<row>\w+)\s+(?P<what>.+?)\s+(?P<value>-?\d+\.\d+(x| ms)|-)\s+"
    r"(?P<interval>-?\d+\.\d+x? to -?\d+\.\d+(x| ms)|-)\s+"
    r"(?P<limit>(<=|<) [\d.]+(x| ms))\s+"
    r"(?P<result>(met|MISSED)( \(one sample: noise not measured\))?|within noise.*"
    r"|skipped.*|no estimate.*)$"
)


def _load_script(monkeypatch: pytest.MonkeyPatch):
    """benchmarks/overhead.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("overhead_script", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, script)  # its dataclasses look themselves up
    spec.loader.exec_module(script)
    return script


def _lines(script, **samples: list[float]):
    """Every line the table has, with one sample each unless ``samples`` gives them."""
    lines = {
        key: script.Line(target_row, key, samples=[0.001])
        for key, target_row in (
            ("bench", "marginal"),
            ("cycle", "marginal"),
            ("hyperfine", "marginal"),
            ("hyperfine_mean", "marginal"),
            ("loop", "marginal"),
            ("plain", "marginal"),
            ("cached", "cached"),
            ("one", "cached"),
            ("dvc", "cached"),
            ("plan", "planning"),
            ("collect", "planning"),
            ("with", "inert"),
            ("without", "inert"),
            ("inert", "inert"),
            ("import", "inert"),
        )
    }
    for key, values in samples.items():
        lines[key].samples = values
    return lines


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    """One quick run (DVC left out: its first repro takes longer than the whole smoke run)."""
    samples = tmp_path_factory.mktemp("overhead") / "samples.json"
    proc = run_script("--quick", "--dvc", "none", "--json", str(samples))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, json.loads(samples.read_text())


def tables(output: str) -> tuple[list[str], list[str], list[str]]:
    """The measurement, target and context lines (the three blocks after the header)."""
    blocks = [block.splitlines() for block in output.strip().split("\n\n")]
    assert len(blocks) == 4, output
    measurements, targets, context = blocks[1], blocks[2], blocks[3]
    assert measurements[0].split() == ["row", "measurement", "median", "min", "n"]
    assert targets[0].split() == ["target", "ratio", "value", "95%-interval", "limit", "result"]
    assert context[0].split() == ["context", "ratio", "value"]
    return measurements[1:], targets[1:], context[1:]


def test_quick_mode_prints_every_measurement_line(quick):
    output, _ = quick
    assert output.startswith("harness overhead, quick mode")
    measurements, _, _ = tables(output)
    rows = [line.split()[0] for line in measurements]
    assert rows == ["marginal"] * 6 + ["cached"] * 3 + ["planning"] * 2 + ["inert"] * 4
    for line in measurements:
        assert MEASURED.match(line) or SKIPPED.match(line), line
    dvc = next(line for line in measurements if "dvc repro" in line)
    assert SKIPPED.match(dvc).group("why") == "--dvc none"
    ours = [line for line in measurements if "pytest --bench" in line]
    assert len(ours) == 3 and all(MEASURED.match(line) for line in ours)


def test_quick_mode_prints_the_four_targets(quick):
    output, _ = quick
    _, targets, _ = tables(output)
    parsed = [TARGET.match(line) for line in targets]
    assert all(parsed), targets
    assert [m.group("row") for m in parsed] == ["marginal", "cached", "planning", "inert"]
    assert [m.group("limit") for m in parsed] == ["<= 3x", "<= 0.6x", "<= 1.5x", "< 10.000 ms"]
    cached = parsed[1]
    assert cached.group("value") == "-" and cached.group("result") == "skipped (--dvc none)"
    planning = parsed[2]
    assert planning.group("interval") == "-"
    assert planning.group("result") in (
        "met (one sample: noise not measured)",
        "MISSED (one sample: noise not measured)",
    )


def test_quick_mode_prints_the_context_ratios(quick):
    """pytest's own floor against the references, and the plugin against pytest."""
    output, saved = quick
    _, _, context = tables(output)
    assert [line.split()[0] for line in context] == ["marginal"] * 3 + ["cached"] * 2
    assert context[3].endswith(" -")  # against DVC, left out here
    ours = context[4].split()[-1]  # whole processes: a positive ratio even in a smoke run
    assert ours.endswith("x") and float(ours[:-1]) > 0
    float(context[1].split()[-1].removesuffix("x"))  # a difference of walls: any sign here
    assert saved["context"]["plain pytest one test / dvc no-op repro (pytest's floor)"] is None


def test_samples_file_holds_every_sample(quick):
    _, saved = quick
    assert saved["mode"] == "quick" and saved["sizes"]["repeats"] == 1
    lines = saved["lines"]
    assert lines["dvc"]["skipped"] == "--dvc none" and lines["dvc"]["samples"] == []
    assert len(lines["bench"]["samples"]) == 1 and len(lines["plan"]["samples"]) == 1
    assert len(lines["with"]["samples"]) == len(lines["without"]["samples"]) == 1
    assert set(saved["targets"]) == {"marginal", "cached", "planning", "inert"}
    # one sample per line: no interval to give, and the verdict says the noise is unmeasured
    assert saved["target_intervals"] == dict.fromkeys(saved["targets"])
    if not lines["hyperfine"]["skipped"]:  # hyperfine installed: its median and its mean
        assert len(lines["hyperfine"]["samples"]) == len(lines["hyperfine_mean"]["samples"]) == 1


def test_a_tool_path_that_is_not_executable_is_refused_by_name(tmp_path):
    proc = run_script("--quick", "--hyperfine", str(tmp_path / "hyperfine"))
    assert proc.returncode == 2
    assert f"--hyperfine {tmp_path / 'hyperfine'}: not an executable" in proc.stderr


def test_only_runs_the_comparisons_named_and_skips_the_rest_by_name(tmp_path):
    samples = tmp_path / "samples.json"
    proc = run_script("--quick", "--only", "planning", "--dvc", "none", "--json", str(samples))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    measurements, targets, _ = tables(proc.stdout)
    for line in measurements:
        if line.startswith("planning"):
            assert MEASURED.match(line), line
        elif "dvc repro" not in line:
            assert SKIPPED.match(line).group("why") == "not selected (--only)", line
    results = {m.group("row"): m.group("result") for m in map(TARGET.match, targets)}
    assert results["planning"].split(" (")[0] in ("met", "MISSED")
    assert results["marginal"] == results["inert"] == "skipped (not selected (--only))"
    lines = json.loads(samples.read_text())["lines"]
    assert lines["bench"]["samples"] == [] and len(lines["plan"]["samples"]) == 1


def test_import_time_sums_the_package_own_modules_only(monkeypatch):
    """-X importtime's self times of the package and its submodules, nothing else's."""
    script = _load_script(monkeypatch)
    output = (
        "import time: self [us] | cumulative | imported package\n"
        "import time:       300 |        300 |   pytest_benchmark_agent\n"
        "import time:       467 |        467 |   pytest_benchmark_agent.hookspecs\n"
        "import time:      1999 |     147774 | pytest_benchmark_agent.plugin\n"
        "import time:       926 |      33099 |   __editable___pytest_benchmark_agent_finder\n"
        "import time:        50 |         50 |   pytest_benchmark_agentx\n"
        "import time:      4000 |       4000 | pytest\n"
    )
    assert script.own_import_s(output, "pytest_benchmark_agent") == pytest.approx(0.002766)


def test_only_refuses_an_unknown_comparison_naming_the_choices():
    proc = run_script("--quick", "--only", "marginal,speed")
    assert proc.returncode == 2
    assert "--only marginal,speed: choose from marginal, cached, planning, inert" in proc.stderr


def test_a_ratio_whose_median_is_not_positive_is_no_estimate(monkeypatch):
    """A difference of two noisy walls can come out negative; a cost never is."""
    script = _load_script(monkeypatch)
    lines = _lines(script)
    lines["bench"].samples = [-0.002, -0.001, 0.0005]
    lines["inert"].samples = [-0.004]  # an absolute difference: negative is noise around 0
    _, targets, _ = tables(script.render(lines, ["header"]))
    results = {m.group("row"): m.group("result") for m in map(TARGET.match, targets)}
    assert results["marginal"].startswith("no estimate (noise")
    assert results["inert"] == "met (one sample: noise not measured)"


@pytest.mark.parametrize(
    ("plan", "verdict"),
    [
        ([1.0, 1.1, 1.2, 1.3, 1.4], "met"),  # every resampled ratio <= 1.5x
        ([2.0, 2.1, 2.2, 2.3, 2.4], "MISSED"),  # none of them is
        ([1.0, 1.2, 1.4, 1.6, 1.8], "within noise"),  # the limit lies inside the interval
    ],
)
def test_a_target_is_judged_on_its_interval_not_its_median_alone(monkeypatch, plan, verdict):
    """The benchstat rule: a limit inside the interval is noise, neither met nor missed."""
    script = _load_script(monkeypatch)
    lines = _lines(script, plan=plan, collect=[1.0, 1.0, 1.0])
    planning = next(t for t in script.TARGETS if t.row == "planning")
    low, high = planning.interval(lines)
    assert min(plan) <= low <= planning.value(lines) <= high <= max(plan)
    _, targets, _ = tables(script.render(lines, ["header"]))
    row = next(m for m in map(TARGET.match, targets) if m.group("row") == "planning")
    assert row.group("result").startswith(verdict)
    assert row.group("interval") == f"{low:.2f}x to {high:.2f}x"


def test_an_absolute_target_prints_its_interval_in_milliseconds(monkeypatch):
    script = _load_script(monkeypatch)
    lines = _lines(script, inert=[-0.020, 0.002, 0.004, 0.030])
    _, targets, _ = tables(script.render(lines, ["header"]))
    inert = next(m for m in map(TARGET.match, targets) if m.group("row") == "inert")
    assert inert.group("interval").endswith(" ms")
    assert inert.group("result").startswith("within noise")
