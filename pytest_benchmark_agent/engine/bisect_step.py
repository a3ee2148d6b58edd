"""The outcome of one ``bisect`` step, and the evidence for it, from its run's record.

A step measures GOOD and the candidate commit interleaved in one session (``--bench-against
GOOD``), so the machine it ran on cancels. It is ``bad`` when a primary metric regressed beyond
its ``fail_threshold`` (default: its ``noise_threshold``); ``good`` only with evidence: every
primary metric's interval excludes a regression that large. Anything else is ``skip`` (git
bisect then reports the range it could not split rather than guessing): a step whose interval
straddles the threshold says so, with its MDE, and the fix is more blocks (``replicates: {min,
max}`` adds blocks in the session until it decides, up to max).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_benchmark_agent.judge.baseline import FINISHED, primary_metrics
from pytest_benchmark_agent.records.record import RunRecord, load_run
from pytest_benchmark_agent.stats.comparability import Verdict
from pytest_benchmark_agent.stats.units import interval, ratio


@dataclass(frozen=True)
class Evidence:
    """One primary metric of a step: the candidate against GOOD, and its threshold."""

    metric: str
    label: str
    verdict: Verdict
    threshold: float
    direction: str

    @property
    def regressed(self) -> bool:
        """Regressed beyond the threshold: the step is bad."""
        ratio = self.verdict.ratio
        return self.verdict.regressed and ratio is not None and abs(ratio - 1) > self.threshold

    @property
    def cleared(self) -> bool:
        """The interval excludes a regression beyond the threshold: the step may be good."""
        ci = self.verdict.ci
        if self.verdict.regressed or not ci:
            return False
        if self.direction == "higher":
            return ci[0] >= 1 - self.threshold
        return ci[1] <= 1 + self.threshold

    def line(self) -> str:
        """``loop_ms x1.10 [1.07, 1.13] MDE 5.4% (fail_threshold 5%): regressed``."""
        v = self.verdict
        shown = interval(v.ci) if v.ci else "[-]"
        detected = "-" if v.mde is None else f"{100 * v.mde:.3g}%"
        return (
            f"{self.metric} {ratio(v.ratio)} {shown} MDE {detected} "
            f"(fail_threshold {100 * self.threshold:.3g}%): {v.verdict}"
        )


def evidence(record: RunRecord) -> list[Evidence]:
    """The primary metrics' verdicts of a step's run (the candidate against GOOD)."""
    specs = record.model.metrics
    found = []
    for metric in primary_metrics(specs):
        spec = specs[metric]
        threshold = spec.noise_threshold if spec.fail_threshold is None else spec.fail_threshold
        for label, verdict in (record.verdicts.get(metric) or {}).items():
            found.append(Evidence(metric, label, verdict, threshold, spec.direction))
    return found


def judged(run_dir: Path, code: int | None) -> tuple[str, str]:
    """The step's outcome (good, bad, skip) and its evidence, from its run and pytest's exit
    code (None: a run recovered from its record alone)."""
    how = "recovered from its record" if code is None else f"pytest exit {code}"
    record = load_run(run_dir) if (run_dir / "results.yaml").is_file() else None
    if record is None or record.state not in FINISHED:
        state = record.state if record is not None and record.state else "none: no record"
        return "skip", f"{how}; the run did not finish (state {state})"
    found = evidence(record)
    said = "; ".join(e.line() for e in found)
    if not found:
        return "skip", f"{how}; no primary metric was compared with GOOD"
    if any(e.regressed for e in found) and code in (None, 1):
        return "bad", said
    if all(e.cleared for e in found) and code in (None, 0):
        return "good", said
    return "skip", (
        f"{how}; could not decide: {said}; fix: more blocks (replicates: {{min, max}} adds "
        "blocks until the step decides)"
    )
