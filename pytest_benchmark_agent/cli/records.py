"""Verbs that read (and, for ``reclassify``, amend) the records in ``$BENCHMARK_HOME``:
``history``, ``analyze``, ``compare`` and ``reclassify``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.cli import compare_gate
from pytest_benchmark_agent.cli.common import find_run, home_of
from pytest_benchmark_agent.cli.outline import skeptical_outline
from pytest_benchmark_agent.cli.publish import cmd_changes, history_options
from pytest_benchmark_agent.config.metric import MetricSpec
from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.engine.reclassify import ReclassifyError, reclassify
from pytest_benchmark_agent.errors import BenchError
from pytest_benchmark_agent.judge.across import (
    blocking_reason,
    code_changed,
    cross_verdicts,
    fingerprint_diff,
)
from pytest_benchmark_agent.judge.baseline import FINISHED, config_differences, resolve_ref
from pytest_benchmark_agent.judge.reproduce import reproduction
from pytest_benchmark_agent.records import recover
from pytest_benchmark_agent.records.index import IndexEntry
from pytest_benchmark_agent.records.outcomes import GateRecord
from pytest_benchmark_agent.records.reader import UnreadableRecord, skip_unreadable
from pytest_benchmark_agent.records.record import (
    RunRecord,
    load_run,
    verdict_table,
)
from pytest_benchmark_agent.records.runcheck import TAGS
from pytest_benchmark_agent.records.store import runs_in
from pytest_benchmark_agent.records.summary import SummaryRow
from pytest_benchmark_agent.records.writer import load_index_entry
from pytest_benchmark_agent.stats.comparability import Verdict
from pytest_benchmark_agent.stats.describe import values_text
from pytest_benchmark_agent.stats.units import interval, number
from pytest_benchmark_agent.util.safetext import one_line, printable

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
        if name and entry.name != name:
            continue
        verdicts = entry.verdicts or {}
        primary = "; ".join(
            f"{metric} " + ", ".join(f"{t} {v}" for t, v in per.items())
            for metric, per in verdicts.items()
            if per
        )
        flags = f"  flagged x{entry.flags}" if entry.flags else ""
        code = entry.code_label
        print(
            one_line(  # an imported record's name never passed gate 1
                f"{run_dir.name}  {entry.state or '?':<11} {entry.tag or '?':<11} "
                f"{entry.name}"
                + (f"  code {code}" if code else "")
                + f"  CI gate {entry.ci_gate or '-'}"
                + "  trials: "
                + ", ".join(f"{k} {v}" for k, v in sorted(entry.counts.items()))
                + (f"  primary: {primary}" if primary else "")
                + flags
            )
        )
    return 0


def _entry(run_dir: Path) -> IndexEntry:
    """A run's index entry, else the fields of its full record; the record is loaded first
    either way, so a run the typed loader refuses is skipped (one warning) and never listed."""
    record = load_run(run_dir)
    entry = load_index_entry(run_dir)
    if entry is not None:
        return entry
    state = record.state
    if state == "running" and recover.orphaned(run_dir):
        state = "interrupted"  # its session is gone, and finalizing it failed
    return IndexEntry(
        run_id=record.run_id,
        name=record.name,
        state=state,
        tag=record.tag,
        counts=record.counts,
    )


# -- analyze --------------------------------------------------------------------------------------


def cmd_analyze(args: argparse.Namespace) -> int:
    """Print a run's report (figures, tag, verdicts, What Went Wrong) and an outline for the
    skeptical reading of it."""
    run_dir = find_run(home_of(args), args.run)
    report = run_dir / "report.md"
    record = load_run(run_dir)
    if not report.is_file():
        print(f"{run_dir.name} has no report yet (state: {record.state})")
        return 0
    print(printable(report.read_text(errors="replace")))
    print(printable("\n".join(skeptical_outline(record))))
    return 0


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
                name = _entry(named.run_dir).name
                break
    records, sides = [], []
    for side, ref in (("A", args.a), ("B", args.b)):
        found = resolve_ref(home, ref, name, Path.cwd(), strict=False)
        if found.run_dir is None:
            print(f"benchmark-agent compare: unjudged: {found.problem}", file=sys.stderr)
            if args.fail_on:
                gate = compare_gate.missing_gate(found.problem or found.how)
                print("\n".join(compare_gate.gate_lines(gate)))
                return compare_gate.gate_exit(gate, args.fail_on)
            return 2
        records.append(load_run(found.run_dir))
        sides.append((side, found))
    lines, comparable, gate = compare_lines(*records)
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


def compare_lines(a: RunRecord, b: RunRecord) -> tuple[list[str], bool, GateRecord]:
    """B against A as lines, whether they could be compared, and the CI gate of B with A as
    its baseline (:mod:`.compare_gate`)."""
    lines = [f"compare {a.run_id} ({a.tag}, {a.state}) -> {b.run_id} ({b.tag}, {b.state})"]
    try:
        model_a, model_b = a.model, b.model
    except ValueError as exc:
        problem = f"a frozen config no longer validates ({exc})"
        return lines + [f"not_comparable: {problem}"], False, compare_gate.missing_gate(problem)
    refusals = _refusals(a, b, model_a, model_b)
    diff = fingerprint_diff(a, b)
    if diff.blocking:
        refusals.append(blocking_reason(diff))
    changed = code_changed(a, b, diff)
    lines += _gate_lines(a, b, refusals, changed)
    lines += compare_gate.code_difference_line(diff.code)
    lines += [f"  benign fingerprint difference: {d}" for d in diff.benign]
    lines += [f"  fingerprint difference that matters: {d}" for d in diff.blocking]
    specs = model_b.metrics
    refusal = "; ".join(refusals) or None
    verdicts, notes = cross_verdicts(b, a, specs, refusal)
    lines.append(
        f"B against A ({a.code} -> {b.code}): each treatment of B against the same treatment "
        "of A (else A's control); the sessions were not interleaved, so this is unpaired "
        "and drift between them does not cancel."
    )
    lines += [f"  note: {n}" for n in notes]
    table = verdict_table(verdicts)
    lines += _metric_tables(a, b, table, specs)
    geomeans = compare_gate.geomean_lines(table, specs)
    lines += ["", *geomeans] if geomeans else []
    if not refusals and a.config_hash is not None and a.config_hash == b.config_hash:
        lines += _rerun_lines(a, b, specs, changed, diff.benign)
    gate = compare_gate.compare_gate(a, b, verdicts, specs, refusal)
    return lines, not refusals, gate


def _refusals(
    a: RunRecord, b: RunRecord, model_a: BenchmarkConfig, model_b: BenchmarkConfig
) -> list[str]:
    """Why B cannot be compared with A beyond the fingerprints: another benchmark, a run
    not finished, a config that differs in more than the treatment variable's values."""
    refusals = [f"name: {a.name!r} (A) vs {b.name!r} (B)"] if a.name != b.name else []
    refusals += [
        f"state: {run.run_id} ({side}) is {run.state or 'unfinished'}, not finished; "
        "compare complete or halted runs (run it again to finish it)"
        for side, run in (("A", a), ("B", b))
        if run.state not in FINISHED
    ]
    refusals += [
        f"{field}: {mine} (A) vs {theirs} (B)"
        for field, mine, theirs in config_differences(model_a, model_b)
    ]
    return refusals


