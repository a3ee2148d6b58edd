"""The tuner's loop: rounds through a runner, moves that gate 2 supports, the loop guard.

A strategy (:mod:`.strategies`) proposes points; :meth:`Tuner.evaluate` runs them as one round
against the incumbent (:mod:`.rounds`) and moves when :mod:`.selection` finds a supported
improvement. The loop guard halts (state ``halted``, exit code 1) when the incumbent of a round
is ungrounded (too few of its trials passed, one was non-comparable, or it breaks a
constraint), after ``tune.max_noncomparable_streak`` non-comparable candidates in a row, and
when a budget (:mod:`.budget`) would be overrun. A halted or interrupted tune resumes from its
record: finished rounds are replayed from their run records, never re-run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pytest_benchmark_agent.config.models import BenchmarkConfig, TuneSettings
from pytest_benchmark_agent.engine.plan import point_label
from pytest_benchmark_agent.errors import BenchError
from pytest_benchmark_agent.tune import budget
from pytest_benchmark_agent.tune.rounds import RoundOutcome, RoundRequest, RoundRunner
from pytest_benchmark_agent.tune.selection import (
    Candidate,
    Compare,
    choose,
    classify,
    comparer,
    constraint_checks,
    gist,
    metric_specs,
    stage_of,
    trials_by_label,
)
from pytest_benchmark_agent.tune.space import Point, SearchSpace
from pytest_benchmark_agent.tune.strategies import STRATEGIES


class Halt(Exception):
    """The tuner stops and asks a human: ``kind`` is ungrounded, streak, budget or round."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        self.message = message
        super().__init__(message)


class ResumeMismatch(BenchError):
    """Resuming would replay a recorded round whose points this file no longer proposes."""


