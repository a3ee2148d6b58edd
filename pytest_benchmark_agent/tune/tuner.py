"""The tuner: rounds of trials, each one pytest session, and moves that gate 2 supports.

One round is one ``pytest --bench FILE --bench-round ROUND.json`` session: its points are the
treatments of the synthetic variable ``point``, the incumbent first, so every candidate is
compared with the incumbent inside the same interleaved blocks, with the same caching, guards
and records as any run. A candidate replaces the incumbent only when gate 2
(:func:`~.analysis.analyze_run`) calls it ``improved`` on the objective (significant after
Holm's correction over the round's candidates, its CI excluding 1, the effect above the
metric's noise threshold, no guard broken), no trial of it was non-comparable, and every
constraint holds on every one of its samples. Among several, the best wins unless another is
tied with it (no change between the two, the estimated difference inside the noise
threshold): then the simplest move (fewest params changed, then fewest lattice steps, then
earliest), and the record says which points were indistinguishable.

Strategies (:data:`STRATEGIES`): ``grid`` evaluates every lattice point in one round;
``refine`` a coarse grid, then the incumbent's neighbours on grids of half the spacing
(searched again while the incumbent moves), until the spacing reaches the lattice or no
neighbour is distinguishable from the incumbent (the noise allows no finer resolution);
``coordinate`` searches one param's line at a time, cycling until every line has been
searched at the current incumbent without a supported move.

The loop guard halts (state ``halted``, exit code 1) when the incumbent of a round is
ungrounded (too few of its trials passed, one was non-comparable, or it breaks a constraint),
after ``tune.max_noncomparable_streak`` non-comparable candidates in a row, and when a budget
(``trials``, ``wall_clock_s``, ``gpu_hours``, ``cost_usd``) would be overrun. A halted or
interrupted tune resumes from its record: finished rounds are replayed from their run records,
never re-run.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from itertools import product
from pathlib import Path
from typing import Any, Protocol

from pytest_benchmark_agent.config.models import BenchmarkConfig, TuneSettings
from pytest_benchmark_agent.config.placeholders import as_text
from pytest_benchmark_agent.config.recipe import load_benchmark
from pytest_benchmark_agent.engine.plan import POINT, point_label
from pytest_benchmark_agent.errors import BenchError, ConfigError
from pytest_benchmark_agent.guards.gpu import cost_usd, gpu_hours
from pytest_benchmark_agent.records.fsutil import atomic_write, utc_now
from pytest_benchmark_agent.records.run import new_run_id
from pytest_benchmark_agent.records.writer import (
    dump_yaml,
    load_results,
    load_yaml,
    regenerate_index,
)
from pytest_benchmark_agent.stats import analysis
from pytest_benchmark_agent.stats.describe import describe
from pytest_benchmark_agent.tune.space import Point, SearchSpace, load_space

#: Seconds a round session gets to record its trials after SIGTERM before it is killed.
STOP_GRACE_S = 30.0
EXIT_CODES = {"complete": 0, "halted": 1, "failed": 2, "interrupted": 2}


# -- rounds ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoundRequest:
    """One round to run: its index, run id and points (the incumbent first)."""

    index: int
    run_id: str
    points: list[Point]
    timeout_s: float | None = None


@dataclass
class RoundOutcome:
    """What a round left: its run id and record (``results.yaml`` as ``load_results`` reads
    it), how long it took, and whether the tune's wall-clock budget cut it short."""

    run_id: str
    record: dict[str, Any]
    wall_s: float
    timed_out: bool = False


class RoundRunner(Protocol):
    def __call__(self, request: RoundRequest) -> RoundOutcome: ...


class RoundError(BenchError):
    """A round session could not run the file at all (a collection or usage error)."""


class ResumeMismatch(BenchError):
    """Resuming would replay a recorded round whose points this file no longer proposes."""


