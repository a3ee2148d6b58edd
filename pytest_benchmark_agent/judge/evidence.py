"""What the CI gate may conclude from a comparison: only what its evidence shows.

Two rules, both pure (the I/O is :func:`recorded_history`'s, which reads recorded runs):

* **A pass needs evidence, read on the interval** (:func:`judge_metric`,
  :func:`gate_decision`). A primary metric passes only when its interval rules out a regression
  beyond its ``fail_threshold`` (5% for a timing, 1% for a count, by default); it fails when its
  whole interval lies beyond the threshold, or when a regression is shown and one beyond the
  threshold is not ruled out. Anything else is ``unjudged`` (more blocks could decide: the
  adaptive blocks of ``--bench-against`` add them until it does).
* **The session is the unit across runs** (:func:`across_runs`). A recorded baseline was
  measured in another job, on a machine that may differ from this one; one run cannot say by
  how much. The recorded runs of the baseline's revision (or of its first-parent history)
  give the spread of run medians, pooled within commits (:func:`spread_of`). With fewer than
  :data:`MIN_HISTORY` - 1 degrees of freedom no spread is known: a change whose interval does
  not clear the between-run allowance (per metric ``run_to_run``, else
  :data:`DEFAULT_RUN_TO_RUN`, widened to the difference one pair of runs shows) is
  ``not_comparable``: cannot separate machine from code. With more, the spread enters the
  interval: its half-width is the within-run interval's and a between-run prediction
  interval's (``t(df) * sd * sqrt(2)`` on the log scale) added in quadrature.

The figures behind both (false ``regressed`` and power per cell): ``benchmarks/cross_revision.py``
and STATISTICS.md, "Across revisions".
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.config.metric import COUNTERS, default_fail_threshold
from pytest_benchmark_agent.judge.baseline import FINISHED
from pytest_benchmark_agent.records.reader import UnreadableRecord, skip_unreadable
from pytest_benchmark_agent.records.record import RunRecord, load_run
from pytest_benchmark_agent.records.writer import load_index
from pytest_benchmark_agent.stats.comparability import Refusal, Verdict
from pytest_benchmark_agent.stats.distributions import ndtri, stdtrit

#: The between-run allowance when neither the file (``run_to_run``) nor history gives one:
#: the same code moved 3% between two hosted jobs in issue 34's chains, and 5% covers that.
DEFAULT_RUN_TO_RUN = 0.05
#: Recorded runs needed before their spread is estimated (two give one difference).
MIN_HISTORY = 3
#: The most recorded runs read for the spread (the newest), and the first-parent commits of
#: the baseline's branch searched when its own revision has fewer than MIN_HISTORY runs.
HISTORY_RUNS = 10
HISTORY_COMMITS = 20
_POWER = 0.8
_CI = 0.975
_EPS = 1e-12
_SHA = re.compile(r"[0-9a-f]{7,64}")


def fail_threshold(metric: str, spec: Any) -> float:
    """A primary metric's gate threshold (:func:`.metric.default_fail_threshold`)."""
    return default_fail_threshold(metric, spec)


@dataclass(frozen=True)
class MetricGate:
    """The gate's outcome for one primary metric and treatment, with its words."""

    outcome: str  # regressed | passed | unjudged
    text: str


def share(value: float | None) -> str:
    """A fraction as a percentage (``-`` unknown, ``inf`` for an MDE no effect reaches)."""
    if value is None:
        return "-"
    return "inf" if math.isinf(value) else f"{100 * value:.3g}%"


