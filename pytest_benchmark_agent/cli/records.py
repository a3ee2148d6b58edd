"""Verbs that read (and, for ``reclassify``, amend) the records in ``$BENCHMARK_HOME``:
``history``, ``analyze``, ``compare`` and ``reclassify``."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.cli import compare_gate
from pytest_benchmark_agent.cli.common import find_run, home_of
from pytest_benchmark_agent.cli.publish import cmd_changes, history_options
from pytest_benchmark_agent.errors import BenchError
from pytest_benchmark_agent.judge.across import (
    blocking_reason,
    code_changed,
    cross_verdicts,
    fingerprint_diff,
)
from pytest_benchmark_agent.judge.baseline import (
    FINISHED,
    config_differences,
    primary_metrics,
    resolve_ref,
)
from pytest_benchmark_agent.judge.reproduce import reproduction
from pytest_benchmark_agent.judge.tags import TAGS, ReclassifyError, reclassify
from pytest_benchmark_agent.records import recover
from pytest_benchmark_agent.records.reader import UnreadableRecord, load_results, skip_unreadable
from pytest_benchmark_agent.records.record import RunRecord, load_run
from pytest_benchmark_agent.records.safetext import one_line, printable
from pytest_benchmark_agent.records.store import runs_in
from pytest_benchmark_agent.records.writer import index_entry
from pytest_benchmark_agent.stats.comparability import is_guarded
from pytest_benchmark_agent.stats.describe import values_text

_MEANS = {
    "RELIABLE": "reproduced with no caveat: it may be stated as a result, within the controls "
    "it held fixed and on this kind of machine.",
    "QUALIFIED": "a result only together with its caveats: state each one beside the claim.",
    "EXPLORATORY": "a lead, not a conclusion: say 'suggests', not 'shows', and reproduce it "
    "(run the same config again) before relying on it.",
    "UNRELIABLE": "not a result: a gate failed (see What Went Wrong); fix that and run again.",
}


# -- history --------------------------------------------------------------------------------------


def cmd_history(args: argparse.Namespace) -> int:
    """One line per recorded run, oldest first: id, state, tag, name, code, CI gate, trials,
    primary verdicts; with --changes, each metric's change points over the runs instead."""
    if args.changes:
        return cmd_changes(args)
    if args.metric:
        raise BenchError("--metric chooses the metric of --changes; fix: add --changes")
    name = args.benchmark or args.name
    for run_dir in runs_in(home_of(args)):
        try:
            entry = _entry(run_dir)
        except UnreadableRecord as error:
            skip_unreadable(error)
            continue
        if name and entry.get("name") != name:
            continue
        counts = entry.get("counts") or {}
        verdicts = entry.get("verdicts") or {}
        primary = "; ".join(
            f"{metric} " + ", ".join(f"{t} {v}" for t, v in per.items())
            for metric, per in verdicts.items()
            if per
        )
        flags = f"  flagged x{entry['flags']}" if entry.get("flags") else ""
        code = (entry.get("code") or {}).get("label")
        print(
            one_line(  # an imported record's name never passed gate 1
                f"{run_dir.name}  {entry.get('state', '?'):<11} {entry.get('tag', '?'):<11} "
                f"{entry.get('name')}"
                + (f"  code {code}" if code else "")
                + f"  CI gate {entry.get('ci_gate') or '-'}"
                + "  trials: "
                + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
                + (f"  primary: {primary}" if primary else "")
                + flags
            )
        )
    return 0


def _entry(run_dir: Path) -> dict[str, Any]:
    """A run's index entry (cheap), else the fields of its full record."""
    entry = index_entry(run_dir)
    if entry is not None:
        return entry
    record = load_results(run_dir)
    fields = {key: record.get(key) for key in ("name", "state", "tag", "counts")}
    if fields["state"] == "running" and recover.orphaned(run_dir):
        fields["state"] = "interrupted"  # its session is gone, and finalizing it failed
    return fields


# -- analyze --------------------------------------------------------------------------------------


def cmd_analyze(args: argparse.Namespace) -> int:
    """Print a run's report (figures, tag, verdicts, What Went Wrong) and an outline for the
    skeptical reading of it."""
    run_dir = find_run(home_of(args), args.run)
    report = run_dir / "report.md"
    record = load_results(run_dir)
    if not report.is_file():
        print(f"{run_dir.name} has no report yet (state: {record.get('state')})")
        return 0
    print(printable(report.read_text(errors="replace")))
    print(printable("\n".join(skeptical_outline(record, load_run(run_dir)))))
    return 0


