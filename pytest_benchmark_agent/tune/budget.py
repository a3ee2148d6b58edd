"""Budgets: what a tune has spent, and whether its next round still fits.

``budget.trials`` is checked before a round starts (a round that does not fit is not started),
``budget.wall_clock_s`` between rounds (a running round gets only the time left), and
``budget.gpu_hours`` / ``budget.cost_usd`` as spent so far plus the next round estimated from
the GPU-hours per trial so far (before any trial, the declared ``est_gpu_hours`` per trial, as
preflight estimates a plan). A round's trials, GPU-hours and cost are its record's, each
counted by :mod:`.records.tally` (GPU-hours as each trial and built prep recorded them: its
pinned GPUs times its wall time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.engine.preflight import declared_per_trial
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.records.tally import ran, spent, status_counts


@dataclass
class Spent:
    """What the tune has used so far (replayed rounds included)."""

    trials: int = 0
    wall_s: float = 0.0
    gpu_hours: float = 0.0
    cost_usd: float = 0.0

    def add(self, record: RunRecord, wall_s: float) -> dict[str, Any]:
        """Count a round's record in; returns the round's own share (for its summary)."""
        trials = record.trials
        used = spent(trials, record.preps)
        count, hours, dollars = ran(status_counts(trials)), used["gpu_hours"], used["cost_usd"]
        self.trials += count
        self.wall_s += wall_s
        self.gpu_hours += hours
        self.cost_usd += dollars
        return {
            "trials": count,
            "wall_s": round(wall_s, 3),
            "gpu_hours": round(hours, 6),
            "cost_usd": round(dollars, 4),
        }


def trials_per_point(config: BenchmarkConfig) -> int:
    """Trials one point of a round may run: replicates x seeds x measure stages."""
    measures = sum(1 for stage in config.stages if stage.kind == "measure")
    return config.max_replicates * len(config.seeds or [None]) * max(measures, 1)


def time_left(config: BenchmarkConfig, spent: Spent) -> float | None:
    """Seconds of ``budget.wall_clock_s`` left (None: no wall-clock budget)."""
    limit = config.budget.wall_clock_s
    return None if limit is None else max(limit - spent.wall_s, 0.0)


def overrun(config: BenchmarkConfig, spent: Spent, needed: int) -> str | None:
    """Why a round of ``needed`` trials would overrun a budget (what to do), or None."""
    budget = config.budget
    if budget.trials is not None and spent.trials + needed > budget.trials:
        return (
            f"budget.trials: the next round needs {needed} trials and "
            f"{budget.trials - spent.trials} of {budget.trials} remain. Raise "
            "budget.trials and resume, or accept the incumbent."
        )
    if budget.wall_clock_s is not None and spent.wall_s >= budget.wall_clock_s:
        return (
            f"budget.wall_clock_s spent ({spent.wall_s:.0f}s of "
            f"{budget.wall_clock_s:g}s). Raise it and resume."
        )
    # Measured once trials have run; before that, the estimate preflight uses.
    per_trial = spent.gpu_hours / spent.trials if spent.trials else declared_per_trial(config)
    uses_gpus = bool(config.resources.gpus or any(stage.gpus for stage in config.stages))
    for name, used, limit, unit in (
        ("gpu_hours", spent.gpu_hours, budget.gpu_hours, "GPU-hours"),
        ("cost_usd", spent.cost_usd, budget.cost_usd, "USD"),
    ):
        if limit is None:
            continue
        scale = 1.0 if name == "gpu_hours" else config.resources.price_per_gpu_hour
        estimate = per_trial * needed * scale
        price_text = "" if name == "gpu_hours" else f" x ${scale:g}/GPU-hour"
        if uses_gpus and limit == 0:
            return f"budget.{name} is 0 but the stages use GPUs. Raise it to run GPU trials."
        if used + estimate > limit:
            return (
                f"budget.{name}: {used:.4g} {unit} spent and the next round is estimated "
                f"at {estimate:.4g} more (of {limit:g}): {needed} trials x {per_trial:.4g} "
                f"GPU-hours{price_text}. Raise budget.{name} and resume."
            )
    return None