def evidence_text(verdict: Verdict) -> str:
    """Interval, MDE, n and CV of a verdict (its ratio is said before it; the CV of each side
    is its ``cv``, when the gate gave it one), one clause. An interval not at 95% names its
    level (a look of the gate's adaptive blocks)."""
    ci = verdict.ci
    n = list(verdict.n) if any(verdict.n) else []  # (0, 0): a verdict refused before counting
    cv = verdict.extra.get("cv") or []
    level = verdict.extra.get("ci_level")
    named = f"{100 * level:.3g}% interval" if level else "interval"
    parts = [
        f"{named} [{ci[0]:.4g}, {ci[1]:.4g}]" if ci and None not in ci else "interval -",
        f"MDE {share(verdict.mde)}",
        "n " + ("/".join(str(k) for k in n) if n else "-"),
        "CV " + ("/".join(share(c) for c in cv) if cv else "-"),
    ]
    return ", ".join(parts)


def regression_sizes(ci: Sequence[float] | None, direction: str) -> tuple[float, float] | None:
    """An interval of the ratio as the regressions it allows, nearest and farthest (a fraction:
    0.05 is 5% worse, negative is better): ``ci - 1`` for lower-is-better, ``1 - ci`` reversed
    for higher-is-better; None without an interval."""
    if not ci or None in ci:
        return None
    if direction == "higher":
        return 1 - ci[1], 1 - ci[0]
    return ci[0] - 1, ci[1] - 1


def gate_decision(verdict: Verdict, threshold: float, direction: str, until: str) -> str | None:
    """What the gate concludes from one primary comparison: ``regressed``, ``passed``, or None
    (more blocks could decide). Read on the interval:

    * ``gate`` (the CI gate): passed when the interval rules out a regression beyond
      ``threshold`` (its regression-side edge lies within it); regressed when the whole interval
      lies beyond the threshold, or when a regression is shown (the verdict is ``regressed``:
      its interval clears the noise band) and one beyond the threshold is not ruled out.
    * ``midpoint`` (a bisect step, ``threshold`` the midpoint between GOOD and BAD): regressed
      when the whole interval lies beyond it, passed when the whole interval lies before it.
    """
    if direction == "equal":
        return "regressed" if verdict.regressed else "passed"
    sizes = regression_sizes(verdict.ci, direction)
    if verdict.not_comparable:
        return None
    if sizes is None:  # a record without an interval: its point is all there is to read
        ratio = verdict.ratio
        beyond = ratio is None or abs(ratio - 1) > threshold + _EPS
        return "regressed" if verdict.regressed and beyond else None
    near, far = sizes
    if near > threshold + _EPS:
        return "regressed"
    if until == "midpoint":
        return "passed" if far < threshold - _EPS else None
    if could_never_decide(verdict):  # its interval is no evidence: no count of it could decide
        return None
    if far <= threshold + _EPS:
        return "passed"
    return "regressed" if verdict.regressed else None


def judge_metric(said: str, verdict: Verdict, metric: str, spec: Any) -> MetricGate:
    """One primary comparison under the evidence rule (:func:`gate_decision`, read on the
    interval); ``said`` names it (metric, label, verdict, ratio, what it was compared with) at
    the start of its text."""
    threshold = fail_threshold(metric, spec)
    shown = evidence_text(verdict)
    if verdict.not_comparable:
        return MetricGate("unjudged", f"{said} ({shown}): {verdict.reason}")
    decided = gate_decision(verdict, threshold, spec.direction, "gate")
    sizes = regression_sizes(verdict.ci, spec.direction)
    limit = share(threshold)
    if decided == "regressed":
        why = (
            ""  # no interval recorded: its point beyond the threshold
            if sizes is None
            else ": its whole interval lies beyond it"
            if sizes[0] > threshold
            else ": a regression is shown and one beyond it is not ruled out"
        )
        reason = f"; {verdict.reason}" if verdict.reason else ""
        return MetricGate(
            "regressed", f"{said}, beyond fail_threshold {limit} ({shown}){why}{reason}"
        )
    if decided == "passed":
        if spec.direction == "equal":
            return MetricGate("passed", f"{said} ({shown}): every value equals the control's")
        return MetricGate(
            "passed",
            f"{said} ({shown}): the interval rules out a regression beyond fail_threshold {limit}",
        )
    if could_never_decide(verdict) or sizes is None:
        return MetricGate("unjudged", f"{said} ({shown}): {verdict.reason}")
    return MetricGate(
        "unjudged",
        f"{said} ({shown}): could not rule out a {limit} regression (the interval reaches "
        f"{share(sizes[1])}) nor show one; add blocks"
        + more_blocks(metric, verdict, threshold, spec),
    )