def _gate_lines(a: RunRecord, b: RunRecord, refusals: list[str], changed: bool) -> list[str]:
    """The code each side measured, and what gates 1 and 2 said of the pair."""
    lines = [
        f"code: {a.code} -> {b.code}"
        + (
            " (B measured other code: this is a comparison of code)"
            if changed
            else " (the same code)"
        )
    ]
    if refusals:
        lines.append(
            "not_comparable: the runs differ in more than the treatment variable's "
            "values and the code, or where fingerprints must agree:"
        )
        return lines + [f"  - {r}" for r in refusals]
    lines.append(
        "gate 1: they differ in the treatment variable's values only; gate 2: "
        "fingerprints equal where it matters"
        + (", the code being what is compared" if changed else "")
    )
    return lines


def _metric_tables(
    a: RunRecord,
    b: RunRecord,
    verdicts: Mapping[str, Mapping[str, Verdict]],
    specs: Mapping[str, MetricSpec],
) -> list[str]:
    """Per metric, each treatment of B: the medians of both sides and B's verdict against A."""
    lines = []
    for metric, spec in specs.items():
        lines += [
            "",
            f"`{metric}` ({'primary, ' if spec.primary else ''}{spec.direction})",
            f"  {'treatment':<16}{'A median':>12}{'B median':>12}  {'verdict of B':<15}"
            f"{'ratio':>8}  {'95% CI':<18}{'p (Holm)':>9}  why",
        ]
        for label, v in sorted((verdicts.get(metric) or {}).items(), key=_control_first(b)):
            target = label if label in a.treatments else a.control
            ci = interval(v.ci)
            lines.append(
                f"  {label[:16]:<16} {_median(a, metric, target):>11}"
                f" {_median(b, metric, label):>11}  {v.word:<15}"
                f"{number(v.ratio):>8}  {ci:<18}{number(v.p_holm):>9}  {v.reason or ''}"
            )
    return lines


def _rerun_lines(
    a: RunRecord, b: RunRecord, specs: Mapping[str, MetricSpec], changed: bool, benign: list[str]
) -> list[str]:
    """The same frozen config: across code, or a rerun that must reproduce A's verdicts."""
    if changed:
        return [
            "",
            "Same frozen config, other code: B is compared with A across code, "
            "not a rerun of it (no reproduction check).",
        ]
    check = reproduction(b, a, specs, benign)
    return [
        "",
        "Same frozen config and code: does B reproduce A's verdicts? "
        + ("yes" if check.ok else "NO"),
        *(f"  {line}" for line in check.lines),
    ]


def _control_first(record: RunRecord) -> Callable[[tuple[str, Any]], tuple[int, int]]:
    """Sort key of (treatment, item) pairs: the run's control, then its treatments as
    declared, then any other."""
    order = list(record.treatments)

    def key(item: tuple[str, Any]) -> tuple[int, int]:
        label = item[0]
        return (label != record.control, order.index(label) if label in order else len(order))

    return key


def _median(record: RunRecord, metric: str, label: str) -> str:
    """The median of ``label``'s ``metric``; a ``direction: equal`` one's values verbatim."""
    row = record.stats(metric).get(label) or SummaryRow()
    return values_text(row) if row.exact else number(row.get("median"))


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