class SubprocessRounds:
    """Runs each round as its own ``python -m pytest --bench`` session and reads its record."""

    def __init__(self, path: Path, home: Path, log_dir: Path, extra_args: Sequence[str] = ()):
        self.path = path.resolve()
        self.home = home
        self.log_dir = log_dir
        self.extra_args = list(extra_args)

    def command(self, run_id: str, round_file: Path) -> list[str]:
        return [
            sys.executable,
            "-m",
            "pytest",
            "--bench",
            str(self.path),
            "--bench-round",
            str(round_file),
            "--bench-home",
            str(self.home),
            "--bench-run-id",
            run_id,
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-q",
            *self.extra_args,
        ]

    def _fresh(self, run_id: str) -> str:
        """``run_id``, or ``run_id-2``... when an earlier attempt of the round left its folder."""
        candidate, attempt = run_id, 1
        while (self.home / "runs" / candidate).exists():
            attempt += 1
            candidate = f"{run_id}-{attempt}"
        return candidate

    def __call__(self, request: RoundRequest) -> RoundOutcome:
        run_id = self._fresh(request.run_id)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        round_file = self.log_dir / f"{run_id}.json"
        atomic_write(round_file, json.dumps({"points": request.points}, indent=1))
        log_path = self.log_dir / f"{run_id}.log"
        t0 = time.monotonic()
        timed_out = False
        with log_path.open("w") as log:
            proc = subprocess.Popen(
                self.command(run_id, round_file),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            try:
                proc.wait(timeout=request.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _stop(proc)
            except BaseException:
                _stop(proc)
                raise
        wall_s = time.monotonic() - t0
        run_dir = self.home / "runs" / run_id
        if not (run_dir / "results.yaml").is_file():
            tail = "\n".join(log_path.read_text(errors="replace").rstrip().splitlines()[-25:])
            raise RoundError(
                f"round {request.index} ({run_id}) did not run: pytest exited "
                f"{proc.returncode} without a run record. Its output "
                f"({log_path}) ends:\n{tail}"
            )
        return RoundOutcome(run_id, load_results(run_dir), wall_s, timed_out)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the session records what it ran), then SIGKILL after the grace period."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# -- evaluation -----------------------------------------------------------------------------


class Halt(Exception):
    """The tuner stops and asks a human: ``kind`` is ungrounded, streak, budget or round."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        self.message = message
        super().__init__(message)


@dataclass
class Spent:
    """What the tune has used so far (replayed rounds included)."""

    trials: int = 0
    wall_s: float = 0.0
    gpu_hours: float = 0.0
    cost_usd: float = 0.0


@dataclass
class Candidate:
    """One point judged against the incumbent of its round."""

    round: int
    label: str
    point: Point
    incumbent: str
    decision: str  # selected | tied | no_change | worse | constraint_failed | not_comparable
    reason: str
    verdict: dict[str, Any] | None = None
    median: float | None = None
    observed_better: bool = False
    constraints: list[dict[str, Any]] = field(default_factory=list)

    def as_record(self) -> dict[str, Any]:
        return asdict(self)


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
        self.spent = Spent()
        self.streak: list[Candidate] = []  # the current run of non-comparable candidates
        self.halt: Halt | None = None
        self.converged: str | None = None
        self._replay = list(replay)
        self._judged: set[tuple[str, str]] = set()
        self._specs = _metric_specs(config, space)

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
                index, f"{self.tune_id}-r{index:02d}", round_points, self._time_left()
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
        measures = sum(1 for stage in self.config.stages if stage.kind == "measure")
        return self.config.max_replicates * len(self.config.seeds or [None]) * max(measures, 1)

    def _time_left(self) -> float | None:
        limit = self.config.budget.wall_clock_s
        return None if limit is None else max(limit - self.spent.wall_s, 0.0)

    def _check_budget(self, n_points: int) -> None:
        budget, spent = self.config.budget, self.spent
        needed = n_points * self.trials_per_point()
        if budget.trials is not None and spent.trials + needed > budget.trials:
            raise Halt(
                "budget",
                f"budget.trials: the next round needs {needed} trials and "
                f"{budget.trials - spent.trials} of {budget.trials} remain. Raise "
                "budget.trials and resume, or accept the incumbent.",
            )
        if budget.wall_clock_s is not None and spent.wall_s >= budget.wall_clock_s:
            raise Halt(
                "budget",
                f"budget.wall_clock_s spent ({spent.wall_s:.0f}s of "
                f"{budget.wall_clock_s:g}s). Raise it and resume.",
            )
        per_trial = spent.gpu_hours / spent.trials if spent.trials else 0.0
        uses_gpus = _gpus_used(self.config)
        for name, used, limit, unit in (
            ("gpu_hours", spent.gpu_hours, budget.gpu_hours, "GPU-hours"),
            ("cost_usd", spent.cost_usd, budget.cost_usd, "USD"),
        ):
            if limit is None:
                continue
            scale = 1.0 if name == "gpu_hours" else self.config.resources.price_per_gpu_hour
            estimate = per_trial * needed * scale
            if uses_gpus and limit == 0:
                raise Halt(
                    "budget",
                    f"budget.{name} is 0 but the stages use GPUs. Raise it to run GPU trials.",
                )
            if used + estimate > limit:
                raise Halt(
                    "budget",
                    f"budget.{name}: {used:.4g} {unit} spent and the next "
                    f"round is estimated at {estimate:.4g} more (of {limit:g}). Raise "
                    f"budget.{name} and resume.",
                )

    def _account(self, outcome: RoundOutcome) -> dict[str, Any]:
        ran = [t for t in outcome.record.get("trials") or [] if t.get("status") != "not_run"]
        hours = _round_gpu_hours(outcome.record, self.config)
        dollars = cost_usd(hours, self.config.resources.price_per_gpu_hour)
        self.spent.trials += len(ran)
        self.spent.wall_s += outcome.wall_s
        self.spent.gpu_hours += hours
        self.spent.cost_usd += dollars
        return {
            "trials": len(ran),
            "wall_s": round(outcome.wall_s, 3),
            "gpu_hours": round(hours, 6),
            "cost_usd": round(dollars, 4),
        }

    # -- judging a round ------------------------------------------------------------------------

    def _judge(self, index: int, points: list[Point], outcome: RoundOutcome) -> list[Candidate]:
        record, run_id = outcome.record, outcome.run_id
        labels = [point_label(p) for p in points]
        summary: dict[str, Any] = {
            "round": index,
            "run_id": run_id,
            "points": labels,
            "incumbent": labels[0],
            **self._account(outcome),
        }
        self.rounds.append(summary)
        by_label = _trials_by_label(record, labels)
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
        verdicts = self._analyze(record, labels)
        judged = [
            self._classify(index, label, point, labels[0], by_label[label], verdicts)
            for label, point in zip(labels[1:], points[1:], strict=True)
        ]
        streak_hit = self._update_streak(judged)
        moved = self._select(index, labels[0], judged, record, labels)
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
        objective_stage = _stage_of(self.config, self.space.objective)
        own = [t for t in trials if objective_stage is None or t.get("stage") == objective_stage]
        broken = [t for t in own if t["status"] == "not_comparable"]
        if broken:
            raise Halt(
                "ungrounded",
                f"the incumbent {label} is not comparable: "
                f"{_gist(broken[0].get('reason'))}. Fix the stage or the declared "
                "params, then resume.",
            )
        passed = [t for t in own if t["status"] == "passed"]
        needed = self._specs[self.space.objective].min_replicates
        if len(passed) < needed:
            failed = next((t for t in own if t["status"] != "passed"), None)
            why = f" (first failure: {_gist(failed.get('reason'))})" if failed else ""
            raise Halt(
                "ungrounded",
                f"the incumbent {label} has {len(passed)} passed trial(s) of "
                f"{len(own)}, fewer than the {needed} a comparison needs{why}. Fix the "
                "stage, then resume.",
            )
        for check in _constraint_checks(self.space, trials):
            if not check["ok"]:
                raise Halt(
                    "ungrounded",
                    f"the incumbent {label} breaks the constraint "
                    f"{check['constraint']} ({check['detail']}). Start from a point that "
                    "meets every constraint.",
                )

    def _analyze(self, record: dict[str, Any], labels: list[str]) -> dict[str, Any]:
        observations = _observations(record, self._specs, self.config)
        result = analysis.analyze_run(observations, self._specs, labels, labels[0])
        return result.verdicts[self.space.objective]

    def _classify(
        self,
        index: int,
        label: str,
        point: Point,
        incumbent: str,
        trials: list[dict[str, Any]],
        verdicts: dict[str, Any],
    ) -> Candidate:
        verdict = verdicts[label]
        record = verdict.as_record()
        values = [
            t["metrics"][self.space.objective]
            for t in trials
            if t["status"] == "passed" and self.space.objective in t.get("metrics", {})
        ]
        median = describe(values).get("median")
        better = verdict.ratio is not None and (
            verdict.ratio < 1 if self.space.direction == "lower" else verdict.ratio > 1
        )
        candidate = Candidate(
            index,
            label,
            dict(point),
            incumbent,
            "",
            "",
            record,
            median,
            better,
            _constraint_checks(self.space, trials),
        )
        broken = [t for t in trials if t["status"] == "not_comparable"]
        failed = [t for t in trials if t["status"] not in ("passed", "not_comparable")]
        if broken:
            candidate.decision = "not_comparable"
            candidate.reason = _gist(broken[0].get("reason"))
        elif verdict.verdict == "not_comparable":
            candidate.decision = "not_comparable"
            candidate.reason = verdict.reason or "gate 2 refused the comparison"
            if failed:
                candidate.reason = (
                    f"{len(failed)} of {len(trials)} trials did not pass "
                    f"({_gist(failed[0].get('reason'))}); "
                    f"{candidate.reason}"
                )
        elif any(not c["ok"] for c in candidate.constraints):
            candidate.decision = "constraint_failed"
            candidate.reason = "; ".join(
                f"{c['constraint']}: {c['detail']}" for c in candidate.constraints if not c["ok"]
            )
        elif verdict.verdict == "improved":
            candidate.decision = "eligible"
            candidate.reason = "supported improvement"
        elif verdict.verdict == "regressed":
            candidate.decision = "worse"
            candidate.reason = "significantly worse than the incumbent"
        else:
            candidate.decision = "no_change"
            candidate.reason = (
                f"indistinguishable from {incumbent}: {verdict.reason or 'no supported difference'}"
            )
        return candidate

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

    def _select(
        self,
        index: int,
        incumbent: str,
        judged: list[Candidate],
        record: dict[str, Any],
        labels: list[str],
    ) -> Candidate | None:
        """Move to the best supported improvement, or to a simpler one tied with it.

        Tied means gate 2 finds no change between the two and the estimated difference is
        inside the noise threshold; an underpowered comparison alone is not a tie.
        """
        eligible = [c for c in judged if c.decision == "eligible"]
        if not eligible:
            return None
        sign = 1 if self.space.direction == "lower" else -1
        best = min(eligible, key=lambda c: sign * c.verdict["ratio"])
        tied = [best]
        others = [c for c in eligible if c is not best]
        if others:
            metric = self.space.objective
            spec = {metric: self._specs[metric]}
            names = [best.label, *(c.label for c in others)]
            observations = {
                metric: [
                    o
                    for o in _observations(record, spec, self.config)[metric]
                    if o.treatment in names
                ]
            }
            versus = analysis.analyze_run(observations, spec, names, best.label).verdicts[metric]
            threshold = spec[metric].noise_threshold
            tied += [
                c
                for c in others
                if versus[c.label].verdict == "no_change"
                and abs(versus[c.label].ratio - 1) <= threshold
            ]
        order = {c.label: i for i, c in enumerate(judged)}
        chosen = min(
            tied, key=lambda c: (self.space.distance(self.incumbent, c.point), order[c.label])
        )
        for candidate in eligible:
            if candidate is chosen:
                candidate.decision, candidate.reason = "selected", "supported improvement"
            elif candidate in tied:
                candidate.decision = "tied"
                candidate.reason = (
                    f"improved on {incumbent} but indistinguishable from "
                    f"{chosen.label}; kept the simpler {chosen.label}"
                )
                self.ties.append(
                    f"round {index}: {candidate.label} and {chosen.label} both "
                    f"improved on {incumbent} and were indistinguishable from each "
                    f"other; selected the simpler {chosen.label}."
                )
            else:
                candidate.decision = "worse"
                candidate.reason = f"improved on {incumbent}, but less than {best.label}"
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


def _metric_specs(config: BenchmarkConfig, space: SearchSpace) -> dict[str, Any]:
    """The objective as the primary metric, plus every declared guard (gate 2 applies them)."""
    base = config.metrics.get(space.objective)
    defaults = analysis.MetricSpec()
    specs: dict[str, Any] = {
        space.objective: analysis.MetricSpec(
            direction=space.direction,
            primary=True,
            guard=False,
            floor=base.floor if base else None,
            ceiling=base.ceiling if base else None,
            noise_threshold=base.noise_threshold if base else defaults.noise_threshold,
            min_replicates=base.min_replicates if base else defaults.min_replicates,
        )
    }
    for name, spec in config.metrics.items():
        if name != space.objective and (
            spec.guard or spec.floor is not None or spec.ceiling is not None
        ):
            specs[name] = spec
    return specs


def _stage_of(config: BenchmarkConfig, metric: str) -> str | None:
    """The measure stage reporting ``metric`` (None: every measure stage, e.g. built-ins)."""
    for stage in config.stages:
        if stage.kind == "measure" and stage.metrics_from and metric in stage.metrics_from.fields:
            return stage.name
    measures = [s.name for s in config.stages if s.kind == "measure"]
    return measures[0] if len(measures) == 1 else None


def _observations(
    record: dict[str, Any], specs: dict[str, Any], config: BenchmarkConfig
) -> dict[str, list[analysis.Observation]]:
    out: dict[str, list[analysis.Observation]] = {}
    for metric in specs:
        stage = _stage_of(config, metric)
        out[metric] = [
            analysis.Observation(
                t["treatment"], t["replicate"], t.get("seed"), float(t["metrics"][metric])
            )
            for t in record.get("trials") or []
            if t["status"] == "passed"
            and metric in t.get("metrics", {})
            and (stage is None or t.get("stage") == stage)
        ]
    return out


def _trials_by_label(record: dict[str, Any], labels: list[str]) -> dict[str, list[dict]]:
    table: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    for trial in record.get("trials") or []:
        if trial.get("treatment") in table and trial.get("status") != "not_run":
            table[trial["treatment"]].append(trial)
    return table


def _constraint_checks(space: SearchSpace, trials: list[dict[str, Any]]) -> list[dict]:
    """Each constraint against every passed sample: ok only when all of them meet it."""
    checks = []
    for constraint in space.constraints:
        values = [
            float(t["metrics"][constraint.metric])
            for t in trials
            if t["status"] == "passed" and constraint.metric in t.get("metrics", {})
        ]
        if not values:
            checks.append(
                {
                    "constraint": constraint.text,
                    "ok": False,
                    "worst": None,
                    "detail": "no passed sample reports it",
                }
            )
            continue
        worst = constraint.worst(values)
        bad = sum(1 for v in values if not constraint.holds(v))
        detail = (
            f"all {len(values)} samples meet it (worst {worst:g})"
            if not bad
            else f"{bad} of {len(values)} samples break it (worst {worst:g})"
        )
        checks.append(
            {"constraint": constraint.text, "ok": not bad, "worst": worst, "detail": detail}
        )
    return checks


def _gpus_used(config: BenchmarkConfig) -> bool:
    return bool(config.resources.gpus or any(stage.gpus for stage in config.stages))


def _round_gpu_hours(record: dict[str, Any], config: BenchmarkConfig) -> float:
    """GPU-hours of a round: each trial's and built prep's wall time times its stage's GPUs."""
    gpus = {
        stage.name: stage.gpus if stage.gpus is not None else config.resources.gpus
        for stage in config.stages
    }
    total = 0.0
    events = [t for t in record.get("trials") or [] if t.get("status") != "not_run"]
    events += [p for p in record.get("preps") or [] if p.get("action") == "built"]
    for event in events:
        wall = event.get("wall_s")
        if wall is None:
            wall = (event.get("metrics") or {}).get("wall_s", 0.0)
        total += gpu_hours(float(wall or 0.0), int(gpus.get(event.get("stage"), 0) or 0))
    return total


def _gist(text: Any) -> str:
    """One line of a trial's reason: its first line, what differed, and the last stderr line."""
    lines = [line.strip() for line in str(text or "").strip().splitlines() if line.strip()]
    if not lines:
        return "no reason recorded"
    parts = [lines[0]]
    parts += [line for line in lines[1:] if line.startswith("effective params differ")]
    if any(line.startswith("stderr (last lines)") for line in lines) and not lines[-1].startswith(
        "stderr (last lines)"
    ):
        parts.append(f"stderr: {lines[-1]}")
    return "; ".join(parts)


# -- strategies -----------------------------------------------------------------------------


def grid(tuner: Tuner) -> str:
    """Every lattice point, in one round against the start."""
    tuner.evaluate(tuner.space.grid())
    return "every point of the grid was compared with the start"


def refine(tuner: Tuner) -> str:
    """A coarse grid, then grids of half the spacing around the incumbent.

    At each spacing the neighbourhood (each ordered param one spacing down or up) is
    searched again as long as the incumbent moves, so the search can walk past the coarse
    grid's cells; the spacing halves when it does not. It stops at the lattice, or when no
    neighbour is distinguishable from the incumbent: then the objective changes less over
    one spacing than these replicates can resolve, and a finer spacing would change it less.
    """
    space = tuner.space
    coarse = product(
        *(d.coarse_indices() if d.ordered else range(len(d.values)) for d in space.dimensions)
    )
    tuner.evaluate(space.point_at(ix) for ix in coarse)
    spacing = [d.coarse_spacing() if d.ordered else 0 for d in space.dimensions]
    while True:
        spacing = [s // 2 for s in spacing]
        if not any(spacing):
            return "the spacing reached the lattice of the search space"
        moved = True
        while moved:
            before = point_label(tuner.incumbent)
            judged = tuner.evaluate(_neighbourhood(space, tuner.incumbent, spacing))
            moved = point_label(tuner.incumbent) != before
            if (
                judged
                and all(c.decision in ("no_change", "not_comparable") for c in judged)
                and any(c.decision == "no_change" for c in judged)
            ):
                return (
                    f"no neighbour at spacing {max(spacing)} was distinguishable from the "
                    "incumbent: the noise allows no finer resolution"
                )


def _neighbourhood(space: SearchSpace, point: Point, spacing: list[int]) -> list[Point]:
    """The points of the finer grid next to ``point``: one ``spacing`` down and up along each
    ordered param, the others held (2 per param, so the rounds stay small as params grow)."""
    centre = space.indices(point)
    out = []
    for axis, (index, step) in enumerate(zip(centre, spacing, strict=True)):
        for moved in (index - step, index + step) if step else ():
            if 0 <= moved < len(space.dimensions[axis].values):
                out.append(space.point_at((*centre[:axis], moved, *centre[axis + 1 :])))
    return out


def coordinate(tuner: Tuner) -> str:
    """One param's line at a time, cycling until no line offers a supported move."""
    searched: dict[str, str] = {}
    while True:
        searched_any = False
        for dim in tuner.space.dimensions:
            others = point_label({k: v for k, v in tuner.incumbent.items() if k != dim.name})
            if searched.get(dim.name) == others:
                continue
            tuner.evaluate({**tuner.incumbent, dim.name: value} for value in dim.values)
            searched[dim.name] = point_label(
                {k: v for k, v in tuner.incumbent.items() if k != dim.name}
            )
            searched_any = True
        if not searched_any:
            return "every param's line was searched at the final incumbent without a move"


STRATEGIES: dict[str, Callable[[Tuner], str]] = {
    "grid": grid,
    "refine": refine,
    "coordinate": coordinate,
}


# -- the tune record ------------------------------------------------------------------------


def definition(config: BenchmarkConfig, space: SearchSpace) -> dict[str, Any]:
    """What a resumed tune must share with its record for replayed rounds to stay valid."""
    return {
        **space.definition(),
        "params": {k: as_text(v) for k, v in config.params.items()},
        "replicates": config.model_dump(mode="json")["replicates"],
        "seeds": config.seeds,
    }


class TuneRecorder:
    """Writes ``runs/<tune_id>/``: results.yaml after every round, then report.md and a plot."""

    def __init__(
        self,
        home: Path,
        tuner: Tuner,
        config: BenchmarkConfig,
        path: Path,
        strategy: str,
        started: str | None = None,
    ):
        self.home = home
        self.tuner = tuner
        self.config = config
        self.path = path
        self.strategy = strategy
        self.started = started or utc_now()
        self.dir = home / "runs" / tuner.tune_id
        self.state = "running"
        self.failure: str | None = None

    def snapshot(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.dir / "results.yaml", dump_yaml(self.document()))

    def document(self) -> dict[str, Any]:
        t, space = self.tuner, self.tuner.space
        halt = {"kind": t.halt.kind, "message": t.halt.message} if t.halt else None
        labels = list(dict.fromkeys(c for r in t.rounds for c in r["points"]))
        latest = {c.label: c.verdict for c in t.candidates if c.verdict is not None}
        counts: dict[str, int] = defaultdict(int)
        for trial in t.trials:
            counts[trial["status"]] += 1
        return _plain(
            {
                "run_id": t.tune_id,
                "name": self.config.name,
                "state": self.state,
                "tag": "EXPLORATORY",
                "treatment_variable": POINT,
                "control": point_label(space.start),
                "trials": t.trials,
                "summary": _summary(t.trials),
                "selected": dict(t.incumbent) if any(r.get("grounded") for r in t.rounds) else None,
                "verdicts": {space.objective: latest},
                "kind": "tune",
                "strategy": self.strategy,
                "hypothesis": self.config.hypothesis,
                "objective": {"metric": space.objective, "direction": space.direction},
                "constraints": [c.text for c in space.constraints],
                "search_space": {d.name: list(d.values) for d in space.dimensions},
                "start": dict(space.start),
                "treatments": labels,
                "started": self.started,
                "ended": None if self.state == "running" else utc_now(),
                "stop_reason": halt["message"] if halt else self.failure or t.converged,
                "halt": halt,
                "failure": self.failure,
                "rounds": t.rounds,
                "candidates": [c.as_record() for c in t.candidates],
                "incumbents": t.path,
                "ties": t.ties,
                "chained_ratio": chained_ratio(t.path),
                "spent": asdict(t.spent),
                "budget": self.config.budget.model_dump(mode="json", exclude_none=True),
                "settings": t.settings.model_dump(),
                "counts": dict(counts),
                "params": dict(self.config.params),
                "definition": definition(self.config, space),
                "config_file": str(self.path.resolve()),
            }
        )

    def finish(self, state: str) -> dict[str, Any]:
        """Final record, report, plot and the results index entry; returns the record."""
        self.state = state
        document = self.document()
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.dir / "results.yaml", dump_yaml(document))
        atomic_write(
            self.dir / "config.yaml",
            dump_yaml(
                {
                    "run_id": self.tuner.tune_id,
                    "source": str(self.path.resolve()),
                    "strategy": self.strategy,
                    "config": self.config.model_dump(mode="json", exclude_none=True),
                }
            ),
        )
        note = plot_objective(document, self.dir / "objective.png")
        atomic_write(self.dir / "report.md", render_report(document, note))
        ratio = document["chained_ratio"]
        atomic_write(
            self.dir / "index.json",
            json.dumps(
                {
                    "run_id": self.tuner.tune_id,
                    "name": self.config.name,
                    "state": state,
                    "tag": "EXPLORATORY",
                    "started": self.started,
                    "ended": document["ended"],
                    "counts": document["counts"],
                    "treatment_variable": POINT,
                    "control": document["control"],
                    "primary": {
                        self.tuner.space.objective: {f"selected {_selected_text(document)}": ratio}
                    },
                },
                indent=1,
            ),
        )
        regenerate_index(self.home)
        return document


def _plain(document: dict[str, Any]) -> dict[str, Any]:
    """A copy sharing no objects (so YAML writes no anchors) and holding only plain types."""
    return json.loads(json.dumps(document, default=str))


def chained_ratio(path: list[dict[str, Any]]) -> float | None:
    """The objective at the selected point over the start's: the product of the moves' ratios.

    Each ratio was measured within the blocks of its own round, so the chain compares like
    with like at every step. None when the tune never moved.
    """
    ratios = [step["ratio"] for step in path[1:] if step.get("ratio") is not None]
    return float(f"{math.prod(ratios):.6g}") if ratios else None


def _summary(trials: list[dict[str, Any]]) -> dict[str, Any]:
    table: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for trial in trials:
        if trial["status"] == "passed":
            for metric, value in (trial.get("metrics") or {}).items():
                table[metric][trial["treatment"]].append(value)
    return {
        metric: {label: describe(values) for label, values in per.items()}
        for metric, per in table.items()
    }


# -- the report -----------------------------------------------------------------------------


def render_report(doc: dict[str, Any], plot_note: str | None) -> str:
    """``report.md`` of a tune, from its record alone."""
    objective = doc["objective"]["metric"]
    direction = doc["objective"]["direction"]
    lines = [
        f"# {doc['name']}: tune {doc['run_id']}",
        "",
        f"- **Hypothesis:** {doc.get('hypothesis') or '(none stated)'}",
        f"- **Strategy:** {doc['strategy']}; objective `{objective}` ({direction} is "
        "better); constraints: " + (", ".join(f"`{c}`" for c in doc["constraints"]) or "none"),
        f"- **State:** {doc['state']}"
        + (f": {doc['stop_reason']}" if doc.get("stop_reason") else ""),
        f"- **Selected:** {_selected_text(doc, '`')} (start `{doc['control']}`)",
        f"- **Objective at the selected point:** {_chain_text(doc)}",
        f"- **Spent:** {_spent_text(doc)}",
        "- **Record:** [results.yaml](results.yaml); each round's own run is linked below",
        "",
        "## Path of incumbents",
        "",
        f"| step | round | point | ratio to previous ({objective}) | 95% CI | p (Holm) |",
        "|---|---|---|---|---|---|",
    ]
    for step, entry in enumerate(doc["incumbents"]):
        if entry["round"] is None:
            lines.append(f"| 0 | - | `{entry['label']}` (start) | | | |")
            continue
        lines.append(
            f"| {step} | {entry['round']} | `{entry['label']}` | "
            f"{_num(entry['ratio'])} | {_ci(entry.get('ci'))} | "
            f"{_num(entry.get('p_holm'))} |"
        )
    lines += [
        "",
        "## Rounds",
        "",
        "| round | run | incumbent | points | trials | outcome |",
        "|---|---|---|---|---|---|",
    ]
    for r in doc["rounds"]:
        lines.append(
            f"| {r['round']} | [{r['run_id']}](../{r['run_id']}/report.md) | "
            f"`{r['incumbent']}` | {len(r['points'])} | {r['trials']} | "
            f"{r.get('outcome', '')} |"
        )
    if not doc["rounds"]:
        lines.append("| (none ran) | | | | | |")
    lines += [
        "",
        "## Candidates",
        "",
        f"Each point against the incumbent of its round (median `{objective}`, the ratio "
        "and CI of gate 2's paired comparison).",
        "",
        "| round | point | incumbent | median | ratio | 95% CI | verdict | decision | why |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in doc["candidates"]:
        v = c.get("verdict") or {}
        lines.append(
            f"| {c['round']} | `{c['label']}` | `{c['incumbent']}` | "
            f"{_num(c.get('median'))} | {_num(v.get('ratio'))} | {_ci(v.get('ci'))} | "
            f"{v.get('verdict', '')} | {c['decision']} | {_cell(c['reason'])} |"
        )
    lines += ["", "## Ties within noise", ""]
    ties = list(doc["ties"]) + [
        f"round {c['round']}: `{c['label']}` was indistinguishable from the incumbent "
        f"`{c['incumbent']}`; the incumbent (the earlier point) was kept."
        for c in doc["candidates"]
        if c["decision"] == "no_change"
    ]
    lines += [f"- {t}" for t in ties] or ["- none: every comparison was decided."]
    lines += ["", "## Objective over the search space", ""]
    lines.append(plot_note or "![objective over the search space](objective.png)")
    lines += ["", "## What Went Wrong", ""]
    lines += [f"- {item}" for item in what_went_wrong(doc)]
    lines += ["", "## Controls", "", "| param | value | role |", "|---|---|---|"]
    for name, value in doc["params"].items():
        role = "TUNED" if name in doc["search_space"] else "CONTROL"
        lines.append(f"| `{name}` | `{as_text(value)}` | {role} |")
    return "\n".join(lines) + "\n"


def what_went_wrong(doc: dict[str, Any]) -> list[str]:
    """Halts, failures, refusals and constraint failures; never empty."""
    items = []
    if doc.get("halt"):
        items.append(f"**Halted ({doc['halt']['kind']}):** {doc['halt']['message']}")
    if doc.get("failure"):
        items.append(f"**Failed:** {_gist(doc['failure'])}")
    if doc["state"] == "interrupted":
        items.append(
            "**Interrupted:** the tune was stopped; resume it with "
            f"`benchmark-agent tune {doc['config_file']} --resume {doc['run_id']}`."
        )
    for c in doc["candidates"]:
        if c["decision"] == "not_comparable":
            items.append(
                f"**Refused (not comparable):** round {c['round']} `{c['label']}`: {c['reason']}"
            )
        elif c["decision"] == "constraint_failed":
            items.append(f"**Constraint failed:** round {c['round']} `{c['label']}`: {c['reason']}")
        elif c["decision"] == "no_change" and c.get("observed_better"):
            ratio = (c.get("verdict") or {}).get("ratio")
            items.append(
                f"**Refused (gain not supported):** round {c['round']} `{c['label']}` "
                f"looked better (ratio {_num(ratio)}) but {c['reason']}"
            )
    if not items:
        items.append(
            "Nothing halted, was refused or broke a constraint. Not tested: values "
            "between the lattice points, params outside the search space, and other "
            "machines or loads than this one."
        )
    return items


def _selected_text(doc: dict[str, Any], code: str = "") -> str:
    if doc.get("selected") is None:
        return "nothing (no round finished, so no point is grounded)"
    return f"{code}{point_label(doc['selected'])}{code}"


def _chain_text(doc: dict[str, Any]) -> str:
    ratio = doc.get("chained_ratio")
    if ratio is None:
        return "the start was kept (no supported move)."
    moves = len(doc["incumbents"]) - 1
    better = 1 / ratio if doc["objective"]["direction"] == "lower" else ratio
    return (
        f"{ratio:.4g}x the start's, i.e. {better:.3g}x better (chained over {moves} "
        f"supported move(s), each measured within its round's blocks)."
    )


def _spent_text(doc: dict[str, Any]) -> str:
    spent, budget = doc["spent"], doc.get("budget") or {}
    parts = [
        f"{spent['trials']} trials" + (f" of {budget['trials']}" if "trials" in budget else ""),
        f"{spent['wall_s']:.1f}s"
        + (f" of {budget['wall_clock_s']:g}s" if "wall_clock_s" in budget else ""),
    ]
    if spent["gpu_hours"] or "gpu_hours" in budget:
        parts.append(f"{spent['gpu_hours']:.4g} GPU-hours")
    if spent["cost_usd"] or "cost_usd" in budget:
        parts.append(f"${spent['cost_usd']:.2f}")
    return f"{', '.join(parts)} in {len(doc['rounds'])} round(s)"


def _num(value: Any) -> str:
    return "" if value is None else f"{value:.4g}"


def _ci(ci: Any) -> str:
    return "" if not ci else f"[{ci[0]:.4g}, {ci[1]:.4g}]"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# -- the plot -------------------------------------------------------------------------------


def plot_objective(doc: dict[str, Any], png: Path) -> str | None:
    """Objective (median per point) over the space, with the points breaking a constraint.

    One tuned param: the objective against it, the regions around infeasible points shaded,
    and one panel per constraint with its bound. Two or more: the first two params as axes,
    colour for the objective. Returns a note instead when matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return (
            "No plot: matplotlib is not installed (`pip install matplotlib`, or the "
            "`plots` extra of pytest-benchmark-agent)."
        )
    objective = doc["objective"]["metric"]
    points = _plot_points(doc)
    if not points:
        return "No plot: no point has a passed trial."
    names = list(doc["search_space"])
    axes_values = {n: list(doc["search_space"][n]) for n in names}
    coord = {n: _axis(axes_values[n]) for n in names}
    feasible = [p["feasible"] for p in points]
    path = [coord[names[0]](step["point"][names[0]]) for step in doc["incumbents"]]
    if len(names) == 1:
        name = names[0]
        constraints = doc["constraints"]
        fig, axes = plt.subplots(
            1 + len(constraints),
            1,
            sharex=True,
            squeeze=False,
            figsize=(7, 3.2 + 2.2 * len(constraints)),
        )
        ax = axes[0][0]
        xs = [coord[name](p["point"][name]) for p in points]
        ys = [p["objective"] for p in points]
        order = sorted(range(len(xs)), key=xs.__getitem__)
        ax.plot([xs[i] for i in order], [ys[i] for i in order], color="0.6", lw=1, zorder=1)
        for x, y, ok in zip(xs, ys, feasible, strict=True):
            ax.scatter(
                [x], [y], marker="o" if ok else "x", color="tab:blue" if ok else "tab:red", zorder=3
            )
        half = _half_gap(sorted(set(xs)))
        for x, ok in zip(xs, feasible, strict=True):
            if not ok:
                for row in axes:
                    row[0].axvspan(x - half, x + half, color="tab:red", alpha=0.08, lw=0)
        path_y = [_objective_of(points, name, coord, x) for x in path]
        ax.plot(
            path, path_y, color="tab:green", lw=2, marker=">", zorder=2, label="path of incumbents"
        )
        ax.scatter(
            [path[-1]],
            [path_y[-1]],
            marker="*",
            s=250,
            color="tab:green",
            zorder=4,
            label="selected",
        )
        ax.set_ylabel(f"{objective} (median)")
        ax.legend(loc="best", fontsize=8)
        ax.set_title("objective over the search space (red: breaks a constraint)", fontsize=10)
        for row, text in zip(axes[1:], constraints, strict=True):
            metric, op, bound = text.split()
            cax = row[0]
            cys = [p["constraint_worst"].get(text) for p in points]
            cax.scatter(
                [x for x, y in zip(xs, cys, strict=True) if y is not None],
                [y for y in cys if y is not None],
                color="tab:purple",
            )
            cax.axhline(float(bound), color="tab:red", ls="--", lw=1)
            low, high = cax.get_ylim()
            low, high = min(low, float(bound)), max(high, float(bound))
            if op in (">=", ">"):
                cax.axhspan(low, float(bound), color="tab:red", alpha=0.1)
            else:
                cax.axhspan(float(bound), high, color="tab:red", alpha=0.1)
            cax.set_ylim(low, high)
            cax.set_ylabel(f"{metric} (worst sample)")
        axes[-1][0].set_xlabel(name)
        _ticks(axes[-1][0], axes_values[name])
    else:
        x_name, y_name = names[0], names[1]
        fig, ax = plt.subplots(figsize=(7, 5.5))
        xs = [coord[x_name](p["point"][x_name]) for p in points]
        ys = [coord[y_name](p["point"][y_name]) for p in points]
        values = [p["objective"] for p in points]
        scatter = ax.scatter(
            [x for x, ok in zip(xs, feasible, strict=True) if ok],
            [y for y, ok in zip(ys, feasible, strict=True) if ok],
            c=[v for v, ok in zip(values, feasible, strict=True) if ok],
            cmap="viridis_r" if doc["objective"]["direction"] == "lower" else "viridis",
            s=80,
        )
        ax.scatter(
            [x for x, ok in zip(xs, feasible, strict=True) if not ok],
            [y for y, ok in zip(ys, feasible, strict=True) if not ok],
            marker="x",
            color="tab:red",
            s=80,
            label="breaks a constraint",
        )
        fig.colorbar(scatter, ax=ax, label=f"{objective} (median)")
        py = [coord[y_name](step["point"][y_name]) for step in doc["incumbents"]]
        ax.plot(path, py, color="tab:green", lw=2, marker=">", label="path of incumbents")
        ax.scatter([path[-1]], [py[-1]], marker="*", s=300, color="tab:green", label="selected")
        ax.set_xlabel(x_name)
        ax.set_ylabel(y_name)
        _ticks(ax, axes_values[x_name])
        if len(names) > 2:
            ax.set_title(
                f"first two of {len(names)} tuned params (others at each point's value)",
                fontsize=10,
            )
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return None


def _plot_points(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per evaluated point: its median objective, the worst sample of each constraint, and
    whether every sample met every constraint."""
    objective = doc["objective"]["metric"]
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for trial in doc["trials"]:
        if trial["status"] == "passed" and trial.get("point") is not None:
            grouped[trial["treatment"]].append(trial)
    out = []
    for trials in grouped.values():
        values = [t["metrics"][objective] for t in trials if objective in t["metrics"]]
        if not values:
            continue
        worst: dict[str, float] = {}
        feasible = True
        for text in doc["constraints"]:
            metric, op, bound = text.split()
            samples = [t["metrics"][metric] for t in trials if metric in t["metrics"]]
            if not samples:
                feasible = False
                continue
            worst[text] = min(samples) if op in (">=", ">") else max(samples)
            feasible = feasible and all(_holds(v, op, float(bound)) for v in samples)
        out.append(
            {
                "point": trials[0]["point"],
                "objective": describe(values)["median"],
                "constraint_worst": worst,
                "feasible": feasible,
            }
        )
    return out


def _holds(value: float, op: str, bound: float) -> bool:
    return {">=": value >= bound, "<=": value <= bound, ">": value > bound, "<": value < bound}[op]


def _axis(values: list[Any]) -> Callable[[Any], float]:
    """Numbers plot as themselves; other values at their index on the lattice."""
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return float
    texts = [as_text(v) for v in values]
    return lambda value: float(texts.index(as_text(value)))


def _ticks(ax: Any, values: list[Any]) -> None:
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        ax.set_xticks(range(len(values)))
        ax.set_xticklabels([as_text(v) for v in values])


def _half_gap(xs: list[float]) -> float:
    gaps = [b - a for a, b in zip(xs[:-1], xs[1:], strict=True)]
    return min(gaps) / 2 if gaps else 0.5


def _objective_of(
    points: list[dict[str, Any]], name: str, coord: dict[str, Any], x: float
) -> float:
    for p in points:
        if coord[name](p["point"][name]) == x:
            return p["objective"]
    return float("nan")


# -- the entry point ------------------------------------------------------------------------


def run_tune(
    path: Path,
    strategy: str | None,
    home: Path,
    *,
    resume: str | None = None,
    overrides: dict[str, Any] | None = None,
    extra_args: Sequence[str] = (),
    echo: Callable[[str], None] = print,
) -> int:
    """Tune the file at ``path``; returns the exit code (0 complete, 1 halted, 2 error).

    ``resume`` names the tune's run id: its finished rounds are replayed from their records.
    ``extra_args`` are passed to every round's pytest session (``--bench-set`` etc.).
    """
    path = Path(path)
    try:
        config = load_benchmark(path, overrides)
        space = load_space(config, path)
        settings = config.tune
        previous = _previous_tune(home, resume, config, space, strategy, path) if resume else None
    except ConfigError as exc:
        echo(str(exc))
        return 2
    strategy = strategy or (previous or {}).get("strategy")
    if strategy not in STRATEGIES:
        echo(f"tune: --strategy must be one of {', '.join(STRATEGIES)} (got {strategy!r}).")
        return 2
    tune_id = previous["run_id"] if previous else new_run_id(f"{config.name}-tune")
    replay = _replay(home, previous) if previous else []
    folder = home / "runs" / tune_id
    runner = SubprocessRounds(path, home, folder / "rounds", extra_args)
    tuner = Tuner(space, config, settings, runner, tune_id=tune_id, replay=replay, echo=echo)
    recorder = TuneRecorder(
        home, tuner, config, path, strategy, started=previous.get("started") if previous else None
    )
    tuner.on_round = recorder.snapshot
    echo(
        f"tune {tune_id}: {strategy} over {', '.join(space.names)} for {space.direction} "
        f"{space.objective}" + (f" (resuming: {len(replay)} round(s) replayed)" if previous else "")
    )
    recorder.snapshot()
    previous_sigterm = signal.signal(signal.SIGTERM, _interrupt)
    try:
        tuner.run(strategy)
        state = "halted" if tuner.halt else "complete"
    except KeyboardInterrupt:
        state = "interrupted"
    except (RoundError, ResumeMismatch) as exc:
        recorder.failure = str(exc)
        echo(str(exc))
        state = "failed"
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
    document = recorder.finish(state)
    echo(f"tune {tune_id}: {state}; selected {_selected_text(document)}; {_chain_text(document)}")
    echo(f"record: {recorder.dir / 'results.yaml'}  report: {recorder.dir / 'report.md'}")
    return EXIT_CODES[state]


def tune_from_pytest(config: Any) -> int:
    """``pytest --bench-tune=STRATEGY FILE``: tune the one tuning file named on the line.

    The session's benchmark options (``--bench-set``, ``--bench-accept-risk``,
    ``--bench-isolation``) are passed on to every round.
    """
    from pytest_benchmark_agent.engine.session import default_home
    from pytest_benchmark_agent.plugin import _parse_overrides

    files = [
        arg.split("::")[0] for arg in config.args if arg.split("::")[0].endswith((".yaml", ".yml"))
    ]
    if len(files) != 1:
        print(
            f"--bench-tune: name exactly one tuning file (got {files or 'none'}), e.g. "
            "pytest --bench --bench-tune=refine examples/seismic-heap-factor/bench.yaml"
        )
        return 4
    extra = [f"--bench-set={item}" for item in config.getoption("bench_set")]
    if config.getoption("bench_accept_risk"):
        extra.append("--bench-accept-risk")
    isolation = getattr(config.option, "bench_isolation", None)
    if isolation not in (None, "host"):
        extra.append(f"--bench-isolation={isolation}")
    path = config.invocation_params.dir / files[0]
    return run_tune(
        path,
        config.getoption("bench_tune"),
        default_home(config),
        overrides=_parse_overrides(config),
        extra_args=extra,
    )


def _interrupt(signum: int, frame: Any) -> None:
    """SIGTERM stops a tune like Ctrl-C: the round's session is stopped, the record kept."""
    raise KeyboardInterrupt(f"signal {signum}")


def _previous_tune(
    home: Path,
    run_id: str,
    config: BenchmarkConfig,
    space: SearchSpace,
    strategy: str | None,
    path: Path,
) -> dict[str, Any]:
    """The record of the tune to resume, refused when it does not match this file."""
    record_path = home / "runs" / run_id / "results.yaml"
    if not record_path.is_file():
        raise ConfigError(
            path,
            [
                (
                    "--resume",
                    f"{run_id} has no tune record at {record_path}.",
                    "name a tune's run id (benchmark-agent history lists them).",
                )
            ],
        )
    previous = load_yaml(record_path) or {}
    if previous.get("kind") != "tune":
        raise ConfigError(
            path,
            [("--resume", f"{run_id} is a run, not a tune.", "name the run id of a tune record.")],
        )
    if strategy and previous.get("strategy") != strategy:
        raise ConfigError(
            path,
            [
                (
                    "--strategy",
                    f"is {strategy}, but tune {run_id} ran {previous.get('strategy')}.",
                    "resume with the same strategy, or start a new tune.",
                )
            ],
        )
    now = json.loads(json.dumps(definition(config, space), default=str))
    if previous.get("definition") != now:
        changed = sorted(k for k in now if (previous.get("definition") or {}).get(k) != now[k])
        raise ConfigError(
            path,
            [
                (
                    "",
                    f"tune {run_id} was recorded with a different "
                    f"{', '.join(changed)}, so its rounds cannot be replayed.",
                    "resume with the file (and --bench-set values) it ran with, "
                    "or start a new tune.",
                )
            ],
        )
    return previous


def _replay(home: Path, previous: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The finished rounds of a previous attempt, in order, up to the first unfinished one."""
    out = []
    for summary in previous.get("rounds") or []:
        run_dir = home / "runs" / summary["run_id"]
        if summary.get("status") != "finished" or not (run_dir / "results.yaml").is_file():
            break
        out.append((summary, load_results(run_dir)))
    return out


__all__ = [
    "STRATEGIES",
    "Candidate",
    "Halt",
    "RoundError",
    "RoundOutcome",
    "RoundRequest",
    "RoundRunner",
    "Spent",
    "SubprocessRounds",
    "TuneRecorder",
    "Tuner",
    "chained_ratio",
    "coordinate",
    "definition",
    "grid",
    "plot_objective",
    "refine",
    "render_report",
    "run_tune",
    "tune_from_pytest",
    "what_went_wrong",
]