def order_outline(trials: list[dict[str, Any]], control: str) -> str:
    """What the recorded positions say about the order inside blocks: how often each
    treatment ran first, and whether a warm-up or position effect could pose as an effect."""
    ran = [t for t in trials if t.get("status") != "not_run"]
    blocks = {(t.get("host"), t.get("stage"), t.get("replicate"), t.get("seed")) for t in ran}
    firsts = Counter(str(t.get("treatment")) for t in ran if t.get("position") == 0)
    if not any(t.get("position") is not None for t in ran):
        return (
            "no trial records its position in its block, so the order inside blocks is "
            "unknown: a warm-up or position effect cannot be ruled out."
        )
    shares = ", ".join(f"`{label}` in {count}" for label, count in sorted(firsts.items()))
    said = f"by the recorded positions, the first trial of a block was {shares} of {len(blocks)}"
    if firsts.get(control, 0) == len(blocks):
        return (
            f"{said}: the control `{control}` ran first in every block, so a warm-up or "
            "position effect would look like a treatment effect."
        )
    return (
        f"{said}: the order varied, so a warm-up or position effect falls on both sides and "
        "the paired test does not read it as a treatment effect."
    )


def skeptical_outline(record: dict[str, Any], view: RunRecord) -> list[str]:
    """The four parts of the skeptical reading, filled with what the record says."""
    try:
        specs = view.model.metrics
    except ValueError:
        specs = {}
    primaries = primary_metrics(specs)
    verdicts = record.get("verdicts") or {}
    summary = record.get("summary") or {}
    control = str(record.get("control"))
    alone = not [t for t in record.get("treatments") or [] if str(t) != control]
    lines = [
        "## Skeptical reading (outline)",
        "",
        "### 1. What was claimed",
        "",
        f"- Hypothesis: {view.config.get('hypothesis') or '(none stated)'}",
    ]
    if alone:
        lines.append(
            f"- One configuration (`{control}`): nothing was compared within the run, "
            "so it claims nothing by itself; only a comparison with another run can."
        )
    for metric in primaries:
        for label, v in (verdicts.get(metric) or {}).items():
            ci = v.get("ci")
            lines.append(
                f"- `{metric}` [{label} against {control}]: {v.get('verdict')}, ratio "
                f"{_num(v.get('ratio'))}"
                + (f", 95% CI [{_num(ci[0])}, {_num(ci[1])}]" if ci else "")
                + f", p (Holm) {_num(v.get('p_holm'))}, MDE {_pct(v.get('mde'))}"
                + (f": {v['reason']}" if v.get("reason") else "")
            )
    lines += ["", "### 2. Why it might be wrong (check each)", ""]
    for metric in primaries:
        threshold = specs[metric].noise_threshold
        needed = specs[metric].min_replicates
        cv = ((summary.get(metric) or {}).get(control) or {}).get("cv")
        for label, v in (verdicts.get(metric) or {}).items():
            n = v.get("n") or []
            effect = None if v.get("ratio") is None else v["ratio"] - 1
            lines.append(
                f"- Noise against the effect, `{metric}` [{label}]: effect "
                f"{_pct(effect, '+')} against the noise threshold {_pct(threshold)}, MDE "
                f"{_pct(v.get('mde'))}, control CV {_pct(cv)}; n per side "
                + (" / ".join(map(str, n)) if n else "-")
                + f" (needed {needed})."
            )
    counts = record.get("counts") or {}
    bad = {s: n for s, n in counts.items() if s not in ("passed", "not_run")}
    lines.append(
        "- Trials that did not pass: "
        + (", ".join(f"{s} {n}" for s, n in sorted(bad.items())) or "none")
        + "."
    )
    guards = [m for m, s in specs.items() if is_guarded(s)]
    for metric in guards:
        said = ", ".join(f"{t} {v.get('verdict')}" for t, v in (verdicts.get(metric) or {}).items())
        none = (
            "no in-run verdict (one configuration: checked against other runs only)"
            if alone
            else "no verdict"
        )
        lines.append(f"- Guard `{metric}`: {said or none}.")
    lines.append(f"- Caveats: {len(record.get('caveats') or [])} (each under What Went Wrong).")
    lines += _fingerprint_checks(record)
    preps = record.get("preps") or []
    rebuilt = [p for p in preps if p.get("rebuild_reason") not in (None, "no cache entry")]
    lines.append(
        f"- Cache: {sum(p.get('action') == 'built' for p in preps)} prep(s) built, "
        f"{sum(p.get('action') == 'reused' for p in preps)} reused, {len(rebuilt)} "
        "rebuilt because an entry was damaged."
    )
    lines.append(
        "- Warm against cold: "
        + (
            "one configuration, its replicates ran one after another; a warm-up would show as a "
            "drift across them."
            if alone
            else order_outline(record.get("trials") or [], control)
        )
    )
    lines += ["", "### 3. What Went Wrong", ""]
    problems = record.get("what_went_wrong") or [
        "This record holds no What Went Wrong list: read the report's section above; at the "
        "least, this run cannot rule out machine load, a single dataset and a single seed."
    ]
    lines += [f"- {item}" for item in problems]
    tag = record.get("tag") or "EXPLORATORY"
    lines += ["", "### 4. What it means", "", f"- {tag}: {_MEANS.get(tag, '')}"]
    lines += [f"  - {reason}" for reason in record.get("tag_reasons") or []]
    return lines


