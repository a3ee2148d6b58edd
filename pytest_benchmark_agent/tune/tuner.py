"""The tuner's loop: rounds through a runner, moves that gate 2 supports and confirms, the
loop guard.

A strategy (:mod:`.strategies`) proposes points; :meth:`Tuner.evaluate` runs them as one round
against the incumbent (:mod:`.rounds`, sized by :mod:`.sizing` so its comparisons can be
decided at all) and, when :mod:`.selection` finds a supported improvement, re-measures that
candidate against the incumbent in a fresh round of its own before moving: both rounds must
call it improved, so a false move needs two independent false positives. The loop guard
halts (state ``halted``, exit code 1) when the incumbent of a round is ungrounded (too few of
its trials passed, one was non-comparable, or it breaks a constraint), after
``tune.max_noncomparable_streak`` non-comparable candidates in a row, when a budget
(:mod:`.budget`) would be overrun, and when a round's replicates could never decide it. A
halted or interrupted tune resumes from its record: finished rounds are replayed from their run
records, never re-run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.config.tuning import TuneSettings
from pytest_benchmark_agent.engine.plan import point_label
from pytest_benchmark_agent.errors import BenchError
from pytest_benchmark_agent.records.frozen import thaw
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.records.schema import TrialRecord
from pytest_benchmark_agent.tune import budget
from pytest_benchmark_agent.tune.rounds import RoundOutcome, RoundRequest, RoundRunner, merged
from pytest_benchmark_agent.tune.selection import (
    Candidate,
    choose,
    classify,
    comparer,
    constraint_checks,
    gist,
    metric_specs,
    objective_stage,
    trials_by_label,
)
from pytest_benchmark_agent.tune.sizing import RoundSize, Undecidable, size_round
from pytest_benchmark_agent.tune.space import Point, SearchSpace
from pytest_benchmark_agent.tune.strategies import STRATEGIES


class Halt(Exception):
    """The tuner stops and asks a human: ``kind`` is ungrounded, streak, budget, replicates
    (a round its replicates could never decide) or round."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        self.message = message
        super().__init__(message)


class ResumeMismatch(BenchError):
    """Resuming would replay a recorded round whose points this file no longer proposes."""


@dataclass
class Judged:
    """One judged round: its candidates, the move it supports (not yet confirmed), its summary
    and the streak of non-comparable candidates it completed (empty when none)."""

    candidates: list[Candidate]
    chosen: Candidate | None
    summary: dict[str, Any]
    streak: list[Candidate]