def more_blocks(metric: str, verdict: Verdict, threshold: float, spec: Any) -> str:
    """What an unjudged comparison would need: the blocks at which its MDE reaches
    ``threshold`` at the noise it saw (the MDE's part above the noise band shrinks as one over
    the root of the blocks, stats/mde.py), and for a timed metric, that counting instructions
    decides in three (a count moves by tenths of a percent: STATISTICS.md). Nothing for a
    comparison across runs (``against`` a recorded baseline): there the session is the unit."""
    if verdict.extra.get("against"):
        return ""
    units = verdict.units or min(verdict.n)
    band = math.log1p(getattr(spec, "noise_threshold", 0.0) or 0.0)
    room = math.log1p(threshold) - band
    text = ""
    if verdict.mde is not None and not math.isinf(verdict.mde) and units > 0 and room > 0:
        excess = math.log1p(verdict.mde) - band
        blocks = max(math.ceil(units * (excess / room) ** 2), units + 1)
        text = f" (at this noise, about {blocks} blocks would see it)"
    if metric not in COUNTERS:
        text += "; or count instructions (counters: [instructions]), which decide in 3 blocks"
    return text


def could_never_decide(verdict: Verdict) -> bool:
    """A ``no_change`` that no effect could have turned into a decision (too few blocks for the
    exact test to reach its level: the analysis gives it an infinite MDE): not a judgement."""
    return verdict.no_change and verdict.mde is not None and math.isinf(verdict.mde)


def gate_outcome(judged: Sequence[MetricGate]) -> str:
    """regressed when one metric regressed, else unjudged when one is, else passed."""
    outcomes = {g.outcome for g in judged}
    for outcome in ("regressed", "unjudged"):
        if outcome in outcomes:
            return outcome
    return "passed" if judged else "unjudged"


# -- across runs: the session is the unit ---------------------------------------------------------


@dataclass(frozen=True)
class Spread:
    """What recorded runs say about one metric's between-run spread: ``sd`` of their log
    medians (pooled within commits, ``df`` degrees of freedom) when ``df`` reaches
    MIN_HISTORY - 1, else the ``allowance``."""

    runs: int
    sd: float | None
    allowance: float
    source: str
    df: int = 0

    @property
    def mode(self) -> str:
        return "spread" if self.sd is not None else "allowance"

    def as_record(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "runs": self.runs,
            "sd": self.sd,
            "df": self.df,
            "allowance": None if self.sd is not None else self.allowance,
            "source": self.source,
        }

    def words(self) -> str:
        """How this spread judges, for the gate line."""
        if self.sd is not None:
            return (
                f"between-run spread of {self.source} (sd {share(self.sd)}) in the interval: "
                "the session is the unit"
            )
        return (
            f"{self.source}: no between-run spread known, changes within the between-run "
            f"allowance {share(self.allowance)} are unjudged"
        )


