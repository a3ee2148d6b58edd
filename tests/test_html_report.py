"""report.html from real sessions: one self-contained page beside report.md (the summary table,
the verdict with its interval and the inline plot per metric, What Went Wrong), user text
escaped, nothing fetched; guard metrics as a short table without a plot; and, where Debian's
chromium is installed, a headless screenshot showing that the plots drew."""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

import pytest
from benchhelpers import BenchProject, screenshot_rgb

from pytest_benchmark_agent.stats.units import change_text, human

HOSTILE = "<script>alert('x')</script> & \"quoted\""


def _far_apart(project: BenchProject, **overrides) -> Path:
    """A run whose treatment b scores about x0.07 of a, with a guard metric beside it."""
    cmd = (
        f"{sys.executable} -S -c \"import random, sys; b = sys.argv[1] != 'a'; "
        "print('score=', (7 if b else 100) + random.random()); "
        "print('size_b=', 8925000 + 1000 * random.random())\" {mode}"
    )
    document = {
        "name": "pictures",
        "hypothesis": HOSTILE,
        "params": {"mode": "a"},
        "treatment_variable": "mode",
        "treatments": ["a", "b"],
        "replicates": 7,
        "stages": [
            {
                "name": "measure",
                "kind": "measure",
                "cmd": cmd,
                "metrics_from": {"stdout": True, "fields": ["score", "size_b"]},
            }
        ],
        "metrics": {
            "score": {"direction": "lower", "primary": True},
            "size_b": {"direction": "lower", "guard": True},
        },
    }
    document.update(overrides)
    project.bench(document)
    result = project.run(subprocess=True)  # a real process: matplotlib loads once in it
    assert result.ret == 0, result.stdout.str()
    return project.runs()[-1]


def test_a_run_writes_a_self_contained_html_report_beside_the_markdown(
    project: BenchProject,
) -> None:
    run_dir = _far_apart(project)
    page = (run_dir / "report.html").read_text()
    assert (run_dir / "report.md").is_file()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # per metric: the heading with its unit, the summary table, the verdict with its interval
    assert "<h3><code>score</code> (primary, lower is better)</h3>" in page
    verdict = project.results()["verdicts"]["score"]["b"]
    assert verdict["verdict"] == "improved"
    assert f"x{verdict['ratio']:.4g}" in page
    assert f"[{verdict['ci'][0]:.4g}, {verdict['ci'][1]:.4g}]" in page
    # the spread and the uncorrected p beside Holm's, as report.md gives them
    score = page[page.index("<code>score</code> (primary") :]
    score = score[: score.index("</table>")]
    assert "<th>stdev</th>" in score and "<th>p</th><th>p (Holm)</th>" in score
    stdev = project.results()["summary"]["score"]["b"]["stdev"]
    assert f'<td class="n">{human(stdev, "score")}</td>' in score
    # the plot inline, once per plotted metric; the guard has a table and no plot
    assert page.count("<svg") == 1  # score's; not the guard size_b's
    assert (run_dir / "plot-score.png").is_file() and not (run_dir / "plot-size_b.png").exists()
    guard = page[page.index("<code>size_b</code> (guard") :]
    guard = guard[: guard.index("</table>")]
    assert "8.512 MiB" in guard and "p (Holm)" not in guard  # human units, no full statistics
    assert "What Went Wrong" in page and "<h2>Environment</h2>" in page
    # nothing fetched: no script, no external source, stylesheet or link
    assert "<script" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page
    # the hostile hypothesis is text, not markup
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &quot;quoted&quot;" in page


def test_the_markdown_report_quotes_the_same_ratio_as_the_verdict_and_the_terminal(
    project: BenchProject,
) -> None:
    run_dir = _far_apart(project)
    verdict = project.results()["verdicts"]["score"]["b"]
    report = (run_dir / "report.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| `b` | 7 |"))
    assert f"| x{verdict['ratio']:.4g} | improved |" in row  # the summary's ratio is gate 2's
    assert "ratio of medians" not in report
    assert "| 8.512 MiB |" in report and "e+06" not in report
    terminal = project.run(subprocess=True).stdout.str()
    assert re.search(r"score .* x0\.0\d+ improved", terminal)
    again = project.results()["verdicts"]["score"]["b"]["ratio"]
    assert f"x{again:.3g} improved" in terminal


def test_both_reports_open_with_the_answer_the_tag_and_the_gate_before_any_table(
    project: BenchProject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    label = "b<i>&"  # markup in a treatment's label, which the answer names
    job_summary = tmp_path / "job-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(job_summary))
    run_dir = _far_apart(project, treatments=["a", label])
    results = project.results()
    verdict = results["verdicts"]["score"][label]
    said = change_text("score", verdict["ratio"], verdict["ci"], "a")
    assert said.startswith(f"{1 / verdict['ratio']:.3g}x lower than a (x{verdict['ratio']:.3g}")
    report = (run_dir / "report.md").read_text()
    answer = report.index("## Answer")
    assert answer < report.index("|") and answer < report.index("**Hypothesis:**")
    first = report[answer:].splitlines()[2]
    assert first.startswith("- **") and f"score {said} - improved**" in first
    assert first.startswith("- **b&lt;i&gt;&: score")  # the label stays text
    assert f"- **Tag:** {results['tag']}" in report and "- **CI gate:** passed" in report
    # the Controls table names every treatment's value, the control's marked
    assert "| `mode` | `a` (control), `" in report
    page = (run_dir / "report.html").read_text()
    top = page[page.index('<div class="answer">') : page.index("<table")]
    assert html.escape(f"score {said} - improved", quote=True) in top
    assert "b&lt;i&gt;&amp;: score" in top and "<i>" not in page
    assert "CI gate: <b>passed</b>" in top and f'class="tag">{results["tag"]}<' in top
    # the job summary leads with the same answer, below its heading and above its table
    summary = job_summary.read_text()
    assert summary.index(f"{first}\n") < summary.index("| metric |")


def test_the_html_report_draws_its_plots_in_headless_chromium(
    project: BenchProject, tmp_path: Path
) -> None:
    run_dir = _far_apart(project)
    rgb = screenshot_rgb(run_dir / "report.html", tmp_path, "1200x3000")
    # the plots' coloured dots (matplotlib's default blue and orange) are on the page
    blue = ((abs(rgb[..., 0] - 31) < 12) & (abs(rgb[..., 1] - 119) < 12)).sum()
    orange = ((abs(rgb[..., 0] - 255) < 12) & (abs(rgb[..., 1] - 127) < 12)).sum()
    assert blue > 50 and orange > 50, (blue, orange)
