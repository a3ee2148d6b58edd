"""A benchmark's history over commits: ``history --changes`` and ``publish`` on a real git
repository of 12 commits, with a run recorded per commit by a real ``pytest --bench`` session.

The measured metric is synthetic with a known truth: 10 ms, 8% more from commit 7 on; each run
has a machine factor uniform in +-3% and each trial a noise of CV 3% (drawn from a seeded
generator by the test and handed to the stage through a file), so the only step is at commit 7.
A second benchmark (whose name holds markup), an A/B run whose treatment b is twice as fast, is
recorded at the first commit only, so a second ``publish`` after one more run of the first must
leave its pages alone.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest
import yaml
from benchhelpers import git, screenshot_rgb

from pytest_benchmark_agent.cli import main as cli

COMMITS = 12
STEP_AT = 7
STEP = 1.08
TRIALS = 5
SEED = 38

WORK = """\
import json, os, pathlib, sys
truth = float(pathlib.Path("truth.txt").read_text())
draws = pathlib.Path(os.environ["HISTORY_DRAWS"])
counter = draws.with_suffix(".count")
k = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(k + 1))
factor = json.loads(draws.read_text())[k]
half = 0.5 if sys.argv[1:] == ["b"] else 1.0  # the A/B benchmark's treatment b: twice as fast
print(f"value_ms={10.0 * truth * factor * half:.6f}")
print("rss_mb=42")
"""


def bench(name: str, ab: bool = False) -> dict:
    """The benchmark of ``value_ms``; ``ab``: an A/B run of treatments a and b (b twice as
    fast)."""
    treatments = {"params": {"mode": "a"}, "treatment_variable": "mode", "treatments": ["a", "b"]}
    return {
        "name": name,
        "hypothesis": "the value stays what it was",
        "replicates": TRIALS,
        **(treatments if ab else {}),
        "stages": [
            {
                "name": "measure",
                "kind": "measure",
                "cmd": f"{sys.executable} work.py" + (" {mode}" if ab else ""),
                "metrics_from": {"stdout": True, "fields": ["value_ms", "rss_mb"]},
            }
        ],
        "metrics": {
            "value_ms": {"direction": "lower", "primary": True, "min_replicates": 3},
            "rss_mb": {"direction": "lower", "guard": True},
        },
    }


OTHER = 'other <b>bold</b> & "quoted"'
HOSTILE_SUBJECT = "README: <script>alert(1)</script> & <b>x</b>\x07\x1b[31m"


def record(repo: Path, home: Path, draws: list[float], files: tuple[str, ...]) -> None:
    """One real benchmark session on the checked-out commit, its trials drawing ``draws``."""
    path = home.parent / "draws.json"
    path.write_text(json.dumps(draws))
    path.with_suffix(".count").unlink(missing_ok=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--bench",
            *files,
            "--bench-home",
            str(home),
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
        ],
        cwd=repo,
        env={**os.environ, "HISTORY_DRAWS": str(path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def run_draws(rng: np.random.Generator) -> list[float]:
    machine = rng.uniform(0.97, 1.03)
    return [float(machine * x) for x in rng.normal(1.0, 0.03, TRIALS)]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    """The repository (12 commits, a run of ``value`` per commit) and its data home."""
    base = tmp_path_factory.mktemp("history")
    repo, home = base / "project", base / "home"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "dev")
    (repo / "work.py").write_text(WORK)
    (repo / "bench.yaml").write_text(yaml.safe_dump(bench("value"), sort_keys=False))
    (repo / "other.yaml").write_text(yaml.safe_dump(bench(OTHER, ab=True), sort_keys=False))
    rng = np.random.default_rng(SEED)
    shas = []
    for k in range(1, COMMITS + 1):
        (repo / "truth.txt").write_text(str(STEP if k >= STEP_AT else 1.0))
        (repo / "README.md").write_text(f"commit {k}\n")
        git(repo, "add", "-A")
        subject = HOSTILE_SUBJECT if k == 3 else f"commit {k}"
        git(repo, "commit", "-q", "-m", subject)
        shas.append(git(repo, "rev-parse", "HEAD"))
        files = ("bench.yaml", "other.yaml") if k == 1 else ("bench.yaml",)
        record(repo, home, run_draws(rng) * (3 if k == 1 else 1), files)  # A/B: 2 per block
    return repo, home, shas


def site_of(home: Path, out: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Publish ``home`` to ``out`` from ``repo`` (``MPLCONFIGDIR``, which publish sets, is
    restored afterwards)."""
    monkeypatch.chdir(repo)
    monkeypatch.delenv("MPLCONFIGDIR", raising=False)
    assert cli.main(["--home", str(home), "publish", str(out)]) == 0


