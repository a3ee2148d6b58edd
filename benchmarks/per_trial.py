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
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from overhead import foreign_plugins, journal_cycle, measure_bench  # noqa: E402

METRIC = "per_trial_ms"
PACKAGE = "pytest_benchmark_agent"
#: Variables of an outer session (a bisection's stage) that must not reach the inner one.
SCRUBBED = ("PYTHONDONTWRITEBYTECODE", "PYTEST_ADDOPTS", "BENCHMARK_HOME")


def measure(code: Path, trials: int) -> float:
    """Milliseconds per trial of one session of ``trials`` trials, the plugin imported from
    ``code``."""
    with tempfile.TemporaryDirectory(prefix="per-trial-") as tmp:
        root = Path(tmp)
        (root / "pytest.ini").write_text("[pytest]\n")  # no configuration from above root
        (root / "bench.yaml").write_text(measure_bench("per-trial", trials))
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        env["PYTHONPATH"] = os.pathsep.join([str(code), *filter(None, [env.get("PYTHONPATH")])])
        env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        off = [arg for name in foreign_plugins() for arg in ("-p", f"no:{name}")]
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *off]
        done = subprocess.run(
            [*command, "--bench", "bench.yaml", "--bench-home", str(root / "home")],
            cwd=root,
            env=env,
            text=True,
            capture_output=True,
        )
        cycle = journal_cycle(root / "home")
        if done.returncode or cycle is None:
            sys.exit(f"per_trial: the session failed (exit {done.returncode}):\n{done.stdout}")
        origin = subprocess.run(
            [sys.executable, "-c", f"import {PACKAGE}; print({PACKAGE}.__file__)"],
            env=env,
            text=True,
            capture_output=True,
            check=True,
        )
        # Under --bench-against, the session checks that each side imported its own checkout.
        print("BENCH_CODE_FROM", origin.stdout.strip())
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
    if args.trials < 2:
        parser.error(f"--trials {args.trials}: give at least 2")
    print(f"{METRIC}={measure(args.code.resolve(), args.trials):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
