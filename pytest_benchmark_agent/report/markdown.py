"""``report.md`` of a run and the compact table at the end of pytest's terminal output.

Per metric the report shows the descriptive figures of each treatment and gate 2's verdict on
it: effect with its 95% CI, p-value (raw and after Holm), n per side, CV, the smallest effect
the run could have detected (MDE), the design used, and why; then a plot of the samples (a PNG
beside the report; a guard metric has none: its bounds are what matter, so it gets a short
table). One ratio is quoted for a comparison everywhere (tables, terminal, tag lines): gate 2's
estimate of treatment / control, the centre of its interval. ``report.html`` beside it
(:mod:`.html`) is the same report as one self-contained page.

The report always has a non-empty **What Went Wrong** section (:mod:`.wrong`); the hosts
section is :mod:`.hosts`, the terminal's summary :mod:`.terminal`. Everything is rendered from
the run's :class:`.RunRecord` alone (live, or read back by ``load_run``).

User text (names, labels, values, reasons) goes through ``util/safetext.py`` (one line,
Markdown-escaped) and the finished report through ``redact.scrub_text``: a hostile name cannot
forge a section, and no secret reaches the file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from pytest_benchmark_agent.config.metric import exact_metrics, metric_role
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.report.headline import headline
from pytest_benchmark_agent.report.hosts import hosts_lines
from pytest_benchmark_agent.report.html import render_html
from pytest_benchmark_agent.report.junit import add_run_properties
from pytest_benchmark_agent.report.plots import PlotLayout, plot_file, write_plots
from pytest_benchmark_agent.report.reclassified import reclassified_lines, tag_line
from pytest_benchmark_agent.report.seeds import seed_spread_lines
from pytest_benchmark_agent.report.summary_lines import counts_text
from pytest_benchmark_agent.report.wrong import what_went_wrong
from pytest_benchmark_agent.stats.comparability import Verdict
from pytest_benchmark_agent.stats.describe import values_text
from pytest_benchmark_agent.stats.units import human, interval, p_value, pct
from pytest_benchmark_agent.stats.units import ratio as ratio_text
from pytest_benchmark_agent.util import redact
from pytest_benchmark_agent.util.fsutil import atomic_write
from pytest_benchmark_agent.util.placeholders import as_text
from pytest_benchmark_agent.util.safetext import inert_markdown, md, md_code


class ReportWriter:
    """Writes the plots, ``report.md`` and ``report.html`` when a run finishes (after the
    record), and gives ``--junitxml`` the run's verdicts (each trial's metrics:
    :class:`.junit.TrialProperties`)."""

    config: pytest.Config | None = None  # None when called outside a session (recovery)

    @pytest.hookimpl
    def pytest_configure(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl
    def pytest_bench_run_finished(self, run: RunRecord) -> None:
        add_run_properties(self.config, run)
        folder = run.dir
        if folder is None:
            raise ValueError(f"run {run.run_id} has no folder to write its report to")
        metrics = run.model.metrics
        svgs: dict[str, str] = {}
        exact = exact_metrics(metrics)
        # a guard's figures are a short table; a hash's plot shows which treatment gave which
        # (where it changed: one value everywhere gets none)
        plotted = [m for m, spec in metrics.items() if not spec.guard or m in exact]
        files, note = write_plots(
            folder,
            run.trials,
            plotted,
            run.treatments,
            run.verdicts,
            PlotLayout(exact, run.treatment_variable),
            svg=svgs,
        )
        atomic_write(
            folder / "report.md",
            inert_markdown(redact.scrub_text(render_report(run, files, note))),
        )
        page = render_html(run, svgs, note, wrong=run.what_went_wrong or what_went_wrong(run))
        atomic_write(folder / "report.html", redact.scrub_text(page))


def render_report(
    run: RunRecord, plots: list[str] | None = None, plot_note: str | None = None
) -> str:
    """The whole ``report.md`` of ``run``; ``plots`` are the plot files beside it."""
    config = run.model
    state = (
        run.state
        + (f" ({run.stop_reason})" if run.stop_reason else "")
        + (f" ({run.decided})" if run.decided else "")
    )
    lines = [
        f"# {md(run.name)}: {run.run_id}",
        "",
        *_answer(run),
        f"- **Hypothesis:** {md(config.hypothesis or '(none stated)')}",
        _treatment_line(run),
        f"- **State:** {state}",
        tag_line(run),
        *[f"  - {md(reason)}" for reason in run.tag_reasons],
        "- **Trials:** " + counts_text(run),
        f"- **Started / ended (UTC):** {run.started} / {run.ended}",
        "- **Record:** [results.yaml](results.yaml), [config.yaml](config.yaml); "
        "[report.html](report.html) is this report as one page",
        "",
        *_controls(run),
        "",
        "## Results",
        "",
    ]
    lines += _design(run)
    lines += _metric_tables(run, set(plots or []))
    if plot_note:
        lines += [f"Plots: {plot_note}.", ""]
    lines += _baseline(run)
    lines += _reproduction(run)
    lines += ["## What Went Wrong", ""]
    lines += [f"- {md(item)}" for item in (run.what_went_wrong or what_went_wrong(run))]
    lines += ["", "## Hosts and isolation", ""]
    lines += hosts_lines(run)
    lines += ["", "## Preps", "", "| stage | binding | action | signature |", "|---|---|---|---|"]
    for prep in run.preps:
        lines.append(
            f"| {md(prep.stage)} | {md_code(prep.binding)} | {prep.action} | "
            f"`{prep.signature[:12]}` |"
        )
    if not run.preps:
        lines.append("| (none ran) | | | |")
    lines += ["", "## Environment", ""]
    lines += _environment(run)
    lines += reclassified_lines(run)
    return "\n".join(lines) + "\n"


def _answer(run: RunRecord) -> list[str]:
    """The answer first (:mod:`.headline`): each primary comparison, the tag, the CI gate and
    the machine's warnings, before any table."""
    said = headline(run)
    lines = ["## Answer", ""] + [f"- **{md(answer)}**" for answer in said.answers]
    lines.append(f"- **Tag:** {md(said.tag_text())}")
    if said.gate:
        lines.append(f"- **CI gate:** {md(said.gate_text())}")
    lines += [f"- **Machine warning:** {md(warning)}" for warning in said.warnings]
    return [*lines, "", "## Run", ""]