class Tuner:
    """Runs a strategy: rounds through ``runner``, selection, the loop guard and budgets.

    ``replay`` holds the rounds of a previous attempt of this tune (summary and run record,
    in order); while they last, a round whose points match is judged from its record instead
    of being run again.
    """

    def __init__(
        self,
        space: SearchSpace,
        config: BenchmarkConfig,
        settings: TuneSettings,
        runner: RoundRunner,
        *,
        tune_id: str,
        replay: Sequence[tuple[dict[str, Any], dict[str, Any]]] = (),
        on_round: Callable[[], None] | None = None,
        echo: Callable[[str], None] | None = None,
    ):
        self.space = space
        self.config = config
        self.settings = settings
        self.runner = runner
        self.tune_id = tune_id
        self.on_round = on_round
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
        """Run one round of ``points`` against the incumbent and move if a move is supported.

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
        round_points = [dict(self.incumbent), *labels.values()]
        index = len(self.rounds)
        if not self.replaying:
            self._check_budget(len(round_points))
            self.echo(f"round {index}: {len(labels)} candidate(s) against {incumbent_label}")
            request = RoundRequest(
                index,
                f"{self.tune_id}-r{index:02d}",
                round_points,
                budget.time_left(self.config, self.spent),
            )
            return self._judge(index, round_points, self.runner(request))
        summary, record = self._replay[index]
        expected = [point_label(p) for p in round_points]
        if summary["points"] != expected:
            raise ResumeMismatch(
                f"round {index} of tune {self.tune_id} evaluated "
                f"{summary['points']}, but resuming proposes {expected}: "
                "resume with the same file, strategy and --bench-set values, "
                "or start a new tune."
            )
        judged = self._judge(
            index,
            round_points,
            RoundOutcome(summary["run_id"], record, float(summary.get("wall_s") or 0.0)),
        )
        if not self.replaying:
            self.streak = []  # a human resumed the tune after this round
        return judged

    # -- budgets --------------------------------------------------------------------------------

    def trials_per_point(self) -> int:
        return budget.trials_per_point(self.config)

    def _check_budget(self, n_points: int) -> None:
        message = budget.overrun(self.config, self.spent, n_points * self.trials_per_point())
        if message is not None:
            raise Halt("budget", message)

    # -- judging a round ------------------------------------------------------------------------

    def _judge(self, index: int, points: list[Point], outcome: RoundOutcome) -> list[Candidate]:
        record, run_id = outcome.record, outcome.run_id
        labels = [point_label(p) for p in points]
        summary: dict[str, Any] = {
            "round": index,
            "run_id": run_id,
            "points": labels,
            "incumbent": labels[0],
            **self.spent.add(outcome.record, outcome.wall_s, self.config),
        }
        self.rounds.append(summary)
        by_label = trials_by_label(record, labels)
        for trial in record.get("trials") or []:
            self.trials.append(
                {
                    **trial,
                    "round": index,
                    "run_id": run_id,
                    "point": dict(points[labels.index(trial["treatment"])])
                    if trial.get("treatment") in labels
                    else None,
                }
            )
        state = record.get("state")
        if outcome.timed_out or state != "complete":
            summary["status"] = "unfinished"
            why = (
                "budget.wall_clock_s ran out during it"
                if outcome.timed_out
                else f"its session ended {state}: {record.get('stop_reason') or 'no reason'}"
            )
            summary["outcome"] = f"unfinished: {why}"
            self._notify()
            stopped_by_budget = str(record.get("stop_reason") or "").startswith("budget.")
            kind = "budget" if outcome.timed_out or stopped_by_budget else "round"
            raise Halt(
                kind,
                f"round {index} did not finish ({why}); its trials are kept in "
                f"runs/{run_id}, and resuming runs the round again.",
            )
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
        moved = self._move(index, labels[0], judged, compare)
        for candidate in judged:
            self._judged.add((labels[0], candidate.label))
        self.candidates.extend(judged)
        self._tag_trials(index, labels[0], {c.label: c for c in judged})
        summary["status"] = "halted" if streak_hit else "finished"
        summary["outcome"] = f"moved to {moved.label}" if moved else f"kept {labels[0]}"
        self.echo(f"round {index}: {summary['outcome']}")
        if streak_hit:
            summary["outcome"] += "; halted on a streak of non-comparable candidates"
            self._notify()
            names = ", ".join(c.label for c in streak_hit)
            raise Halt(
                "streak",
                f"{len(streak_hit)} candidates in a row were not comparable "
                f"({names}; the limit is {self.settings.max_noncomparable_streak}); the "
                f"last: {streak_hit[-1].reason}. Fix what makes them non-comparable, "
                "then resume.",
            )
        self._notify()
        return judged

    def _notify(self) -> None:
        if self.on_round is not None:
            self.on_round()

    def _check_incumbent(self, label: str, trials: list[dict[str, Any]]) -> None:
        """Halt when the round's baseline cannot ground any comparison."""
        objective_stage = stage_of(self.config, self.space.objective)
        own = [t for t in trials if objective_stage is None or t.get("stage") == objective_stage]
        broken = [t for t in own if t["status"] == "not_comparable"]
        if broken:
            raise Halt(
                "ungrounded",
                f"the incumbent {label} is not comparable: "
                f"{gist(broken[0].get('reason'))}. Fix the stage or the declared "
                "params, then resume.",
            )
        passed = [t for t in own if t["status"] == "passed"]
        needed = self._specs[self.space.objective].min_replicates
        if len(passed) < needed:
            failed = next((t for t in own if t["status"] != "passed"), None)
            why = f" (first failure: {gist(failed.get('reason'))})" if failed else ""
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

    def _move(
        self, index: int, incumbent: str, judged: list[Candidate], compare: Compare
    ) -> Candidate | None:
        """Move to the round's supported move (:func:`.selection.choose`), if it has one."""
        objective = self.space.objective
        chosen, ties = choose(
            self.space, index, self.incumbent, incumbent, judged, compare, self._specs[objective]
        )
        self.ties += ties
        if chosen is None:
            return None
        self.incumbent = dict(chosen.point)
        verdict = chosen.verdict
        self.path.append(
            {
                "round": index,
                "label": chosen.label,
                "point": dict(chosen.point),
                "ratio": verdict["ratio"],
                "ci": verdict["ci"],
                "p_holm": verdict["p_holm"],
                "previous": incumbent,
            }
        )
        return chosen

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