def _fingerprint_checks(record: dict[str, Any]) -> list[str]:
    lines = []
    reproduces = record.get("reproduces") or {}
    baseline = record.get("baseline") or {}
    if reproduces.get("run_id"):
        benign = reproduces.get("benign_differences") or []
        lines.append(
            f"- Fingerprint against {reproduces['run_id']}: equal where it matters"
            + (f"; benign differences: {'; '.join(benign)}" if benign else "")
            + "."
        )
    if baseline:
        fingerprint = baseline.get("fingerprint") or {}
        code = baseline.get("code") or {}
        lines.append(
            f"- Fingerprint against baseline {baseline.get('run_id') or 'none found'} "
            f"(`{baseline.get('ref')}`): "
            + ("; ".join(fingerprint.get("blocking") or []) or "equal where it matters")
            + f"; code {code.get('baseline')} -> {code.get('this')}."
        )
        control = next(
            (
                v
                for per in (baseline.get("verdicts") or {}).values()
                for t, v in per.items()
                if t == record.get("control")
            ),
            None,
        )
        if control:
            lines.append(
                f"- Control drift: this session's control against {control['against']}"
                f": {control.get('verdict')}, ratio {_num(control.get('ratio'))}."
            )
    else:
        lines.append("- Control drift across sessions: not checked (no baseline).")
    if not reproduces.get("run_id") and not baseline:
        lines.append(
            "- Fingerprints: compared with no other run; environment differences "
            "between sessions are not checked."
        )
    return lines


# -- compare --------------------------------------------------------------------------------------


def cmd_compare(args: argparse.Namespace) -> int:
    """Per metric, runs A and B side by side with the verdict of B against A (both sides named
    by their code); exit 1 when the runs cannot be compared (the fields that differ are named),
    2 when A or B names no recorded run (what was searched is said). With ``--against REV``,
    A is a benchmark file measured instead, REV against the working tree in one session. With
    --fail-on, the session's CI gate with A as the baseline decides instead: 1 when it failed as
    named, else 0."""
    if args.against is not None or args.b is None:
        return _measure_against(args)
    home = home_of(args)
    name = args.name
    if name is None:  # a run named by id tells which benchmark a revision or `latest` means
        for ref in (args.a, args.b):
            named = resolve_ref(home, ref, None, Path.cwd(), strict=False)
            if named.run_dir is not None and named.how.startswith("run id"):
                name = _entry(named.run_dir).get("name")
                break
    views, sides = [], []
    for side, ref in (("A", args.a), ("B", args.b)):
        found = resolve_ref(home, ref, name, Path.cwd(), strict=False)
        if found.run_dir is None:
            print(f"benchmark-agent compare: unjudged: {found.problem}", file=sys.stderr)
            if args.fail_on:
                gate = compare_gate.missing_gate(found.problem or found.how)
                print("\n".join(compare_gate.gate_lines(gate)))
                return compare_gate.gate_exit(gate, args.fail_on)
            return 2
        views.append(load_run(found.run_dir))
        sides.append((side, found))
    lines, comparable, gate = compare_lines(*views)
    lines[1:1] = compare_gate.resolution_lines(sides)
    if args.fail_on:
        print("\n".join([*lines, "", *compare_gate.gate_lines(gate)]))
        return compare_gate.gate_exit(gate, args.fail_on)
    print("\n".join(lines))
    return 0 if comparable else 1