def spread_of(groups: Sequence[Sequence[float]], declared: float | None, source: str) -> Spread:
    """The between-run spread of recorded run medians, grouped by commit (positive values),
    or the allowance.

    Each commit's runs are centred on their own mean, so a change of code between commits never
    counts as spread: the pooled standard deviation of the log medians has ``runs - commits``
    degrees of freedom, and needs MIN_HISTORY - 1 of them (three runs of one commit, or two
    each of two). With fewer, the allowance: the declared ``run_to_run``, else the default,
    widened to the difference the one pair of runs of a commit shows."""
    squares, df, runs = 0.0, 0, 0
    for group in groups:
        logs = [math.log(m) for m in group if m > 0 and math.isfinite(m)]
        runs += len(logs)
        if len(logs) > 1:
            mean = sum(logs) / len(logs)
            squares += sum((x - mean) ** 2 for x in logs)
            df += len(logs) - 1
    if df >= MIN_HISTORY - 1:
        return Spread(runs, math.sqrt(squares / df), DEFAULT_RUN_TO_RUN, source, df)
    allowance = DEFAULT_RUN_TO_RUN if declared is None else declared
    if df == 1:  # one pair: its difference is sd * sqrt(2), as the allowance compares two runs
        allowance = max(allowance, math.expm1(math.sqrt(2 * squares)))
    return Spread(runs, None, allowance, source, df)


def across_runs(verdict: Verdict, spread: Spread, spec: Any) -> Verdict:
    """A within-run verdict against a recorded baseline, judged with the session as the unit
    (it gains ``across``: the spread's record)."""
    out = dataclasses.replace(verdict, extra={**verdict.extra, "across": spread.as_record()})
    ratio, ci = verdict.ratio, verdict.ci
    if verdict.not_comparable or not ratio or not ci or None in ci:
        return out
    if ratio <= 0 or ci[0] <= 0:
        return out
    decided = verdict.improved or verdict.regressed
    if spread.sd is None:
        band = (1 + spec.noise_threshold) * (1 + spread.allowance) - 1
        if decided and not (ci[0] > 1 + band or ci[1] < 1 - band):
            return dataclasses.replace(
                out,
                verdict="not_comparable",
                refused=Refusal.TOO_SMALL,
                reason=(
                    f"cannot separate machine from code: x{ratio:.4g} [{ci[0]:.4g}, {ci[1]:.4g}] "
                    f"does not clear the between-run allowance {share(spread.allowance)} "
                    f"({spread.source}); fix: record {MIN_HISTORY} or more runs of the "
                    "baseline's revision, or set this metric's run_to_run"
                ),
            )
        return out
    within = (math.log(ci[1]) - math.log(ci[0])) / 2
    between = stdtrit(spread.df, _CI) * spread.sd * math.sqrt(2)
    half = math.hypot(within, between)
    centre = math.log(ratio)
    wide = (math.exp(centre - half), math.exp(centre + half))
    band = spec.noise_threshold
    reach = math.log1p(band) + half * (1 + ndtri(_POWER) / ndtri(_CI))
    out = dataclasses.replace(out, ci=wide, mde=max(verdict.mde or 0.0, math.expm1(reach)))
    if decided and not (wide[0] > 1 + band or wide[1] < 1 - band):
        return dataclasses.replace(
            out,
            verdict="no_change",
            reason=(
                f"not shown beyond the between-run spread: the interval [{wide[0]:.4g}, "
                f"{wide[1]:.4g}] with {spread.source} reaches into the noise band "
                f"1 +/- {share(band)}"
            ),
        )
    return out


