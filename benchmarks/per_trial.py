"""The harness's in-session cost per trial, for one checkout of this project's code: a metric
that the project's own ``bisect`` can hunt across its history.

``python benchmarks/per_trial.py [--code DIR]`` runs one ``pytest --bench`` session of
``--trials`` trials of a measure stage running ``true`` (``overhead.py``'s marginal benchmark),
with the plugin imported from DIR (default: the current folder, which is where a bisection's
stage runs: the commit's worktree), and prints ``per_trial_ms=X``: the mean time from one
trial's start to the next's, from the run's ``trials.jsonl`` (``overhead.py``'s in-session
cycle, no start-up in it). Every other pytest plugin installed here is disabled, as in
``overhead.py``.

To find the commit that moved it (PERFORMANCE.md, round 44), in a clone of the project (an
editable install of the clone itself is refused by ``bisect``; one of another checkout is not):

    python benchmarks/per_trial.py --write-bench /tmp/clone/per_trial.yaml
    cd /tmp/clone && benchmark-agent bisect GOOD BAD per_trial.yaml

``--write-bench FILE`` writes that benchmark file: one measure stage running this script (by its
absolute path, since older commits do not have it) in the commit's worktree, and ``per_trial_ms``
as its primary metric (lower is better, noise threshold 5%).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from overhead import (  # noqa: E402
    PACKAGE,
    QUICK,
    OverheadError,
    Workspace,
    journal_cycle,
    measure_bench,
)

METRIC = "per_trial_ms"


def measure(code: Path, trials: int) -> float:
    """Milliseconds per trial of one session of ``trials`` trials, the plugin imported from
    ``code``, in ``overhead.py``'s workspace (its environment, without an outer session's
    variables, and its pytest command, every other plugin disabled)."""
    with tempfile.TemporaryDirectory(prefix="per-trial-") as tmp:
        ws = Workspace(Path(tmp), QUICK)
        ws.env["PYTHONPATH"] = os.pathsep.join(
            [str(code), *filter(None, [ws.env.get("PYTHONPATH")])]
        )
        (ws.root / "bench.yaml").write_text(measure_bench("per-trial", trials))
        home = ws.root / "home"
        try:
            ws.run(
                ws.pytest("--bench", "bench.yaml", "--bench-home", str(home)),
                expect=rf"\b{trials} passed",
            )
            _, origin = ws.run(
                [sys.executable, "-c", f"import {PACKAGE}; print({PACKAGE}.__file__)"]
            )
        except OverheadError as exc:
            sys.exit(f"per_trial: {exc}")
        cycle = journal_cycle(home)
        if cycle is None:
            sys.exit(f"per_trial: the session left no journal of {trials} trials under {home}")
        # Under --bench-against, the session checks that each side imported its own checkout.
        print("BENCH_CODE_FROM", origin.strip())
        return cycle * 1000


def bench_file() -> dict[str, object]:
    """The benchmark a bisection runs: this script, by its absolute path, in each worktree."""
    return {
        "name": "per-trial-cost",
        "hypothesis": "this commit's harness costs no more per trial than GOOD's",
        "stages": [
            {
                "name": "measure",
                "kind": "measure",
                "cmd": shlex.join([sys.executable, str(HERE / "per_trial.py"), "--code", "."]),
                "metrics_from": {"stdout": True, "fields": [METRIC]},
            }
        ],
        "metrics": {METRIC: {"direction": "lower", "primary": True, "noise_threshold": 0.05}},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", type=Path, default=Path("."), help="checkout to import from")
    parser.add_argument("--trials", type=int, default=200, help="trials in the session")
    parser.add_argument("--write-bench", type=Path, default=None, metavar="FILE")
    args = parser.parse_args(argv)
    if args.write_bench is not None:
        args.write_bench.write_text(yaml.safe_dump(bench_file(), sort_keys=False))
        print(f"wrote {args.write_bench}")
        return 0
    if args.trials < 2 or args.trials % 2:
        parser.error(f"--trials {args.trials}: give an even number, at least 2 (two treatments)")
    print(f"{METRIC}={measure(args.code.resolve(), args.trials):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
