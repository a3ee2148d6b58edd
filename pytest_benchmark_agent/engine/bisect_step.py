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
from typing import Any

from pytest_benchmark_agent.judge.baseline import FINISHED, primary_metrics
from pytest_benchmark_agent.records.reader import load_results
from pytest_benchmark_agent.records.record import load_run


@dataclass(frozen=True)
class Evidence:
    """One primary metric of a step: the candidate against GOOD, and its threshold."""

    metric: str
    label: str
    verdict: dict[str, Any]
    threshold: float
    direction: str

    @property
    def regressed(self) -> bool:
        """Regressed beyond the threshold: the step is bad."""
        ratio = self.verdict.get("ratio")
        return (
            self.verdict.get("verdict") == "regressed"
            and ratio is not None
            and abs(ratio - 1) > self.threshold
        )

    @property
    def cleared(self) -> bool:
        """The interval excludes a regression beyond the threshold: the step may be good."""
        ci = self.verdict.get("ci")
        if self.verdict.get("verdict") == "regressed" or not ci:
            return False
        if self.direction == "higher":
            return ci[0] >= 1 - self.threshold
        return ci[1] <= 1 + self.threshold

    def line(self) -> str:
        """``loop_ms x1.10 [1.07, 1.13] MDE 5.4% (fail_threshold 5%): regressed``."""
        v = self.verdict
        ci, mde = v.get("ci"), v.get("mde")
        interval = f"[{_num(ci[0])}, {_num(ci[1])}]" if ci else "[-]"
        detected = "-" if mde is None else f"{100 * mde:.3g}%"
        return (
            f"{self.metric} x{_num(v.get('ratio'))} {interval} MDE {detected} "
            f"(fail_threshold {100 * self.threshold:.3g}%): {v.get('verdict')}"
        )


def evidence(run_dir: Path) -> list[Evidence]:
    """The primary metrics' verdicts of a step's run (the candidate against GOOD)."""
    if not (run_dir / "results.yaml").is_file():
        return []
    results = load_results(run_dir)
    specs = load_run(run_dir).model.metrics
    found = []
    for metric in primary_metrics(specs):
        spec = specs[metric]
        threshold = spec.noise_threshold if spec.fail_threshold is None else spec.fail_threshold
        for label, verdict in ((results.get("verdicts") or {}).get(metric) or {}).items():
            found.append(Evidence(metric, label, verdict, threshold, spec.direction))
    return found


def judged(run_dir: Path, code: int | None) -> tuple[str, str]:
    """The step's outcome (good, bad, skip) and its evidence, from its run and pytest's exit
    code (None: a run recovered from its record alone)."""
    how = "recovered from its record" if code is None else f"pytest exit {code}"
    results = load_results(run_dir) if (run_dir / "results.yaml").is_file() else {}
    if results.get("state") not in FINISHED:
        state = results.get("state") or "none: no record"
        return "skip", f"{how}; the run did not finish (state {state})"
    found = evidence(run_dir)
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


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.4g}"