def _controls(run: RunRecord) -> list[str]:
    """Every declared parameter, its value and whether it is the treatment variable."""
    lines = [
        "## Controls",
        "",
        "Every declared parameter and its value ("
        + (
            "one configuration: every one is held fixed"
            if run.one_configuration
            else "the treatment variable varies; everything else is held fixed"
        )
        + "):",
        "",
        "| param | value | role |",
        "|---|---|---|",
    ]
    for name, value in run.model.params.items():
        if name == run.treatment_variable:  # every treatment's value, not the control's alone
            shown = ", ".join(
                md_code(t) + (" (control)" if t == run.control else "") for t in run.treatments
            )
            lines.append(f"| {md_code(name)} | {shown} | TREATMENT |")
            continue
        lines.append(f"| {md_code(name)} | {md_code(as_text(value))} | CONTROL |")
    return lines


def _treatment_line(run: RunRecord) -> str:
    if run.one_configuration:
        return (
            f"- **Configuration:** one, {md_code(run.control)} (no treatment_variable): nothing is "
            "compared within this run"
        )
    line = f"- **Treatment:** {md_code(run.treatment_variable)} = " + ", ".join(
        md_code(t) + (" (control)" if t == run.control else "") for t in run.treatments
    )
    revisions = run.revisions
    if revisions:  # --bench-against: both commits, measured in this session
        against, this = revisions["against"], revisions["this"]
        line += (
            f"\n- **Revisions:** {md_code(against['sha'][:12])} ({md(against['ref'])}) -> "
            f"{md_code(this['sha'][:12])} ({md(this['ref'])}), interleaved in this session "
            f"(benchmark file: {revisions['file_from']})"
        )
    return line


