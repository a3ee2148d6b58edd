"""Revisions as treatments (``--bench-against``), counted over many sessions on a synthetic
metric of known truth, in real git repositories and real ``pytest --bench`` sessions.

``measure.py`` reports ``cost``: the committed ``cost.txt`` times a machine factor from the
environment (``MACHINE_FACTOR``; drifting by ``MACHINE_DRIFT`` over each session's
``MACHINE_TRIALS`` trials, counted in a file outside the repository, so drift hits both
revisions alike; shifted per session by up to ``MACHINE_SHIFT`` either way) times Gaussian
noise of CV ``NOISE_CV`` (2%), seeded per trial. Three cells, each a fresh repository per
repetition:

- ``+10% code``: HEAD raises ``cost.txt`` from 1.0 to 1.1; one ``--bench-against HEAD~1
  --bench-fail-on=regression`` session must be ``regressed`` (exit 1);
- ``README only, drift 10%``: HEAD edits the README while the machine slows by 10% over the
  session; the session must pass (exit 0);
- ``bisect``: 8 commits, the 5th raises ``cost.txt`` by 15%, the others edit the README; the
  machine is up to 5% faster or slower in each session; ``benchmark-agent bisect`` must name
  the 5th commit (exit 0).

    python benchmarks/bench_against_counts.py              # 10 a cell, ~12 minutes on 2 cores
    python benchmarks/bench_against_counts.py --sessions 3

``tests/test_bench_against.py`` runs a few of these sessions with the same helpers.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from pytest_benchmark_agent.records.reader import load_results

MEASURE = """\
import os
import random
from pathlib import Path

cost = float(Path("cost.txt").read_text())
state = Path(os.environ["MACHINE_STATE"])
count = int(state.read_text()) if state.exists() else 0
state.write_text(str(count + 1))
trials = int(os.environ["MACHINE_TRIALS"])
drift = float(os.environ.get("MACHINE_DRIFT", "0")) * (count % trials) / trials
session = random.Random(f"{os.environ['NOISE_SEED']}:session:{count // trials}")
shift = float(os.environ.get("MACHINE_SHIFT", "0")) * session.uniform(-1, 1)
factor = float(os.environ.get("MACHINE_FACTOR", "1")) * (1 + drift) * (1 + shift)
noise = random.Random(f"{os.environ['NOISE_SEED']}:{count}").gauss(1, float(os.environ["NOISE_CV"]))
print(f"cost={cost * factor * noise}")
print("BENCH_CODE_FROM", Path(__file__).resolve())
print("checkout", os.environ["BENCH_CHECKOUT"])
"""
REPLICATES = 12


def bench_file(**overrides: Any) -> dict[str, Any]:
    document = {
        "name": "against",
        "hypothesis": "this commit costs no more than the one compared with",
        "replicates": REPLICATES,
        "stages": [
            {
                "name": "measure",
                "kind": "measure",
                "cmd": f"{sys.executable} measure.py",
                "metrics_from": {"stdout": True, "fields": ["cost"]},
            }
        ],
        "metrics": {
            "cost": {
                "direction": "lower",
                "primary": True,
                "noise_threshold": 0.02,
                "fail_threshold": 0.05,
            }
        },
    }
    document.update(overrides)
    return document


class Repo:
    """A git repository holding the synthetic benchmark; sessions run in it."""

    def __init__(self, root: Path, noise_seed: int = 0, drift: float = 0.0, shift: float = 0.0):
        self.path = root / "repo"
        self.path.mkdir()
        self.home = root / "home"
        self.state = root / "machine.count"
        git(self.path, "init", "-q", "-b", "main")
        self.env = {k: v for k, v in os.environ.items() if k != "BENCHMARK_HOME"} | {
            "MACHINE_STATE": str(self.state),
            "MACHINE_DRIFT": str(drift),
            "MACHINE_SHIFT": str(shift),
            "MACHINE_TRIALS": str(2 * REPLICATES),
            "NOISE_SEED": str(noise_seed),
            "NOISE_CV": "0.02",
        }

    def commit(self, message: str, **files: str) -> str:
        for name, text in files.items():
            path = self.path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        git(self.path, "add", *files)
        git(self.path, "commit", "-q", "-m", message)
        return git(self.path, "rev-parse", "HEAD")

    def base(self, document: dict[str, Any] | None = None, cost: str = "1.0") -> str:
        return self.commit(
            "the benchmark",
            **{
                "measure.py": MEASURE,
                "cost.txt": cost,
                "README.md": "a demo\n",
                "bench.yaml": yaml.safe_dump(document or bench_file(), sort_keys=False),
            },
        )

    def bench(self, *args: str, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                python,
                "-m",
                "pytest",
                "--bench",
                "bench.yaml",
                "--bench-home",
                str(self.home),
                "-p",
                "no:cacheprovider",
                "-p",
                "no:randomly",
                *args,
            ],
            cwd=self.path,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def record(self) -> dict[str, Any]:
        """The one run of this repository's data home."""
        (run,) = sorted((self.home / "runs").iterdir())
        return load_results(run)


