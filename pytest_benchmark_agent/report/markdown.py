"""``report.md`` of a run and the compact table at the end of pytest's terminal output.

Per metric the report shows the descriptive figures of each treatment and gate 2's verdict on
it: effect with its 95% CI, p-value (raw and after Holm), n per side, CV, the smallest effect
the run could have detected (MDE), the design used, and why; then a plot of the samples (a PNG
beside the report; a guard metric has none: its bounds are what matter, so it gets a short
table). One ratio is quoted for a comparison everywhere (tables, terminal, tag lines): gate 2's
estimate of treatment / control, the centre of its interval. ``report.html`` beside it
(:mod:`.html`) is the same report as one self-contained page.

The report always has a non-empty **What Went Wrong** section: every refusal and why, failed
and non-comparable trials, caveats, high variance, a failed gate, or, when nothing went wrong,
what the run did not test (so a clean run is never read as proof of more than it is).

User text (names, labels, values, reasons) goes through ``records/safetext.py`` (one line,
Markdown-escaped) and the finished report through ``redact.scrub_text``: a hostile name cannot
forge a section, and no secret reaches the file.
"""

from __future__ import annotations

import platform
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from pytest_benchmark_agent.config.metric import BUILTIN_METRICS, exact_metrics, metric_role
from pytest_benchmark_agent.config.placeholders import as_text
from pytest_benchmark_agent.judge.baseline import primary_metrics
from pytest_benchmark_agent.judge.ci_gate import regressions
from pytest_benchmark_agent.records import redact
from pytest_benchmark_agent.records.fsutil import atomic_write
from pytest_benchmark_agent.records.run import BenchRun
from pytest_benchmark_agent.records.safetext import inert_markdown, md, md_code, one_line
from pytest_benchmark_agent.records.views import RunView
from pytest_benchmark_agent.report import summary_lines
from pytest_benchmark_agent.report.html import render_html
from pytest_benchmark_agent.report.junit import add_run_properties, add_trial_properties
from pytest_benchmark_agent.report.plots import plot_file, write_plots
from pytest_benchmark_agent.report.seeds import seed_spread_lines
from pytest_benchmark_agent.report.units import human
from pytest_benchmark_agent.stats.describe import values_text

HIGH_CV = 0.05


