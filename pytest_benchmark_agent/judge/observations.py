"""The one observation extractor: which recorded values a comparison analyses.

Gate 2 (a run's own verdicts and its sequential looks), the baseline comparison and the tuner
all read trial records the same way, so the same record always yields the same samples:

* only ``passed`` trials of the named treatments count, and a metric's value as recorded (the
  analysis decides what it can use: ``comparability.usable``);
* a metric reported by one measure stage is read from that stage's trials only (``stage_of``),
  so a built-in such as ``wall_s`` of another stage never stands in for it;
* blocks are numbered per host (a host's replicates are moved past the previous host's), so a
  pair never crosses hosts; ``upto`` keeps the first blocks only (a sequential look);
* a trial recorded twice (an xdist worker that restarted) is analysed once, its last record,
  with a caveat saying how many were;
* ``rename`` and ``offset`` put two runs side by side (a baseline's control renamed, its blocks
  moved past the other run's).

:func:`sample_table` is the same extraction without :mod:`.analysis` (and so without scipy):
gate 2's refusal of a run with nothing to compare needs the values, not the statistics.
:func:`counter_floors` says which metrics a counting backend counted, and so which rule the
analysis applies to them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_benchmark_agent.records.schema import TrialRecord
from pytest_benchmark_agent.stats.counter_noise import noise_floor

if TYPE_CHECKING:
    from pytest_benchmark_agent.config.models import BenchmarkConfig
    from pytest_benchmark_agent.stats.analysis import Observation

#: (treatment, block, seed): what pairs a sample with its counterparts in other treatments.
SampleKey = tuple[str, int, Any]


@dataclass(frozen=True)
class Drawn:
    """One recorded value of one metric, with where it ran in its block (``position``)."""

    value: Any
    position: int | None


def measure_stages(config: BenchmarkConfig, metrics: Iterable[str]) -> dict[str, str | None]:
    """The measure stage whose trials carry each metric; None where every measure stage may
    (a built-in metric of a file with several measure stages)."""
    measures = [stage.name for stage in config.stages if stage.kind == "measure"]
    only = measures[0] if len(measures) == 1 else None
    out: dict[str, str | None] = {}
    for metric in metrics:
        out[metric] = next(
            (
                stage.name
                for stage in config.stages
                if stage.kind == "measure"
                and stage.metrics_from
                and metric in stage.metrics_from.fields
            ),
            only,
        )
    return out


def counter_floors(config: BenchmarkConfig, trials: Sequence[TrialRecord]) -> dict[str, float]:
    """The metrics a counting backend counted (engine/counters.py), each with that backend's
    noise floor: the analysis judges them by the counters' t rule."""
    counted = {stage.name: stage.counters for stage in config.stages if stage.counters}
    floors: dict[str, float] = {}
    for trial in trials:
        floor = noise_floor(trial.counted_by)
        for metric in counted.get(trial.stage, ()):
            if floor is not None and metric in config.metrics:
                floors[metric] = max(floor, floors.get(metric, 0.0))
    return floors


def sample_table(
    trials: Sequence[TrialRecord],
    metrics: Sequence[str],
    labels: Iterable[str],
    *,
    upto: int | None = None,
    stage_of: Mapping[str, str | None] | None = None,
    rename: Mapping[str, str] | None = None,
    offset: int = 0,
) -> tuple[dict[str, dict[SampleKey, Drawn]], list[str]]:
    """Values of the passed trials per metric, keyed by (treatment, block, seed); and caveats."""
    names = dict(rename) if rename is not None else {str(label): str(label) for label in labels}
    passed = [
        t
        for t in trials
        if t.status == "passed"
        and str(t.treatment) in names
        and (upto is None or int(t.replicate or 0) < upto)
    ]
    rank = {host: i for i, host in enumerate(sorted({t.host or "" for t in passed}))}
    stride = 1 + max((int(t.replicate or 0) for t in passed), default=0)
    stages = stage_of or {}
    table: dict[str, dict[SampleKey, Drawn]] = {metric: {} for metric in metrics}
    seen: set[tuple[Any, SampleKey]] = set()
    duplicates = 0
    for trial in passed:
        block = int(trial.replicate or 0) + rank[trial.host or ""] * stride
        key = (names[str(trial.treatment)], block + offset, trial.seed)
        duplicates += (trial.stage, key) in seen
        seen.add((trial.stage, key))
        for metric in metrics:
            stage = stages.get(metric)
            value = trial.metrics.get(metric)
            if value is not None and (stage is None or trial.stage == stage):
                table[metric][key] = Drawn(value, trial.position)
    caveats = (
        [f"{duplicates} trial(s) were recorded twice; the last record of each was analysed"]
        if duplicates
        else []
    )
    return table, caveats


def observations(
    trials: Sequence[TrialRecord],
    metrics: Sequence[str],
    labels: Iterable[str],
    *,
    upto: int | None = None,
    stage_of: Mapping[str, str | None] | None = None,
    rename: Mapping[str, str] | None = None,
    offset: int = 0,
) -> tuple[dict[str, list[Observation]], list[str]]:
    """:func:`sample_table` as :class:`.analysis.Observation` lists, ready to analyse."""
    from pytest_benchmark_agent.stats import analysis  # numpy: only a comparison needs it

    table, caveats = sample_table(
        trials, metrics, labels, upto=upto, stage_of=stage_of, rename=rename, offset=offset
    )
    return {
        metric: [
            analysis.Observation(*key, drawn.value, position=drawn.position)
            for key, drawn in per.items()
        ]
        for metric, per in table.items()
    }, caveats