def _design(run: RunRecord) -> list[str]:
    """How the verdicts were reached, in two sentences."""
    if run.one_configuration:
        return [
            f"One configuration, {md_code(run.control)}: the figures below describe its "
            "replicates, compared with nothing within this run, so there is no verdict "
            "here. A comparison with another run (`--bench-baseline REF`, `benchmark-agent "
            "compare A B`) judges it.",
            "",
        ]
    lines = [
        "Verdicts compare each treatment with the control `" + run.control + "` within "
        "blocks (replicate k of every treatment ran adjacent; each block on one host), "
        "with Holm's correction across every metric and treatment of the run: `improved` "
        "or `regressed` needs the corrected test to pass, the 95% CI of the ratio to "
        "exclude 1 and the effect to exceed the metric's noise threshold. The MDE is the "
        "smallest change this run could have detected (80% power) at its n and noise. "
        "The ratio is gate 2's estimate of treatment / control (the centre of its 95% CI), "
        "the one figure quoted for a comparison everywhere; a metric without a verdict has "
        "only its medians."
    ]
    if run.sequential is not None:
        seq = run.sequential
        looks = (
            ", ".join(
                f"{look['blocks']}" + (" (stop)" if look["stop"] else "") for look in seq.looks
            )
            or "none reached"
        )
        lines.append(
            f"Sequential replication ({seq.min_blocks} to {seq.max_blocks} blocks, alpha "
            f"spent at the looks so stopping early keeps the error rate): looks at "
            f"blocks {looks}; the verdicts use {seq.blocks_used} blocks: "
            f"{seq.reason}."
            + (
                f" {seq.late_trials} trial(s) that were already running when it "
                "stopped are recorded but not analysed."
                if seq.late_trials
                else ""
            )
        )
    return [" ".join(lines), ""]


def _metric_tables(run: RunRecord, plots: set[str]) -> list[str]:
    lines: list[str] = []
    specs = run.model.metrics
    for metric, per in run.summary.items():
        spec = specs.get(metric)
        role = metric_role(metric, spec)
        direction = spec.direction if spec else "lower"
        alone = run.one_configuration
        lines += [
            f"### {md_code(metric)} ({role}, {direction} is better)"
            if direction != "equal"
            else f"### {md_code(metric)} ({role}, must equal "
            + ("across runs)" if alone else "the control)"),
            "",
        ]
        guard = role == "guard"
        if direction == "equal":
            lines += _exact_table(run, metric, per)
        elif guard:
            lines += _guard_table(run, metric, per)
        else:
            lines += _alone_table(metric, per) if alone else _treatment_table(run, metric, per)
        lines.append("")
        if metric in run.verdicts and direction != "equal" and not guard:
            lines += _verdict_table(run.verdicts[metric], per, f"against {md_code(run.control)}")
        lines += seed_spread_lines(run, metric)
        if plot_file(metric) in plots:
            lines += [f"![{metric}: samples per treatment]({plot_file(metric)})", ""]
    if not lines:
        lines = ["No trial passed, so there is nothing to summarize.", ""]
    return lines


def _exact_table(run: RunRecord, metric: str, per: dict[str, Any]) -> list[str]:
    """A ``direction: equal`` metric: each treatment's distinct values verbatim, with their
    counts, and its identity verdict (no median, mean, CV or ratio: the values are not
    numbers to average)."""
    if run.one_configuration:  # nothing compared: no verdict columns
        return ["| configuration | n | values (count of each) |", "|---|---|---|"] + [
            f"| {md_code(label)} | {row.get('n', 0)} | "
            f"{values_text(row, '`').replace('|', chr(92) + '|')} |"
            for label, row in per.items()
        ]
    lines = ["| treatment | n | values (count of each) | verdict | why |", "|---|---|---|---|---|"]
    for label, row in per.items():
        verdict = run.verdicts.get(metric, {}).get(label)
        role = " (control)" if label == run.control else ""
        lines.append(
            f"| {md_code(label)}{role} | {row.get('n', 0)} | "
            f"{values_text(row, '`').replace('|', chr(92) + '|')} | {_said(verdict)} |"
        )
    return lines


