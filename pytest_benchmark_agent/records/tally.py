"""The figures derived from a run's trials and preps, each computed here once: how many trials
ended in each status, and what was spent (GPU-hours and their cost).

A trial's and a built prep's GPU-hours are recorded as it ends (``engine/context.py``: the GPUs
pinned to its stage times its wall time, and their cost at ``resources.price_per_gpu_hour``);
what a run or a tune's round spent is their sum, here. Before anything runs a budget can only be
estimated, from the declared ``est_gpu_hours`` (``engine/preflight.py``): a second, named figure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

#: The status of a trial planned but never started: counted, but not a trial that ran.
NOT_RUN = "not_run"


class Recorded(Protocol):
    """A trial or prep as a record holds it: a dict, a :class:`.TrialRecord`, a
    :class:`.PrepEvent`, each read by field name."""

    def get(self, name: str, default: Any = None) -> Any: ...


@dataclass
class Tally:
    """Status counts and spending of trials, added as they come (a live run adds each trial
    once, so its record costs the same at its first trial as at its ten-thousandth)."""

    counts: Counter[str] = field(default_factory=Counter)
    gpu_hours: float = 0.0
    cost_usd: float = 0.0

    def add(self, trials: Iterable[Recorded]) -> Tally:
        """Count ``trials`` in; returns the tally."""
        for trial in trials:
            self.counts[str(trial.get("status"))] += 1
            self.gpu_hours += trial.get("gpu_hours") or 0.0
            self.cost_usd += trial.get("cost_usd") or 0.0
        return self

    def spent(self, preps: Iterable[Recorded]) -> dict[str, float]:
        """``spent``: the trials' GPU-hours and cost and those of every prep built."""
        built = [p for p in preps if p.get("action") == "built"]
        return {
            "gpu_hours": self.gpu_hours + sum(p.get("gpu_hours") or 0.0 for p in built),
            "cost_usd": self.cost_usd + sum(p.get("cost_usd") or 0.0 for p in built),
        }


def status_counts(trials: Iterable[Recorded]) -> dict[str, int]:
    """``counts``: status -> number of trials."""
    return dict(Tally().add(trials).counts)


def spent(trials: Iterable[Recorded], preps: Iterable[Recorded]) -> dict[str, float]:
    """``spent``: GPU-hours and cost of the trials and built preps, as each recorded them."""
    return Tally().add(trials).spent(preps)


def ran(counts: Mapping[str, int]) -> int:
    """Trials that ran (every status but ``not_run``) of a ``counts`` map."""
    return sum(n for status, n in counts.items() if status != NOT_RUN)
