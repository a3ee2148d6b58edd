"""The tune record: ``runs/<tune_id>/`` written after every round, then finished.

``results.yaml`` carries the fixed top-level keys of a run record (so history, reports and the
index read it like any run) and the tune's own: its rounds, every candidate judged, the path of
incumbents, ties, the chained ratio, what was spent, the halt. It is rewritten after each round,
so an interrupted tune leaves a record to resume from (:func:`definition` is what a resume must
share with it); :meth:`TuneRecorder.finish` adds ``report.md``, the plot and the index entry.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.engine.plan import POINT, point_label
from pytest_benchmark_agent.records.writer import dump_yaml, regenerate_index
from pytest_benchmark_agent.stats.describe import describe
from pytest_benchmark_agent.tune.plot import plot_objective
from pytest_benchmark_agent.tune.report import render_report, selected_text
from pytest_benchmark_agent.tune.space import SearchSpace
from pytest_benchmark_agent.tune.tuner import Tuner
from pytest_benchmark_agent.util import redact
from pytest_benchmark_agent.util.fsutil import atomic_write, utc_now
from pytest_benchmark_agent.util.placeholders import as_text
from pytest_benchmark_agent.util.safetext import inert_markdown


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
        atomic_write(
            self.dir / "report.md", inert_markdown(redact.scrub_text(render_report(document, note)))
        )
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
                        self.tuner.space.objective: {f"selected {selected_text(document)}": ratio}
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

    Each ratio was measured within the blocks of its move's confirmation round (fresh blocks,
    so not biased towards the luckiest candidate of the selection), so the chain compares
    like with like at every step. None when the tune never moved.
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