def changes(home: Path, repo: Path, *args: str) -> int:
    return cli.main(["--home", str(home), "history", *args, "--changes", "--repo", str(repo)])


def metric_page(out: Path, name: str, metric: str = "value_ms") -> Path:
    from pytest_benchmark_agent.report.site import slug

    return out / slug(name) / f"{slug(metric)}.html"


def test_history_changes_names_the_step_at_commit_7_and_no_other(
    history: tuple[Path, Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    repo, home, shas = history
    assert changes(home, repo, "value") == 0
    out = capsys.readouterr().out
    found = [line.strip() for line in out.splitlines() if line.strip().startswith("change point ")]
    before, after = shas[STEP_AT - 2], shas[STEP_AT - 1]
    assert len(found) == 1, out
    assert found[0].startswith(f"change point {before[:7]}..{after[:7]}: x1.0"), out
    assert "x slower (worse)" in found[0] and "permutation p = " in found[0]
    assert re.search(r"median 10(\.\d+)? ms -> 10\.\d+ ms", found[0])  # in the metric's unit
    good, bad = shas[STEP_AT - 3], shas[STEP_AT]  # a commit wider each side, for bisect
    bisect = f"test it (a commit wider each side): benchmark-agent bisect {good[:12]} {bad[:12]}"
    assert f"{bisect} bench.yaml --home " in out
    assert "a hypothesis, not a verdict" in out
    assert changes(home, repo, "value", "--metric", "value_ms") == 0
    assert capsys.readouterr().out.count("\n  change point ") == 1


def test_history_changes_refuses_an_unknown_metric_or_benchmark(
    history: tuple[Path, Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    repo, home, _ = history
    assert changes(home, repo, "value", "--metric", "nope") == 2
    assert "no run holds a charted metric 'nope' (they hold: value_ms)" in capsys.readouterr().err
    assert changes(home, repo, "missing") == 2
    assert "no finished run of 'missing'" in capsys.readouterr().err
    assert cli.main(["--home", str(home), "history", "value", "--metric", "value_ms"]) == 2
    assert "--metric chooses the metric of --changes" in capsys.readouterr().err
    written = repo / "written"
    assert changes(home, repo, "value", f"--rev=--output={written}") == 2
    assert "is an option, not a revision" in capsys.readouterr().err and not written.exists()


def test_history_and_the_results_index_show_the_commit_and_the_ci_gate(
    history: tuple[Path, Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    repo, home, shas = history
    assert cli.main(["--home", str(home), "history", "value"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == COMMITS
    assert all("CI gate unjudged" in line for line in lines), lines
    assert [line.split("  code ")[1].split()[0] for line in lines] == [s[:7] for s in shas]
    index = (home / "results_index.md").read_text()
    assert "| run | name | commit | CI gate |" in index
    assert f"| value | {shas[-1][:7]} | unjudged |" in index


def test_publish_writes_a_site_of_every_benchmark_with_the_change_point(
    history: tuple[Path, Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, home, shas = history
    out = tmp_path / "site"
    site_of(home, out, repo, monkeypatch)
    index = (out / "index.html").read_text()
    for name in ("value", OTHER):
        page = metric_page(out, name).parent / "index.html"
        assert f'href="{page.relative_to(out)}"' in index and page.is_file()
    page = metric_page(out, "value").read_text()
    rows = page.split("<h2>Runs</h2>", 1)[1].count("<tr>") - 1
    assert rows == COMMITS
    assert page.count('id="PathCollection_') == COMMITS  # a point per run in the chart
    step = f"{shas[STEP_AT - 2][:7]}..{shas[STEP_AT - 1][:7]}: x1.0"
    assert step in page and "x slower (worse)" in page
    assert "A change point is a hypothesis, not a verdict" in page
    assert f"bisect {shas[STEP_AT - 3][:12]} {shas[STEP_AT][:12]} bench.yaml --home " in page
    benchmark = (metric_page(out, "value").parent / "index.html").read_text()
    guards = benchmark.split("<h2>Guard metrics</h2>", 1)[1]
    assert "<th>rss_mb</th>" in guards and guards.count("<td>42</td>") == COMMITS
    assert page.count("stroke-dasharray") >= 1  # the change point's dashed line in the chart
    assert "<script" not in page and "http" not in page.split("<svg", 1)[0]
    reports = re.findall(r'<a href="([^"]*)">[^<]*</a></td><td>EXPLORATORY', page)
    assert len(reports) == COMMITS  # a link to each run's report
    assert all((metric_page(out, "value").parent / r).resolve().is_file() for r in reports)


def test_the_index_shows_each_benchmarks_result_its_commits_and_the_regressions(
    history: tuple[Path, Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, home, shas = history
    out = tmp_path / "site"
    site_of(home, out, repo, monkeypatch)
    index = (out / "index.html").read_text()
    # the Regressions list: the step at commit 7 with its ratio, range and bisect command
    regressions = index.split("<h2>Regressions</h2>", 1)[1].split("<h2>", 1)[0]
    assert regressions.count("<li>") == 1
    assert f"x slower (worse) at {shas[STEP_AT - 2][:7]}..{shas[STEP_AT - 1][:7]}" in regressions
    assert f"bisect {shas[STEP_AT - 3][:12]} {shas[STEP_AT][:12]} bench.yaml" in regressions
    # a chart per benchmark (a point per commit), and each commit's CI gate beside its median
    value = index.split('index.html">value</a></h2>', 1)[1].split("<h2>", 1)[0]
    assert value.count("<svg") == 1 and value.count('id="PathCollection_') == COMMITS
    assert f"<code>{shas[-1][:10]}</code>" in value and "<td>unjudged</td>" in value
    assert re.search(r'<span class="n">1\d\.\d+ ms</span>', value)  # a median, with its unit
    # the A/B benchmark: its result in words, its treatment charted and tabled beside the control
    other = index.split(html.escape(OTHER, quote=True) + "</a></h2>", 1)[1].split("<h2>", 1)[0]
    assert re.search(r'class="answer">b: value_ms [\d.]+x faster than a \(x0\.[45]\d*, 95% ', other)
    assert "b (treatment)" in other and "<th>b (median)</th>" in other
    assert re.search(r'<span class="n">[45]\.\d+ ms</span>', other)
    page = (metric_page(out, OTHER).parent / "index.html").read_text()
    assert "b (treatment)" in page and "<th>a (control)</th><th>b</th>" in page


def test_outside_text_is_escaped_on_every_page(
    history: tuple[Path, Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, home, _ = history
    out = tmp_path / "site"
    site_of(home, out, repo, monkeypatch)
    pages = {p: p.read_text() for p in out.rglob("*.html")}
    for text in pages.values():
        assert "<script>" not in text and "<b>" not in text
        assert "\x1b" not in text and "\x07" not in text
    value = metric_page(out, "value").read_text()
    assert "README: &lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;x&lt;/b&gt;" in value
    assert "other &lt;b&gt;bold&lt;/b&gt; &amp; &quot;quoted&quot;" in pages[out / "index.html"]


def test_a_second_publish_after_one_run_rewrites_only_that_benchmarks_pages(
    history: tuple[Path, Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, home, _ = history
    copy = tmp_path / "home"
    shutil.copytree(home, copy)
    out = tmp_path / "site"
    site_of(copy, out, repo, monkeypatch)
    files = sorted(p for p in out.rglob("*") if p.is_file())
    seen = {p: p.stat().st_mtime_ns for p in files}
    site_of(copy, out, repo, monkeypatch)
    assert {p: p.stat().st_mtime_ns for p in files} == seen  # nothing new: nothing written
    record(repo, copy, run_draws(np.random.default_rng(SEED + 1)), ("bench.yaml",))
    site_of(copy, out, repo, monkeypatch)
    changed = {p.relative_to(out).as_posix() for p in files if p.stat().st_mtime_ns != seen[p]}
    value = metric_page(out, "value").parent.name
    assert changed == {
        "index.html",
        ".publish.json",
        f"{value}/index.html",
        metric_page(out, "value").relative_to(out).as_posix(),
    }


def test_an_unreadable_record_is_skipped_with_a_warning_naming_it(
    history: tuple[Path, Path, list[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo, home, _ = history
    copy = tmp_path / "home"
    shutil.copytree(home, copy)
    broken = sorted((copy / "runs").glob("*-value-*"))[4] / "results.yaml"
    broken.write_text("trials: [unclosed\n")
    out = tmp_path / "site"
    site_of(copy, out, repo, monkeypatch)
    assert f"warning: skipped: {broken}" in capsys.readouterr().err
    page = metric_page(out, "value").read_text()
    assert page.split("<h2>Runs</h2>", 1)[1].count("<tr>") - 1 == COMMITS - 1


def test_publish_into_a_weird_path_and_refuses_a_file(
    history: tuple[Path, Path, list[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo, home, _ = history
    out = tmp_path / "we ird $(touch pwned) <i>" / "\u00e9t\u00e9;'" / "site"
    user = tmp_path / "user"  # the user's home: matplotlib must write nothing there
    env = {k: v for k, v in os.environ.items() if k != "MPLCONFIGDIR"} | {"HOME": str(user)}
    done = subprocess.run(
        ["benchmark-agent", "--home", str(home), "publish", str(out)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (home / ".matplotlib").is_dir() and not user.exists()
    assert (out / "index.html").is_file() and metric_page(out, "value").is_file()
    assert not (repo / "pwned").exists() and not (tmp_path / "pwned").exists()
    page = metric_page(out, "value").read_text()
    report = re.findall(r'<a href="([^"]*)">[^<]*</a></td><td>EXPLORATORY', page)[0]
    assert (metric_page(out, "value").parent / unquote(html.unescape(report))).resolve().is_file()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert cli.main(["--home", str(home), "publish", str(blocker)]) == 2
    assert f"{blocker} is a file, not a folder" in capsys.readouterr().err


def test_without_git_the_runs_are_ordered_by_time(
    history: tuple[Path, Path, list[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, home, _ = history
    monkeypatch.chdir(tmp_path)
    assert cli.main(["--home", str(home), "history", "value", "--changes"]) == 0
    out = capsys.readouterr().out
    assert "time order" in out and out.count("\n  change point ") == 1
    assert "test it:" not in out  # no commits, nothing to bisect


def test_the_metric_page_draws_its_chart_in_headless_chromium(
    history: tuple[Path, Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, home, _ = history
    out = tmp_path / "site"
    site_of(home, out, repo, monkeypatch)
    for page in (out / "index.html", metric_page(out, OTHER).parent / "index.html"):
        shown = screenshot_rgb(page, tmp_path, "1100x900")  # the index, a benchmark's page
        orange = (abs(shown[..., 0] - 255) < 12) & (abs(shown[..., 1] - 127) < 12)
        purple = (abs(shown[..., 0] - 148) < 12) & (abs(shown[..., 1] - 103) < 12)
        assert orange.sum() > 50 and purple.sum() > 20, (page, orange.sum(), purple.sum())
    rgb = screenshot_rgb(metric_page(out, "value"), tmp_path, "1100x800")
    assert rgb.std() > 10  # not blank
    orange = (abs(rgb[..., 0] - 255) < 12) & (abs(rgb[..., 1] - 127) < 12) & (rgb[..., 2] < 40)
    red = (
        (abs(rgb[..., 0] - 214) < 12) & (abs(rgb[..., 1] - 39) < 12) & (abs(rgb[..., 2] - 40) < 12)
    )
    assert orange.sum() > 200 and red.sum() > 50, (orange.sum(), red.sum())  # points, change
    if os.environ.get("HISTORY_SCREENSHOT"):
        shutil.copy(tmp_path / "shot.png", os.environ["HISTORY_SCREENSHOT"])