def _measure_against(args: argparse.Namespace) -> int:
    """``compare --against REV FILE``: ``pytest --bench FILE --bench-against REV
    --bench-fail-on=regression``, so its exit code is pytest's: 1 when the working tree
    regressed against REV (or a trial failed), 2 for bad input."""
    if args.against is None or args.b is not None or args.a.startswith("-"):
        print(
            "benchmark-agent compare: give two runs (A B), or --against REV and one "
            "benchmark file (compare --against main bench.yaml)",
            file=sys.stderr,
        )
        return 2
    import subprocess

    return subprocess.call(
        [sys.executable, "-m", "pytest", "--bench", args.a, "--bench-home", str(home_of(args))]
        + [f"--bench-against={args.against}", "--bench-fail-on=regression"]
    )


def compare_lines(a: RunRecord, b: RunRecord) -> tuple[list[str], bool, dict[str, Any]]:
    """B against A as lines, whether they could be compared, and the CI gate of B with A as
    its baseline (:mod:`.compare_gate`)."""
    lines = [f"compare {a.run_id} ({a.tag}, {a.state}) -> {b.run_id} ({b.tag}, {b.state})"]
    refusals: list[str] = []
    try:
        model_a, model_b = a.model, b.model
    except ValueError as exc:
        problem = f"a frozen config no longer validates ({exc})"
        return lines + [f"not_comparable: {problem}"], False, compare_gate.missing_gate(problem)
    if a.name != b.name:
        refusals.append(f"name: {a.name!r} (A) vs {b.name!r} (B)")
    refusals += [
        f"state: {view.run_id} ({side}) is {view.state or 'unfinished'}, not finished; "
        "compare complete or halted runs (run it again to finish it)"
        for side, view in (("A", a), ("B", b))
        if view.state not in FINISHED
    ]
    refusals += [
        f"{field}: {mine} (A) vs {theirs} (B)"
        for field, mine, theirs in config_differences(model_a, model_b)
    ]
    diff = fingerprint_diff(a, b)
    if diff.blocking:
        refusals.append(blocking_reason(diff))
    changed = code_changed(a, b, diff)
    both = f"{a.code} -> {b.code}"
    lines.append(
        f"code: {both}"
        + (
            " (B measured other code: this is a comparison of code)"
            if changed
            else " (the same code)"
        )
    )
    if refusals:
        lines.append(
            "not_comparable: the runs differ in more than the treatment variable's "
            "values and the code, or where fingerprints must agree:"
        )
        lines += [f"  - {r}" for r in refusals]
    else:
        lines.append(
            "gate 1: they differ in the treatment variable's values only; gate 2: "
            "fingerprints equal where it matters"
            + (", the code being what is compared" if changed else "")
        )
    lines += compare_gate.code_difference_line(diff.code)
    lines += [f"  benign fingerprint difference: {d}" for d in diff.benign]
    lines += [f"  fingerprint difference that matters: {d}" for d in diff.blocking]
    specs = model_b.metrics
    verdicts, notes = cross_verdicts(b, a, specs, "; ".join(refusals) or None)
    lines.append(
        f"B against A ({both}): each treatment of B against the same treatment of A "
        "(else A's control); the sessions were not interleaved, so this is unpaired "
        "and drift between them does not cancel."
    )
    lines += [f"  note: {n}" for n in notes]
    for metric, spec in specs.items():
        lines += [
            "",
            f"`{metric}` ({'primary, ' if spec.primary else ''}{spec.direction})",
            f"  {'treatment':<16}{'A median':>12}{'B median':>12}  {'verdict of B':<15}"
            f"{'ratio':>8}  {'95% CI':<18}{'p (Holm)':>9}  why",
        ]
        for label, v in sorted(verdicts.get(metric, {}).items(), key=_control_first(b)):
            target = label if label in a.treatments else a.control
            ci = v.ci
            lines.append(
                f"  {label[:16]:<16} {_median(a, metric, target):>11}"
                f" {_median(b, metric, label):>11}  {v.verdict:<15}"
                f"{_num(v.ratio):>8}  "
                f"{(f'[{_num(ci[0])}, {_num(ci[1])}]' if ci else '-'):<18}"
                f"{_num(v.p_holm):>9}  {v.reason or ''}"
            )
    geomeans = compare_gate.geomean_lines(verdicts, specs)
    lines += ["", *geomeans] if geomeans else []
    if not refusals and a.config_hash is not None and a.config_hash == b.config_hash:
        if changed:
            lines += [
                "",
                "Same frozen config, other code: B is compared with A across code, "
                "not a rerun of it (no reproduction check).",
            ]
        else:
            check = reproduction(b, a, specs, diff.benign)
            lines += [
                "",
                "Same frozen config and code: does B reproduce A's verdicts? "
                + ("yes" if check.ok else "NO"),
            ]
            lines += [f"  {line}" for line in check.lines]
    gate = compare_gate.compare_gate(a, b, verdicts, specs, "; ".join(refusals) or None)
    return lines, not refusals, gate