def recorded_history(
    home: Path, name: str, key: str, commit: str | None, exclude: str, repo: Path
) -> tuple[list[list[Path]], str]:
    """The recorded runs whose spread judges a baseline of ``commit``, grouped by commit:
    finished runs of benchmark ``name`` sharing ``key`` (gate 1 would pass) at that commit with
    a clean tree, whatever their tag (a rerun that did not reproduce because the machine moved
    is the very spread to measure), the newest first; with fewer than MIN_HISTORY, those of its
    first-parent ancestors too (at most HISTORY_COMMITS back, HISTORY_RUNS runs in all).
    Returns the groups and words saying what they are."""
    if commit is None or not _SHA.fullmatch(commit):
        return [], "no git commit to find recorded runs by"
    by_commit: dict[str, list[tuple[str, Path]]] = {}
    for run_dir, entry in load_index(home):
        if (
            run_dir.name != exclude
            and entry.name == name
            and entry.comparison_key == key
            and entry.state in FINISHED
            and entry.commit is not None
            and not entry.dirty
        ):
            by_commit.setdefault(entry.commit, []).append((entry.ended or "", run_dir))

    def newest(at: str, room: int) -> list[Path]:
        return [d for _, d in sorted(by_commit.get(at, []), reverse=True)][:room]

    groups = [newest(commit, HISTORY_RUNS)]
    own = len(groups[0])
    if own >= MIN_HISTORY:
        return groups, f"{own} recorded runs of {commit[:7]}"
    for ancestor in _first_parents(repo, commit)[1:]:
        room = HISTORY_RUNS - sum(len(g) for g in groups)
        if room <= 0:
            break
        if found := newest(ancestor, room):
            groups.append(found)
    others = sum(len(g) for g in groups[1:])
    if not others:
        return groups, f"{own} recorded run(s) of {commit[:7]}"
    return groups, (
        f"{own + others} recorded runs ({own} of {commit[:7]}, {others} of its first-parent "
        "history; spread within each commit)"
    )


def _first_parents(repo: Path, commit: str) -> list[str]:
    """``commit`` and its first-parent ancestors, newest first ([] outside git)."""
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "rev-list", "--first-parent", f"-n{HISTORY_COMMITS}", commit],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return done.stdout.split() if done.returncode == 0 else []


def judge_across(
    this: RunRecord,
    base: RunRecord,
    history: Sequence[Sequence[Path]],
    source: str,
    verdicts: Mapping[str, Mapping[str, Verdict]],
    specs: Mapping[str, Any],
) -> tuple[dict[str, dict[str, Verdict]], dict[str, dict[str, dict[str, Any]]]]:
    """``verdicts`` (this run against ``base``, within runs) judged with the session as the
    unit, each with both sides' CV (``cv``); and the spread each used (metric -> label ->
    record). ``history`` are :func:`recorded_history`'s groups (``base`` joins the first one)."""
    groups = _history_runs(base, history)
    if sum(len(g) for g in groups) == 1:
        source = f"1 recorded run ({base.run_id})"
    judged: dict[str, dict[str, Verdict]] = {}
    spreads: dict[str, dict[str, dict[str, Any]]] = {}
    for metric, per in verdicts.items():
        judged[metric], spreads[metric] = {}, {}
        for label, verdict in per.items():
            target = label if label in base.treatments else base.control
            medians = [
                [m for run in group if (m := _stat(run, metric, target, "median")) is not None]
                for group in groups
            ]
            spec = specs.get(metric)
            spread = spread_of(medians, getattr(spec, "run_to_run", None), source)
            cv = [_stat(base, metric, target, "cv"), _stat(this, metric, label, "cv")]
            across = across_runs(verdict, spread, spec) if spec is not None else verdict
            judged[metric][label] = dataclasses.replace(across, extra={**across.extra, "cv": cv})
            spreads[metric][label] = spread.as_record()
    return judged, spreads


def _history_runs(base: RunRecord, history: Sequence[Sequence[Path]]) -> list[list[RunRecord]]:
    """The records of :func:`recorded_history`'s groups, ``base`` first in the first one (an
    unreadable record is skipped with a warning: an earlier record never breaks a later run)."""
    groups: list[list[RunRecord]] = [[base]]
    for index, group in enumerate(history):
        if index:
            groups.append([])
        for run_dir in group:
            if run_dir.name == base.run_id:
                continue
            try:
                groups[-1].append(load_run(run_dir))
            except UnreadableRecord as error:
                skip_unreadable(error)
    return groups


def _stat(run: RunRecord, metric: str, label: str, name: str) -> float | None:
    """One descriptive statistic of ``label``'s ``metric`` in ``run`` (a number, else None)."""
    value = run.stats(metric).get(label, {}).get(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
