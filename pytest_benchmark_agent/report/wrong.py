"""The **What Went Wrong** list of a run's report: never empty.

Every refusal and why, failed and non-comparable trials, what did not run, caveats, high
variance, a failed gate, a refused baseline; or, when nothing went wrong, what the run did not
test, so a clean run is never read as proof of more than it is. The engine records the list
(``what_went_wrong`` of ``results.yaml``) when a run finishes; report.md and report.html show it.
"""

from __future__ import annotations

import platform
from collections import Counter

from pytest_benchmark_agent.config.metric import BUILTIN_METRICS
from pytest_benchmark_agent.judge.baseline import primary_metrics
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.stats.units import pct
from pytest_benchmark_agent.util.safetext import md, md_code

#: A coefficient of variation above which small effects cannot be told from noise.
HIGH_CV = 0.05


def what_went_wrong(run: RunRecord) -> list[str]:
    """Every problem of the run, or (never empty) what a clean run did not test."""
    items = _trial_problems(run)
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
    items += _baseline_problems(run)
    items += _high_variance(run)
    return items or _untested(run)


def _trial_problems(run: RunRecord) -> list[str]:
    """Each trial that ran and did not pass, and the trials not run, counted per reason."""
    items: list[str] = []
    not_run: Counter[str] = Counter()
    for trial in run.trials:
        first = (trial.reason or "").splitlines()[:1]
        if trial.status == "not_run":
            not_run[first[0] if first else ""] += 1
        elif trial.status != "passed":
            items.append(f"{md_code(trial.id)} {trial.status}: {md(first[0]) if first else ''}")
    for reason, count in not_run.items():
        items.append(f"{count} trial(s) not run: {reason or 'no reason recorded'}")
    return items


def _baseline_problems(run: RunRecord) -> list[str]:
    """A refused comparison with the baseline, its caveats, and a CI gate that did not pass."""
    base = run.baseline
    if base is None:
        return []
    items = []
    if base.refused:
        items.append(
            f"The comparison with baseline {base.run_id or base.ref} was refused: {base.refused}."
        )
    items += [f"Baseline {base.run_id} is QUALIFIED: {c}" for c in base.extra.get("caveats") or ()]
    if base.gate is not None and base.gate.outcome in ("regressed", "unjudged"):
        items += [f"CI gate {base.gate.word}: {reason}" for reason in base.gate.reasons]
    return items


def _high_variance(run: RunRecord) -> list[str]:
    """Each primary or declared metric of a treatment whose CV is above :data:`HIGH_CV`."""
    primaries = set(primary_metrics(run.model.metrics))
    items = []
    for metric, per in run.summary.items():
        if metric not in primaries and metric in BUILTIN_METRICS:
            continue
        for label, row in per.items():
            cv = row.get("cv")
            if cv is not None and cv > HIGH_CV:
                items.append(
                    f"High variance: {md_code(metric)} of {md_code(label)} has CV {pct(cv)} "
                    f"(above {pct(HIGH_CV)}); small effects cannot be told from noise."
                )
    return items


def _untested(run: RunRecord) -> list[str]:
    """What a run in which nothing went wrong did not test."""
    items = [
        "Nothing failed. What this run did not test:",
        "anything but this one configuration, at the values listed above: it was compared "
        "with nothing within the run (other sizes, settings or code may behave "
        "differently);"
        if run.one_configuration
        else f"only the values {', '.join(map(md, run.treatments))} of "
        f"{md_code(run.treatment_variable)}, at the "
        "control values listed above (other sizes or settings may behave differently);",
    ]
    if run.reproduces is not None and run.reproduces.reproduced:
        items.append(
            f"one machine ({platform.node()}): it reproduced {run.reproduces.run_id} "
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
    if run.model.seeds is None:
        items.append("a single seed: randomness of the workload itself was not varied.")
    return items