def git(repo: Path, *args: str) -> str:
    """``git -C repo ARGS`` with a throwaway identity and no signing; its stdout, stripped."""
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
        + ["-c", "commit.gpgsign=false", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def one_session(cell: str, seed: int) -> tuple[int, dict[str, Any]]:
    """One repetition of ``cell`` in a fresh repository: the exit code and the verdict."""
    with tempfile.TemporaryDirectory() as folder:
        drift = 0.10 if cell == "readme" else 0.0
        repo = Repo(Path(folder), seed, drift=drift)
        repo.base()
        if cell == "readme":
            repo.commit("docs only", **{"README.md": "a demo, better explained\n"})
        else:
            repo.commit("10% more work", **{"cost.txt": "1.1"})
        done = repo.bench("--bench-against", "HEAD~1", "--bench-fail-on=regression")
        (verdict,) = repo.record()["verdicts"]["cost"].values()
        return done.returncode, verdict


def bisect_commits(root: Path, seed: int) -> tuple[Repo, list[str], int]:
    """The ``bisect`` cell's repository: 8 commits, the 5th (index 4) 15% costlier."""
    repo = Repo(root, seed, shift=0.05)
    shas = [repo.base()]
    for k in range(1, 8):
        change = {"cost.txt": "1.15"} if k == 4 else {"README.md": f"a demo, edit {k}\n"}
        shas.append(repo.commit(f"commit {k}", **change))
    return repo, shas, 4


def one_bisection(seed: int) -> tuple[int, str]:
    """One ``bisect`` over the cell's commits: the exit code and the first line of the result."""
    with tempfile.TemporaryDirectory() as folder:
        repo, shas, _ = bisect_commits(Path(folder), seed)
        done = bisect(repo, shas[0], shas[-1])
        first = done.stdout.splitlines()[0] if done.stdout else done.stderr[-300:]
        return done.returncode, first.replace(shas[4], "<the +15% commit>")


def bisect(repo: Repo, good: str, bad: str) -> subprocess.CompletedProcess[str]:
    """``benchmark-agent bisect GOOD BAD bench.yaml`` in ``repo``."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_benchmark_agent.cli.main", "--home", str(repo.home)]
        + ["bisect", good, bad, "bench.yaml"],
        cwd=repo.path,
        env=repo.env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    args = parser.parse_args()
    for cell, expected, title in (
        ("code", 1, "+10% code (must regress, exit 1)"),
        ("readme", 0, "README only, machine drifts 10% (must pass, exit 0)"),
    ):
        rows = [one_session(cell, 100 + seed) for seed in range(args.sessions)]
        hits = sum(code == expected for code, _ in rows)
        print(f"{title}: {hits} of {len(rows)}")
        for code, verdict in rows:
            low, high = verdict.get("ci") or (None, None)
            print(
                f"  exit {code}  {verdict['verdict']:<10} x{verdict['ratio']:.3f} "
                f"[{low:.3f}, {high:.3f}]  MDE {100 * verdict['mde']:.1f}%  n {verdict['n']}"
            )

    runs = [one_bisection(200 + seed) for seed in range(args.sessions)]
    named = sum(code == 0 and "<the +15% commit>" in first for code, first in runs)
    print(f"bisect, 8 commits, +15% at the 5th, machine +-5% per session: {named} of {len(runs)}")
    for code, first in runs:
        print(f"  exit {code}  {first}")


if __name__ == "__main__":
    main()