class ReportWriter:
    """Writes the plots, ``report.md`` and ``report.html`` when a run finishes (after the
    record), and gives ``--junitxml`` each trial's metrics and the run's verdicts
    (:mod:`.junit`)."""

    config: pytest.Config | None = None  # None when called outside a session (recovery)

    @pytest.hookimpl
    def pytest_configure(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        if call.when == "call":
            add_trial_properties(item)
        return report

    @pytest.hookimpl
    def pytest_bench_run_finished(self, run: RunView) -> None:
        add_run_properties(self.config, run)
        metrics = run.plan.config.metrics
        svgs: dict[str, str] = {}
        exact = exact_metrics(metrics)
        # a guard's figures are a short table; a hash's plot shows which treatment gave which
        # (where it changed: one value everywhere gets none)
        plotted = [m for m, spec in metrics.items() if not spec.guard or m in exact]
        files, note = write_plots(
            run.dir,
            run.trials,
            plotted,
            run.treatment_labels,
            run.verdicts,
            exact=exact,
            svg=svgs,
            variable=run.variable,
        )
        atomic_write(
            run.dir / "report.md",
            inert_markdown(redact.scrub_text(render_report(run, files, note))),
        )
        page = render_html(run, svgs, note, wrong=run.what_went_wrong or what_went_wrong(run))
        atomic_write(run.dir / "report.html", redact.scrub_text(page))


def render_report(
    run: BenchRun, plots: list[str] | None = None, plot_note: str | None = None
) -> str:
    config = run.plan.config
    state = (
        run.state
        + (f" ({run.stop_reason})" if run.stop_reason else "")
        + (f" ({run.decided})" if run.decided else "")
    )
    lines = [
        f"# {md(run.name)}: {run.run_id}",
        "",
        f"- **Hypothesis:** {md(config.hypothesis or '(none stated)')}",
        _treatment_line(run),
        f"- **State:** {state}",
        f"- **Tag:** {run.tag}",
        *[f"  - {md(reason)}" for reason in run.tag_reasons],
        "- **Trials:** " + _counts_text(run),
        f"- **Started / ended (UTC):** {run.started} / {run.ended}",
        "- **Record:** [results.yaml](results.yaml), [config.yaml](config.yaml); "
        "[report.html](report.html) is this report as one page",
        "",
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
    for name, value in config.params.items():
        role = "TREATMENT" if name == run.variable else "CONTROL"
        lines.append(f"| {md_code(name)} | {md_code(as_text(value))} | {role} |")
    lines += ["", "## Results", ""]
    lines += _design(run)
    lines += _metric_tables(run, set(plots or []))
    if plot_note:
        lines += [f"Plots: {plot_note}.", ""]
    lines += _baseline(run)
    lines += _reproduction(run)
    lines += ["## What Went Wrong", ""]
    lines += [f"- {md(item)}" for item in (run.what_went_wrong or what_went_wrong(run))]
    lines += ["", "## Hosts and isolation", ""]
    lines += _hosts(run)
    lines += ["", "## Preps", "", "| stage | binding | action | signature |", "|---|---|---|---|"]
    for prep in run.preps:
        lines.append(
            f"| {md(prep['stage'])} | {md_code(prep['binding'])} | {prep['action']} | "
            f"`{prep['signature'][:12]}` |"
        )
    if not run.preps:
        lines.append("| (none ran) | | | |")
    lines += ["", "## Environment", ""]
    lines += _environment(run)
    return "\n".join(lines) + "\n"


def _treatment_line(run: BenchRun) -> str:
    if run.one_configuration:
        return (
            f"- **Configuration:** one, {md_code(run.control)} (no treatment_variable): nothing is "
            "compared within this run"
        )
    line = f"- **Treatment:** {md_code(run.variable)} = " + ", ".join(
        md_code(t) + (" (control)" if t == run.control else "") for t in run.treatment_labels
    )
    revisions = run.plan.revisions
    if revisions is not None:  # --bench-against: both commits, measured in this session
        against, this = revisions.against, revisions.this
        line += (
            f"\n- **Revisions:** {md_code(against.label)} ({md(against.ref)}) -> "
            f"{md_code(this.label)} ({md(this.ref)}), interleaved in this session "
            f"(benchmark file: {revisions.file_from})"
        )
    return line


def _design(run: BenchRun) -> list[str]:
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
    if run.sequential:
        seq = run.sequential
        looks = (
            ", ".join(
                f"{look['blocks']}" + (" (stop)" if look["stop"] else "")
                for look in seq.get("looks") or []
            )
            or "none reached"
        )
        lines.append(
            f"Sequential replication ({seq['min']} to {seq['max']} blocks, alpha "
            f"spent at the looks so stopping early keeps the error rate): looks at "
            f"blocks {looks}; the verdicts use {seq['blocks_used']} blocks: "
            f"{seq['reason']}."
            + (
                f" {seq['late_trials']} trial(s) that were already running when it "
                "stopped are recorded but not analysed."
                if seq.get("late_trials")
                else ""
            )
        )
    return [" ".join(lines), ""]


def _metric_tables(run: BenchRun, plots: set[str]) -> list[str]:
    lines: list[str] = []
    specs = run.plan.config.metrics
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


def _exact_table(run: BenchRun, metric: str, per: dict[str, Any]) -> list[str]:
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
        verdict = run.verdicts.get(metric, {}).get(label, {})
        role = " (control)" if label == run.control else ""
        lines.append(
            f"| {md_code(label)}{role} | {row.get('n', 0)} | "
            f"{values_text(row, '`').replace('|', chr(92) + '|')} | "
            f"{verdict.get('verdict', '-')} | {verdict.get('reason') or '-'} |"
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
        + f" | {_pct(row.get('cv'))} | {human(row.get('min'), metric)} | "
        f"{human(row.get('max'), metric)} |"
        for label, row in per.items()
    ]


def _treatment_table(run: BenchRun, metric: str, per: dict[str, Any]) -> list[str]:
    """Each treatment's descriptive figures (in human units), gate 2's ratio to the control
    (the same figure as the verdict table's) and its verdict."""
    lines = [
        "| treatment | n | median | mean | stdev | CV | min | max | ratio | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, row in per.items():
        verdict = run.verdicts.get(metric, {}).get(label, {})
        lines.append(
            f"| {md_code(label)}{' (control)' if label == run.control else ''} | "
            f"{row.get('n', 0)} | "
            + " | ".join(human(row.get(k), metric) for k in ("median", "mean", "stdev"))
            + f" | {_pct(row.get('cv'))} | {human(row.get('min'), metric)} | "
            f"{human(row.get('max'), metric)} | "
            f"{'-' if label == run.control else _fmt(verdict.get('ratio'))} | "
            f"{verdict.get('verdict', '-')} |"
        )
    return lines


def _guard_table(run: BenchRun, metric: str, per: dict[str, Any]) -> list[str]:
    """A guard metric: what it reached per treatment and its verdict (a guard holds a bound,
    so no ratio, interval or p-value: the full statistics are in results.yaml)."""
    compared = not run.one_configuration
    lines = [
        "| treatment | n | median | min | max |" + (" verdict | why |" if compared else ""),
        "|---|---|---|---|---|" + ("---|---|" if compared else ""),
    ]
    for label, row in per.items():
        verdict = run.verdicts.get(metric, {}).get(label, {})
        lines.append(
            f"| {md_code(label)}{' (control)' if label == run.control else ''} | "
            f"{row.get('n', 0)} | "
            + " | ".join(human(row.get(k), metric) for k in ("median", "min", "max"))
            + " |"
            + (
                f" {verdict.get('verdict', '-')} | {verdict.get('reason') or '-'} |"
                if compared
                else ""
            )
        )
    return lines


def _verdict_table(
    verdicts: dict[str, Any],
    summary: dict[str, Any] | None,
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
        n = v.get("n") or []
        ci = v.get("ci")
        cv = ((summary or {}).get(label) or {}).get("cv")
        design = v.get("design") or "-"
        if v.get("units"):
            design += f" ({v['units']})"
        lines.append(
            f"| {md_code(label)} | **{v.get('verdict')}** | {_fmt(v.get('ratio'))} | "
            + (f"[{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else "-")
            + f" | {_p(v.get('p'))} | {_p(v.get('p_holm'))} | "
            + (" / ".join(str(x) for x in n) if n else "-")
            + f" | {_pct(cv)} | {_pct(v.get('mde'))} | {design} | "
            f"{v.get('reason') or '-'} |"
        )
    return lines + [""]


def _baseline(run: BenchRun) -> list[str]:
    base = run.baseline
    if not base:
        return []
    code = base.get("code") or {}
    run_text = (
        f"{base['run_id']} ({base.get('tag', '?')})" if base.get("run_id") else "(none found)"
    )
    lines = [
        "## Baseline",
        "",
        f"- **Run:** {run_text}, named by {md_code(base.get('ref'))} ({base.get('resolved')})",
        f"- **Code:** {code.get('baseline') or '-'} -> {code.get('this')}"
        + (" (changed: this is a comparison of code)" if code.get("changed") else ""),
    ]
    gate = base.get("gate") or {}
    if gate:
        lines.append(f"- **CI gate:** {gate['outcome'].upper()}")
        lines += [f"  - {reason}" for reason in gate.get("reasons") or []]
    if base.get("refused"):
        lines.append(f"- **Refused:** {base['refused']}")
    for caveat in base.get("caveats") or []:
        lines.append(f"- **Its caveat:** {caveat}")
    fingerprint = base.get("fingerprint") or {}
    for kind in ("blocking", "benign", "code"):
        if fingerprint.get(kind):
            lines.append(
                f"- **Fingerprint differences ({kind}):** "
                + "; ".join(f"{md_code(d)}" for d in fingerprint[kind])
            )
    lines += [f"- {note}" for note in base.get("notes") or []]
    lines.append("")
    both = f"{code.get('baseline')} -> {code.get('this')}"
    # judged with the session as the unit (what the gate read); verdicts in older records
    for metric, per in (base.get("judged") or base.get("verdicts") or {}).items():
        if not per:
            continue
        lines += [f"### {md_code(metric)} against the baseline ({both})", ""]
        against = next(iter(per.values())).get("against", "the baseline")
        lines += _verdict_table(
            per, None, f"against {against}", "this session's", "baseline / this session"
        )
    return lines


def _reproduction(run: BenchRun) -> list[str]:
    rep = run.reproduces
    if not rep:
        return []
    lines = ["## Reproduction", ""]
    if rep.get("run_id"):
        what = "reproduces" if rep["kind"] == "reproduction" else "is anchored to"
        lines.append(
            f"- This run {what} {rep['run_id']} ({rep.get('tag')}): "
            + ("yes" if rep.get("ok") else "NO")
        )
        lines += [f"  - {line}" for line in rep.get("lines") or []]
        if rep.get("benign_differences"):
            lines.append(
                "- Fingerprint differences that do not matter: "
                + "; ".join(f"{md_code(d)}" for d in rep["benign_differences"])
            )
    for note in rep.get("skipped") or []:
        lines.append(f"- Not used: {note}")
    return lines + [""]


def _hosts(run: BenchRun) -> list[str]:
    """Which hosts measured, proof that measurements did not overlap, per-host figures and
    per-host verdicts."""
    hosts = run.hosts()
    overlaps = run.overlapping_measurements()
    lines = [
        f"- Hosts: {', '.join(hosts) or '(none recorded)'}",
        f"- Measurement windows: {len(overlaps)} overlap(s) on a host"
        + (" (every measure stage ran alone on its host)" if not overlaps else ""),
    ]
    declared = run.plan.config.metrics
    if len(hosts) > 1:
        lines += [
            "",
            "| host | metric | treatment | n | median | CV |",
            "|---|---|---|---|---|---|",
        ]
        for host, metrics in run.summary_by_host().items():
            for metric, per in metrics.items():
                if metric in BUILTIN_METRICS and metric not in declared:
                    continue
                for label, row in per.items():
                    lines.append(
                        f"| {host} | {md_code(metric)} | {md_code(label)} | {row.get('n', 0)} | "
                        f"{_central(row, '`')} | {_pct(row.get('cv'))} |"
                    )
    if run.verdicts_by_host:
        lines += [
            "",
            "Verdicts per host (each host's blocks alone"
            + (
                "; the run's verdicts above combine them, and refuse a direction that "
                "differs between hosts"
                if len(hosts) > 1
                else ": one host, so the same as the run's verdicts"
            )
            + "):",
            "",
            "| host | metric | treatment | verdict | ratio | 95% CI | p | n (control / "
            "treatment) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for host, metrics in run.verdicts_by_host.items():
            for metric, per in metrics.items():
                for label, v in per.items():
                    ci = v.get("ci")
                    lines.append(
                        f"| {host or '(unnamed)'} | {md_code(metric)} | {md_code(label)} | "
                        f"{v.get('verdict')} | {_fmt(v.get('ratio'))} | "
                        + (f"[{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else "-")
                        + f" | {_p(v.get('p'))} | "
                        + " / ".join(str(x) for x in v.get("n") or [])
                        + " |"
                    )
    return lines


def _counts_text(run: BenchRun) -> str:
    counts = run.counts()
    total = sum(counts.values())
    return f"{total} recorded (" + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) + ")"


def what_went_wrong(run: BenchRun) -> list[str]:
    """Every problem of the run, or (never empty) what a clean run did not test."""
    items: list[str] = []
    not_run = Counter(
        (t.get("reason") or "").splitlines()[0] if t.get("reason") else ""
        for t in run.trials
        if t["status"] == "not_run"
    )
    for trial in run.trials:
        if trial["status"] not in ("passed", "not_run"):
            reason = (trial.get("reason") or "").splitlines()
            items.append(
                f"{md_code(trial['id'])} {trial['status']}: {md(reason[0]) if reason else ''}"
            )
    for reason, count in not_run.items():
        items.append(f"{count} trial(s) not run: {reason or 'no reason recorded'}")
    if run.stop_reason:
        items.append(f"The run stopped early: {run.stop_reason}.")
    for earlier, later in run.overlapping_measurements():
        items.append(
            f"Measurements overlapped on one host: {md_code(earlier)} and {md_code(later)}."
        )
    items += run.caveats
    items += [f"Refused: {refusal}" for refusal in run.refusals]
    if run.tag == "UNRELIABLE":
        items += [
            f"Gate failed (the run is UNRELIABLE): {reason}"
            for reason in run.tag_reasons
            if not reason.startswith("gate 2 refused `")
        ]
    elif run.tag == "QUALIFIED":
        items += [f"Qualified: {reason}" for reason in run.tag_reasons if reason not in items]
    base = run.baseline or {}
    if base.get("refused"):
        items.append(
            f"The comparison with baseline {base.get('run_id') or base.get('ref')} was "
            f"refused: {base['refused']}."
        )
    items += [f"Baseline {base['run_id']} is QUALIFIED: {c}" for c in base.get("caveats") or []]
    gate = base.get("gate") or {}
    if gate.get("outcome") in ("regressed", "unjudged"):
        items += [f"CI gate {gate['outcome'].upper()}: {reason}" for reason in gate["reasons"]]
    primaries = set(primary_metrics(run.plan.config.metrics))
    for metric, per in run.summary.items():
        for label, row in per.items():
            cv = row.get("cv")
            if (
                cv is not None
                and cv > HIGH_CV
                and (metric in primaries or metric not in BUILTIN_METRICS)
            ):
                items.append(
                    f"High variance: {md_code(metric)} of {md_code(label)} has CV {_pct(cv)} "
                    f"(above {_pct(HIGH_CV)}); small effects cannot be told from noise."
                )
    if not items:
        items = _untested(run)
    return items


def _untested(run: BenchRun) -> list[str]:
    config = run.plan.config
    reproduced = run.reproduces or {}
    items = [
        "Nothing failed. What this run did not test:",
        "anything but this one configuration, at the values listed above: it was compared "
        "with nothing within the run (other sizes, settings or code may behave "
        "differently);"
        if run.one_configuration
        else f"only the values {', '.join(map(md, run.treatment_labels))} of "
        f"{md_code(run.variable)}, at the "
        "control values listed above (other sizes or settings may behave differently);",
    ]
    if reproduced.get("ok") and reproduced.get("kind") == "reproduction":
        items.append(
            f"one machine ({platform.node()}): it reproduced {reproduced['run_id']} "
            "here, not elsewhere;"
        )
    else:
        items.append(
            f"one machine ({platform.node()}), one session: no reproduction yet, so "
            f"the run is {run.tag} until a second run reproduces it;"
        )
    if not run.one_configuration:
        items.append(
            "the treatment order inside each block is fixed (control first): a "
            "warm-up or position effect would look like a treatment effect."
        )
    if config.seeds is None:
        items.append("a single seed: randomness of the workload itself was not varied.")
    return items


def _scalar(value: Any) -> bool:
    """Not a mapping or a list (a record's, or a hook view's frozen one)."""
    return isinstance(value, str) or not isinstance(value, (Mapping, Sequence))


def _environment(run: BenchRun) -> list[str]:
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


def terminal_lines(run: BenchRun, gate: dict[str, Any] | None = None) -> list[str]:
    """A compact per-metric table for the end of the pytest run; with ``gate`` (a CI
    invocation: a baseline or ``--bench-fail-on``), the baseline's verdicts and the gate."""
    lines = [f"{run.name} [{run.run_id}] {run.state}, {run.tag}: {_counts_text(run)}"]
    if run.tag_reasons:
        lines.append(f"  {run.tag}: {run.tag_reasons[0]}")
    extra = summary_lines.cpu_split_lines(run) + summary_lines.outlier_lines(run)
    if run.one_configuration:
        return [one_line(line) for line in lines + _alone_lines(run) + extra + _tail(run, gate)]
    labels = run.treatment_labels
    rows: list[tuple[str, list[str]]] = []
    exact: list[str] = []  # below the table: a hash in a cell would widen every column
    for metric, per in summary_lines.primary_first_items(run.summary, run.plan.config.metrics):
        if metric in BUILTIN_METRICS and metric not in run.plan.config.metrics:
            continue
        if metric in exact_metrics(run.plan.config.metrics):
            exact.append(
                f"  {metric[:16]:<16}  "
                + "; ".join(
                    f"{label}: {values_text(per.get(label, {}))}"
                    + (
                        f" {verdict}"
                        if (verdict := run.verdicts.get(metric, {}).get(label, {}).get("verdict"))
                        else ""
                    )
                    for label in labels
                )
            )
            continue
        cells = []
        for label in labels:
            row = per.get(label, {})
            if not row.get("n"):
                cells.append("-")
                continue
            text = human(row["median"], metric)
            judged = run.verdicts.get(metric, {}).get(label, {})
            if judged.get("ratio") is not None:  # gate 2's estimate: the tag lines' figure
                text += f" x{judged['ratio']:.3g}"
            if judged.get("verdict"):
                text += f" {judged['verdict']}"
            cells.append(text)
        rows.append((metric, cells))
    width = (
        max(
            [
                18,
                *(len(label[:30]) for label in labels),
                *(len(cell) for _, cells in rows for cell in cells),
            ]
        )
        + 2
    )
    lines.append(f"  {'metric':<16}" + "".join(f"{label[:30]:>{width}}" for label in labels))
    for metric, cells in rows:
        lines.append(f"  {metric[:16]:<16}" + "".join(f"{cell:>{width}}" for cell in cells))
    lines += exact + extra + summary_lines.comparison_lines(run) + summary_lines.geomean_lines(run)
    for refusal in run.refusals:
        lines.append(f"  refused: {refusal}")
    return [one_line(line) for line in lines + _tail(run, gate)]  # user text: one line each


def _tail(run: BenchRun, gate: dict[str, Any] | None) -> list[str]:
    """The end of :func:`terminal_lines`: regressions, the baseline's verdicts, the CI gate
    (loud when it did not pass) and where the report is."""
    lines = [f"  regression: {regression}" for regression in regressions(run.record())]
    if run.plan.revisions is not None:
        lines.append(f"  code: {run.plan.revisions.both}, both measured in this session")
    lines += _baseline_lines(run)
    if gate is not None:
        outcome = gate["outcome"]
        reasons = gate.get("reasons") or []
        lines.append(
            f"  CI gate: {outcome if outcome == 'passed' else outcome.upper()}"
            + (f": {reasons[0]}" if reasons else "")
        )
        lines += [f"    {reason}" for reason in reasons[1:]]
    if (run.dir / "report.md").is_file():  # never a path to a report that was not written
        lines.append(f"  report: {run.dir / 'report.md'}")
    return lines


def _baseline_lines(run: BenchRun) -> list[str]:
    """The primary verdicts against the baseline, both sides named by their code."""
    base = run.baseline
    if not base or not base.get("run_id"):
        return []
    code = base.get("code") or {}
    named = ", ".join(str(part) for part in (base.get("tag"), base.get("ref")) if part)
    sides = [code.get("baseline") or "(not read)", code.get("this") or "(not read)"]
    codes = f": code {sides[0]} -> {sides[1]}" if code.get("baseline") or code.get("this") else ""
    lines = [f"  baseline {base['run_id']}" + (f" ({named})" if named else "") + codes]
    verdicts = base.get("judged") or base.get("verdicts") or {}  # as the CI gate read them
    judged = primary_metrics(run.plan.config.metrics) + list(verdicts)
    for metric in dict.fromkeys(judged):  # every judged metric, the primaries first
        for label, v in (verdicts.get(metric) or {}).items():
            ci = v.get("ci")
            lines.append(
                f"    `{metric}` [{label}] {v['verdict']}"
                + (f" x{v['ratio']:.3g}" if v.get("ratio") is not None else "")
                + (f" [{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else "")
                + f" against {v.get('against')}"
                + (f": {v['reason']}" if v["verdict"] == "not_comparable" else "")
            )
    return lines


def _alone_lines(run: BenchRun) -> list[str]:
    """:func:`terminal_lines` of one configuration: each metric's median, CV and n (no ratio,
    no verdict: nothing was compared within the run)."""
    label = run.control
    lines = [f"  {'metric':<16}{'median (' + label[:24] + ')':>20}{'CV':>9}{'n':>5}"]
    for metric, per in run.summary.items():
        if metric in BUILTIN_METRICS and metric not in run.plan.config.metrics:
            continue
        row = per.get(label, {})
        lines.append(
            f"  {metric[:16]:<16}{_central(row):>20}{_pct(row.get('cv')):>9}{row.get('n', 0):>5}"
        )
    return lines


def _central(row: dict[str, Any], quote: str = "") -> str:
    """A summary row's median, or an exact metric's values verbatim with their counts."""
    return values_text(row, quote) if "values" in row else human(row.get("median"))


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _p(value: Any) -> str:
    if value is None:
        return "-"
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"