def _control_first(view: RunRecord) -> Callable[[tuple[str, Any]], tuple[int, int]]:
    """Sort key of (treatment, item) pairs: the view's control, then its treatments as
    declared, then any other."""
    order = [str(t) for t in view.treatments]

    def key(item: tuple[str, Any]) -> tuple[int, int]:
        label = item[0]
        return (label != str(view.control), order.index(label) if label in order else len(order))

    return key


def _median(view: RunRecord, metric: str, label: str) -> str:
    """The median of ``label``'s ``metric``; a ``direction: equal`` one's values verbatim."""
    row = (view.summary.get(metric) or {}).get(label) or {}
    return values_text(row) if "values" in row else _num(row.get("median"))


# -- reclassify -----------------------------------------------------------------------------------


def cmd_reclassify(args: argparse.Namespace) -> int:
    """Set a run's tag by hand with a reason (only downwards without a new run that reproduces
    it); flags every run that cited it."""
    home = home_of(args)
    try:
        lines = reclassify(home, find_run(home, args.run), args.tag, args.why)
    except ReclassifyError as exc:
        raise SystemExit(f"benchmark-agent reclassify: {exc}") from None
    print("\n".join(lines))
    return 0


def _fail_on(text: str) -> tuple[str, ...]:
    """``--fail-on``'s type: argparse's usage error (exit 2) naming what is accepted."""
    from pytest_benchmark_agent.judge.fail_on import fail_on_words

    try:
        return fail_on_words(text, "--fail-on")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.4g}"


def _pct(value: Any, sign: str = "") -> str:
    return "-" if value is None else f"{100 * value:{sign}.1f}%"


def register(verbs: argparse._SubParsersAction) -> None:
    history = verbs.add_parser("history", help=cmd_history.__doc__, description=cmd_history.__doc__)
    history.add_argument("--name", help="only runs of this benchmark name")
    history_options(history)
    history.set_defaults(func=cmd_history)
    analyze = verbs.add_parser("analyze", help=cmd_analyze.__doc__, description=cmd_analyze.__doc__)
    analyze.add_argument("run", help="run id, unique prefix, or 'latest'")
    analyze.set_defaults(func=cmd_analyze)
    compare = verbs.add_parser("compare", help=cmd_compare.__doc__, description=cmd_compare.__doc__)
    compare.add_argument(
        "a",
        metavar="A",
        help="the reference run: a run id or unique prefix, "
        "'latest', or a git revision of the current folder's repository (the "
        "newest finished run of that commit with a clean tree)",
    )
    compare.add_argument(
        "b", metavar="B", nargs="?", help="the run compared with A (the same forms)"
    )
    compare.add_argument(
        "--against",
        metavar="REV",
        help="measure instead of reading records: A is a benchmark file, run in one session "
        "with REV's code as the control and the working tree's as the treatment "
        "(pytest --bench A --bench-against REV --bench-fail-on=regression); no B",
    )
    compare.add_argument(
        "--name",
        help="the benchmark a revision or 'latest' means (default: "
        "the one a run id among A and B names)",
    )
    compare.add_argument(
        "--fail-on",
        type=_fail_on,
        default=None,
        metavar="regression[,unjudged]",
        help="act as the session's CI gate with A as the baseline: exit 1 when B regressed "
        "(a primary metric beyond its fail_threshold, or a guard metric), or, with unjudged, "
        "when nothing could be judged (not comparable, a REF naming no run); else 0",
    )
    compare.set_defaults(func=cmd_compare)
    reclass = verbs.add_parser(
        "reclassify", help=cmd_reclassify.__doc__, description=cmd_reclassify.__doc__
    )
    reclass.add_argument("run", help="run id, unique prefix, or 'latest'")
    reclass.add_argument("tag", type=str.upper, choices=TAGS, help="the new tag")
    reclass.add_argument(
        "--why", required=True, metavar="TEXT", help="the reason, recorded with the change"
    )
    reclass.set_defaults(func=cmd_reclassify)