class Tuner:
    """Runs a strategy: rounds through ``runner``, selection, confirmation, the loop guard and
    budgets.

    ``replay`` holds the rounds of a previous attempt of this tune (summary and run record,
    in order); while they last, a round whose points match is judged from its record instead
    of being run again. ``on_round``, called after every round, is set once the tuner exists
    (the recorder that fills it needs the tuner).
    """

    def __init__(
        self,
        space: SearchSpace,
        config: BenchmarkConfig,
        settings: TuneSettings,
        runner: RoundRunner,
        *,
        tune_id: str,
        replay: Sequence[tuple[dict[str, Any], RunRecord]] = (),
        echo: Callable[[str], None] | None = None,
    ):
        self.space = space
        self.config = config
        self.settings = settings
        self.runner = runner
        self.tune_id = tune_id
        self.on_round: Callable[[], None] | None = None
        self.echo = echo or (lambda line: None)
        self.incumbent: Point = dict(space.start)
        self.rounds: list[dict[str, Any]] = []
        self.candidates: list[Candidate] = []
        self.path: list[dict[str, Any]] = [
            {
                "round": None,
                "label": point_label(space.start),
                "point": dict(space.start),
                "ratio": None,
            }
        ]
        self.trials: list[dict[str, Any]] = []
        self.ties: list[str] = []
        self.spent = budget.Spent()
        self.streak: list[Candidate] = []  # the current run of non-comparable candidates
        self.halt: Halt | None = None
        self.converged: str | None = None
        self._replay = list(replay)
        self._judged: set[tuple[str, str]] = set()
        self._specs = metric_specs(config, space)

    # -- running a strategy -------------------------------------------------------------------

    def run(self, strategy: str) -> None:
        """Run ``strategy`` until it converges or the loop guard halts it."""
        try:
            self.converged = STRATEGIES[strategy](self)
        except Halt as halt:
            self.halt = halt
            self.echo(f"HALTED ({halt.kind}): {halt.message}")

    @property
    def replaying(self) -> bool:
        return len(self.rounds) < len(self._replay)

    def evaluate(self, points: Iterable[Point]) -> list[Candidate]:
        """Run one round of ``points`` against the incumbent; move when a candidate is
        supported there and again in its confirmation round.

        Points equal to the incumbent, repeated, or already judged against this incumbent
        are dropped; when none is left no round runs.
        """
        incumbent_label = point_label(self.incumbent)
        labels: dict[str, Point] = {}
        for point in points:
            label = point_label(point)
            if label != incumbent_label and (incumbent_label, label) not in self._judged:
                labels.setdefault(label, dict(point))
        if not labels:
            return []
        judged = self._round([dict(self.incumbent), *labels.values()])
        if judged.chosen is not None:
            self._confirm(judged)
        if judged.streak:
            self._halt_on_streak(judged)
        return judged.candidates

    def _round(self, points: list[Point], confirms: int | None = None) -> Judged:
        """Run (or replay) and judge one round of ``points``, the incumbent first."""
        index = len(self.rounds)
        size = self._size(index, points)
        if not self.replaying:
            self._check_budget(len(points), size)
            what = (
                f"confirmation of {point_label(points[1])} (selected in round {confirms})"
                if confirms is not None
                else f"{len(points) - 1} candidate(s)"
            )
            self.echo(f"round {index}: {what} against {point_label(points[0])}")
            return self._judge(index, points, self._sessions(index, points, size), size, confirms)
        summary, record = self._replay[index]
        expected = [point_label(p) for p in points]
        if summary["points"] != expected:
            raise ResumeMismatch(
                f"round {index} of tune {self.tune_id} evaluated "
                f"{summary['points']}, but resuming proposes {expected}: "
                "resume with the same file, strategy and --bench-set values, "
                "or start a new tune."
            )
        outcome = RoundOutcome(summary["run_id"], record, float(summary.get("wall_s") or 0.0))
        judged = self._judge(index, points, outcome, size, confirms)
        if not self.replaying:
            self.streak = []  # a human resumed the tune after this round
        return judged

    def _size(self, index: int, points: list[Point]) -> RoundSize:
        """The sessions this round needs so that its comparisons can be decided at all."""
        compared = sum(1 for spec in self._specs.values() if spec.direction != "equal")
        try:
            return size_round(self.config, (len(points) - 1) * compared)
        except Undecidable as exc:
            raise Halt("replicates", f"round {index} was not run: {exc}") from None

    def _sessions(self, index: int, points: list[Point], size: RoundSize) -> RoundOutcome:
        """The round's sessions, in order, as one outcome (stopping at one that did not
        finish); each gets the wall-clock time left, and none starts when none is left."""
        outcomes: list[RoundOutcome] = []
        for part in range(size.sessions):
            left = budget.time_left(self.config, self.spent)
            if left is not None:
                left = max(left - sum(o.wall_s for o in outcomes), 0.0)
                if part and not left:  # the wall-clock budget ran out between sessions
                    cut = merged(outcomes, size.per_session)
                    cut.timed_out = True
                    return cut
            suffix = f"-s{part + 1}" if part else ""
            request = RoundRequest(index, f"{self.tune_id}-r{index:02d}{suffix}", points, left)
            outcomes.append(self.runner(request))
            last = outcomes[-1]
            if last.timed_out or last.record.state != "complete":
                break
        return merged(outcomes, size.per_session)

    # -- budgets --------------------------------------------------------------------------------

    def _check_budget(self, n_points: int, size: RoundSize) -> None:
        needed = n_points * size.sessions * budget.trials_per_point(self.config)
        message = budget.overrun(self.config, self.spent, needed)
        if message is not None:
            sized = (
                f" The round runs {size.sessions} sessions: {size.why}."
                if size.sessions > 1
                else ""
            )
            raise Halt("budget", message + sized)

    # -- judging a round ------------------------------------------------------------------------

    def _judge(
        self,
        index: int,
        points: list[Point],
        outcome: RoundOutcome,
        size: RoundSize,
        confirms: int | None,
    ) -> Judged:
        """Record round ``index`` and judge its candidates against its incumbent; halts on a
        round that did not finish or an incumbent that cannot be grounded."""
        record = outcome.record
        labels = [point_label(p) for p in points]
        summary = self._round_summary(index, labels, outcome, size, confirms)
        self.rounds.append(summary)
        by_label = trials_by_label(record, labels)
        self._keep_trials(index, points, labels, outcome)
        if outcome.timed_out or record.state != "complete":
            self._halt_unfinished(index, summary, outcome)
        try:
            self._check_incumbent(labels[0], by_label[labels[0]])
        except Halt as halt:
            summary.update(status="halted", outcome=f"halted: {halt.message}")
            self._tag_trials(index, labels[0], {})
            self._notify()
            raise
        summary["grounded"] = True
        compare = comparer(record, self.config, self.space.objective)
        verdicts = compare(labels, self._specs)
        judged = [
            classify(self.space, index, label, point, labels[0], by_label[label], verdicts[label])
            for label, point in zip(labels[1:], points[1:], strict=True)
        ]
        streak_hit = self._update_streak(judged)
        objective = self.space.objective
        chosen, ties = choose(
            self.space, index, self.incumbent, labels[0], judged, compare, self._specs[objective]
        )
        self.ties += ties
        for candidate in judged:
            self._judged.add((labels[0], candidate.label))
        self.candidates.extend(judged)
        self._tag_trials(index, labels[0], {c.label: c for c in judged})
        summary["status"] = "halted" if streak_hit else "finished"
        summary["outcome"] = (
            f"{chosen.label} improved; confirming it in a fresh round"
            if chosen is not None and confirms is None
            else f"kept {labels[0]}"
        )
        if streak_hit:
            summary["outcome"] += "; halted on a streak of non-comparable candidates"
        self._notify()
        return Judged(judged, chosen, summary, streak_hit)

    def _round_summary(
        self,
        index: int,
        labels: list[str],
        outcome: RoundOutcome,
        size: RoundSize,
        confirms: int | None,
    ) -> dict[str, Any]:
        """A round's entry in the record: its runs, points, size and what it spent (added to
        the tune's spending here)."""
        record, run_id = outcome.record, outcome.run_id
        return {
            "round": index,
            "run_id": run_id,
            "run_ids": list(dict.fromkeys(str(t.get("run_id") or run_id) for t in record.trials))
            or [run_id],
            "points": labels,
            "incumbent": labels[0],
            "confirms": confirms,
            "blocks": size.blocks,
            "blocks_why": size.why,
            **self.spent.add(outcome.record, outcome.wall_s),
        }

    def _keep_trials(
        self, index: int, points: list[Point], labels: list[str], outcome: RoundOutcome
    ) -> None:
        """The round's trials into the tune's record, each with its round, run and point."""
        for trial in outcome.record.trials:
            self.trials.append(
                {
                    **thaw(trial),
                    "round": index,
                    "run_id": trial.get("run_id") or outcome.run_id,
                    "point": dict(points[labels.index(trial.treatment)])
                    if trial.treatment in labels
                    else None,
                }
            )

    def _halt_unfinished(
        self, index: int, summary: dict[str, Any], outcome: RoundOutcome
    ) -> NoReturn:
        """Record a round whose session did not complete and halt: on the budget when the wall
        clock or the session's budget ran out, else on the round."""
        record = outcome.record
        summary["status"] = "unfinished"
        why = (
            "budget.wall_clock_s ran out during it"
            if outcome.timed_out
            else f"its session ended {record.state}: {record.stop_reason or 'no reason'}"
        )
        summary["outcome"] = f"unfinished: {why}"
        self._notify()
        stopped_by_budget = (record.stop_reason or "").startswith("budget.")
        kind = "budget" if outcome.timed_out or stopped_by_budget else "round"
        raise Halt(
            kind,
            f"round {index} did not finish ({why}); its trials are kept in "
            f"runs/{outcome.run_id}, and resuming runs the round again.",
        )

    def _confirm(self, selection: Judged) -> None:
        """Re-measure the selection's chosen candidate against the incumbent in a fresh round
        and move only when that round calls it improved too (both must pass)."""
        chosen = selection.chosen
        assert chosen is not None
        incumbent = point_label(self.incumbent)
        try:
            again = self._round([dict(self.incumbent), dict(chosen.point)], confirms=chosen.round)
        except Halt as halt:
            chosen.decision = "unconfirmed"
            chosen.reason = f"improved, but its confirmation round did not judge it ({halt.kind})"
            selection.summary["outcome"] = f"kept {incumbent}: {chosen.label} was not confirmed"
            self._tag_trials(chosen.round, incumbent, {chosen.label: chosen})
            raise
        (second,) = again.candidates
        verdict = second.verdict or {}
        if again.chosen is not None:
            second.decision = "confirmed"
            second.reason = f"improved again in fresh blocks: confirms round {chosen.round}"
            self.incumbent = dict(chosen.point)
            self.path.append(
                {
                    "round": chosen.round,
                    "confirmed_in": second.round,
                    "label": chosen.label,
                    "point": dict(chosen.point),
                    "ratio": verdict["ratio"],
                    "ci": verdict["ci"],
                    "p_holm": verdict["p_holm"],
                    "selection_ratio": (chosen.verdict or {}).get("ratio"),
                    "previous": incumbent,
                }
            )
            selection.summary["outcome"] = (
                f"moved to {chosen.label} (confirmed in round {second.round})"
            )
            again.summary["outcome"] = f"confirmed {chosen.label}: moved to it"
        else:
            chosen.decision = "unconfirmed"
            chosen.reason = (
                f"improved on {incumbent} (ratio {_num(chosen.verdict)}), but not in its "
                f"confirmation round {second.round} (ratio {_num(verdict)}): {second.reason}"
            )
            second.reason = f"confirmation of round {chosen.round}: {second.reason}"
            selection.summary["outcome"] = (
                f"kept {incumbent}: {chosen.label} was not confirmed in round {second.round}"
            )
            again.summary["outcome"] = f"kept {incumbent}: {chosen.label} not confirmed"
        self._tag_trials(chosen.round, incumbent, {c.label: c for c in selection.candidates})
        self._tag_trials(second.round, incumbent, {second.label: second})
        self.echo(f"round {chosen.round}: {selection.summary['outcome']}")
        self._notify()

    def _halt_on_streak(self, judged: Judged) -> None:
        names = ", ".join(c.label for c in judged.streak)
        raise Halt(
            "streak",
            f"{len(judged.streak)} candidates in a row were not comparable "
            f"({names}; the limit is {self.settings.max_noncomparable_streak}); the "
            f"last: {judged.streak[-1].reason}. Fix what makes them non-comparable, "
            "then resume.",
        )

    def _notify(self) -> None:
        if self.on_round is not None:
            self.on_round()

    def _check_incumbent(self, label: str, trials: list[TrialRecord]) -> None:
        """Halt when the round's baseline cannot ground any comparison."""
        stage = objective_stage(self.config, self.space.objective)
        own = [t for t in trials if stage is None or t.stage == stage]
        broken = [t for t in own if t.status == "not_comparable"]
        if broken:
            raise Halt(
                "ungrounded",
                f"the incumbent {label} is not comparable: "
                f"{gist(broken[0].reason)}. Fix the stage or the declared "
                "params, then resume.",
            )
        passed = [t for t in own if t.status == "passed"]
        needed = self._specs[self.space.objective].min_replicates
        if len(passed) < needed:
            failed = next((t for t in own if t.status != "passed"), None)
            why = f" (first failure: {gist(failed.reason)})" if failed else ""
            raise Halt(
                "ungrounded",
                f"the incumbent {label} has {len(passed)} passed trial(s) of "
                f"{len(own)}, fewer than the {needed} a comparison needs{why}. Fix the "
                "stage, then resume.",
            )
        for check in constraint_checks(self.space, trials):
            if not check["ok"]:
                raise Halt(
                    "ungrounded",
                    f"the incumbent {label} breaks the constraint "
                    f"{check['constraint']} ({check['detail']}). Start from a point that "
                    "meets every constraint.",
                )

    def _update_streak(self, judged: list[Candidate]) -> list[Candidate]:
        """Count non-comparable candidates in a row (across rounds); the streak that first
        reached the limit in this round, or an empty list."""
        hit: list[Candidate] = []
        for candidate in judged:
            if candidate.decision == "not_comparable":
                self.streak.append(candidate)
            else:
                self.streak = []
            if not hit and len(self.streak) >= self.settings.max_noncomparable_streak:
                hit = list(self.streak)
        return hit

    def _tag_trials(self, index: int, incumbent: str, judged: dict[str, Candidate]) -> None:
        """Give each trial of round ``index`` the verdict of its point against the incumbent."""
        for trial in self.trials:
            if trial["round"] != index:
                continue
            trial["incumbent"] = incumbent
            candidate = judged.get(trial.get("treatment"))
            if trial.get("treatment") == incumbent:
                trial["verdict"] = "incumbent"
            elif candidate is not None:
                trial["verdict"] = candidate.verdict["verdict"] if candidate.verdict else None
                trial["decision"] = candidate.decision


def _num(verdict: dict[str, Any] | None) -> str:
    ratio = (verdict or {}).get("ratio")
    return "n/a" if ratio is None else f"{ratio:.4g}"