def _alone_table(metric: str, per: dict[str, Any]) -> list[str]:
    """One configuration's descriptive figures (no ratio, no verdict: nothing is compared)."""
    return [
        "| configuration | n | median | mean | stdev | CV | min | max |",
        "|---|---|---|---|---|---|---|---|",
    ] + [
        f"| {md_code(label)} | {row.get('n', 0)} | "
        + " | ".join(human(row.get(k), metric) for k in ("median", "mean", "stdev"))
        + f" | {pct(row.get('cv'))} | {human(row.get('min'), metric)} | "
        f"{human(row.get('max'), metric)} |"
        for label, row in per.items()
    ]


def _treatment_table(run: RunRecord, metric: str, per: dict[str, Any]) -> list[str]:
    """Each treatment's descriptive figures (in human units), gate 2's ratio to the control
    (the same figure as the verdict table's) and its verdict."""
    lines = [
        "| treatment | n | median | mean | stdev | CV | min | max | ratio | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, row in per.items():
        verdict = run.verdicts.get(metric, {}).get(label)
        ratio = None if verdict is None or label == run.control else verdict.ratio
        lines.append(
            f"| {md_code(label)}{' (control)' if label == run.control else ''} | "
            f"{row.get('n', 0)} | "
            + " | ".join(human(row.get(k), metric) for k in ("median", "mean", "stdev"))
            + f" | {pct(row.get('cv'))} | {human(row.get('min'), metric)} | "
            f"{human(row.get('max'), metric)} | {ratio_text(ratio)} | "
            f"{verdict.word if verdict is not None else '-'} |"
        )
    return lines


def _guard_table(run: RunRecord, metric: str, per: dict[str, Any]) -> list[str]:
    """A guard metric: what it reached per treatment and its verdict (a guard holds a bound,
    so no ratio, interval or p-value: the full statistics are in results.yaml)."""
    compared = not run.one_configuration
    lines = [
        "| treatment | n | median | min | max |" + (" verdict | why |" if compared else ""),
        "|---|---|---|---|---|" + ("---|---|" if compared else ""),
    ]
    for label, row in per.items():
        verdict = run.verdicts.get(metric, {}).get(label)
        lines.append(
            f"| {md_code(label)}{' (control)' if label == run.control else ''} | "
            f"{row.get('n', 0)} | "
            + " | ".join(human(row.get(k), metric) for k in ("median", "min", "max"))
            + " |"
            + (f" {_said(verdict)} |" if compared else "")
        )
    return lines


def _said(verdict: Verdict | None) -> str:
    """A verdict and why, two cells of a table (``-`` for none)."""
    if verdict is None:
        return "- | -"
    return f"{verdict.word} | {verdict.reason or '-'}"


def _verdict_table(
    verdicts: Mapping[str, Verdict],
    summary: Mapping[str, Any] | None,
    against: str,
    first: str = "treatment",
    sides: str = "control / treatment",
) -> list[str]:
    lines = [
        f"| {first} ({against}) | verdict | ratio | 95% CI | p | p (Holm) | n ({sides}) "
        "| CV | MDE | design | why |",
        "|---" * 11 + "|",
    ]
    for label, v in verdicts.items():
        cv = ((summary or {}).get(label) or {}).get("cv")
        design = (v.design or "-") + (f" ({v.units})" if v.units else "")
        lines.append(
            f"| {md_code(label)} | **{v.word}** | {ratio_text(v.ratio)} | {interval(v.ci)} | "
            f"{p_value(v.p)} | {p_value(v.p_holm)} | "
            + (" / ".join(str(x) for x in v.n) if any(v.n) else "-")
            + f" | {pct(cv)} | {pct(v.mde)} | {design} | {v.reason or '-'} |"
        )
    return lines + [""]


def _baseline(run: RunRecord) -> list[str]:
    """The comparison with ``--bench-baseline``: which run served, the code each measured,
    the CI gate, what differs, and the verdicts across the two runs."""
    base = run.baseline
    if base is None:
        return []
    code, extra = base.code, base.extra
    run_text = f"{base.run_id} ({extra.get('tag', '?')})" if base.run_id else "(none found)"
    lines = [
        "## Baseline",
        "",
        f"- **Run:** {run_text}, named by {md_code(base.ref)} ({base.resolved})",
        f"- **Code:** {code.get('baseline') or '-'} -> {code.get('this')}"
        + (" (changed: this is a comparison of code)" if code.get("changed") else ""),
    ]
    if base.gate is not None:
        lines.append(f"- **CI gate:** {base.gate.outcome.upper()}")
        lines += [f"  - {reason}" for reason in base.gate.reasons]
    if base.refused:
        lines.append(f"- **Refused:** {base.refused}")
    lines += [f"- **Its caveat:** {caveat}" for caveat in extra.get("caveats") or []]
    fingerprint = extra.get("fingerprint") or {}
    for kind in ("blocking", "benign", "code"):
        if fingerprint.get(kind):
            lines.append(
                f"- **Fingerprint differences ({kind}):** "
                + "; ".join(f"{md_code(d)}" for d in fingerprint[kind])
            )
    lines += [f"- {note}" for note in extra.get("notes") or []]
    lines.append("")
    both = f"{code.get('baseline')} -> {code.get('this')}"
    # judged with the session as the unit (what the gate read); verdicts in older records
    for metric, per in base.gated_verdicts.items():
        if not per:
            continue
        lines += [f"### {md_code(metric)} against the baseline ({both})", ""]
        against = next(iter(per.values())).extra.get("against", "the baseline")
        lines += _verdict_table(
            per, None, f"against {against}", "this session's", "baseline / this session"
        )
    return lines


def _reproduction(run: RunRecord) -> list[str]:
    rep = run.reproduces
    if not rep:
        return []
    lines = ["## Reproduction", ""]
    if rep.run_id:
        what = "reproduces" if rep.kind == "reproduction" else "is anchored to"
        lines.append(f"- This run {what} {rep.run_id} ({rep.tag}): " + ("yes" if rep.ok else "NO"))
        lines += [f"  - {line}" for line in rep.lines]
        if rep.benign_differences:
            lines.append(
                "- Fingerprint differences that do not matter: "
                + "; ".join(f"{md_code(d)}" for d in rep.benign_differences)
            )
    for note in rep.skipped:
        lines.append(f"- Not used: {note}")
    return lines + [""]


def _scalar(value: Any) -> bool:
    """Not a mapping or a list (a record's, or a hook view's frozen one)."""
    return isinstance(value, str) or not isinstance(value, (Mapping, Sequence))


def _environment(run: RunRecord) -> list[str]:
    """The fingerprint in a few readable lines (the whole of it is in config.yaml)."""
    fingerprint = run.fingerprint or {}
    if not fingerprint:
        return ["(no fingerprint recorded)"]
    env = fingerprint.get("env", {})
    lines = ["- **Machine:** " + ", ".join(f"{k}: {v}" for k, v in env.items() if _scalar(v))]
    packages = env.get("packages") or {}
    if packages:
        lines.append("- **Packages:** " + ", ".join(f"{k} {v}" for k, v in packages.items()))
    for path, code in (fingerprint.get("code") or {}).items():
        if code.get("vcs") == "git":
            state = (
                f"dirty, uncommitted changes {code.get('diff_hash', '')[:12]}"
                if code.get("dirty")
                else "clean"
            )
            lines.append(
                f"- **Code** {md_code(path)}: git {str(code.get('commit'))[:12]} ({state})"
            )
        else:
            lines.append(
                f"- **Code** {md_code(path)}: content {str(code.get('content_hash'))[:12]}"
            )
    accelerator = fingerprint.get("accelerator") or {}
    devices = accelerator.get("devices") or []
    lines.append(
        "- **Accelerator:** "
        + (
            ", ".join(str(d.get("name")) for d in devices)
            if devices
            else f"none ({accelerator.get('reason')})"
        )
    )
    variables = fingerprint.get("vars") or {}
    if variables:
        lines.append(
            "- **Declared variables:** " + ", ".join(f"{k}={v}" for k, v in variables.items())
        )
    return lines
