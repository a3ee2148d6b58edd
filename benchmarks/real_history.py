"""A real performance regression as a git history to bisect: mistune's ``markdown()`` call.

**The package.** `mistune <https://pypi.org/project/mistune/>`_, a pure-Python Markdown
renderer with no dependencies. Version 2 rewrote version 1 (0.8.x, one file ``mistune.py``) as
a package; its top-level ``mistune.markdown(text)`` kept its name and meaning (Markdown to HTML,
raw HTML escaped by default) and got about 3 times slower on prose.

**The history.** :func:`build_history` downloads the sdists of 13 consecutive releases
(``RELEASES``: 0.8, 0.8.1 to 0.8.4, 2.0.0a1 to 2.0.0a6, 2.0.0rc1, 2.0.0; PyPI has no other
release between 0.8 and 2.0.0) with ``pip download --no-deps --no-binary :all:`` into a cache
that later calls reuse (default ``root/"sdists"``), unpacks each and commits its tree, oldest
first, to a fresh git repository ``root/"repo"``: one commit a release, its message the
version, fixed dates and identity, so every build with the same python (its path is in
``bench.yaml``'s command) gives the same shas; here 0.8 ``9bef41a42bc1``, 2.0.0a1
``207846c0583f``, 2.0.0 ``8f15298ba98b``. Every commit also holds the same ``bench.yaml``,
``bench_mistune.py`` and ``.gitignore``: the benchmark is fixed, the code varies. Building
takes about 3 s from the cache, about 3 minutes with the 13 downloads.

**What is measured.** ``bench_mistune.py`` puts the checkout (``$BENCH_CHECKOUT``, else its own
folder) first on ``sys.path``, imports ``mistune`` and exits 1 unless the module came from that
checkout (never from site-packages), prints ``BENCH_CODE_FROM <file>``, renders a fixed
generated document of 20.5 kB of prose (30 sections: a heading, three plain paragraphs with one
emphasised word each, a two-line quote) twice untimed, then 15 times, and prints
``markdown_ms=<median CPU milliseconds of one call>``: ``time.process_time``, so a loaded
machine's waiting is not counted, and the import (recompiled in every trial where
``PYTHONDONTWRITEBYTECODE`` is set, as here) is outside the number. A trial is about 0.2 s of
CPU (0.13 s for 0.8, 0.25 s for 2.0.0), 0.5 to 1 s of wall time on this machine.

**Measured here** (2 shared cores, load 10 to 13; ``--measure ROUNDS``: every release's trials
interleaved with the others' in each round, the median of the rounds; the factor against 0.8):

========  ==================  ==================
release   5 rounds: ms (x)    7 rounds: ms (x)
========  ==================  ==================
0.8       3.28  (1.00)        3.44  (1.00)
0.8.1     3.33  (1.01)        3.60  (1.05)
0.8.2     3.42  (1.04)        3.47  (1.01)
0.8.3     3.39  (1.03)        3.58  (1.04)
0.8.4     3.31  (1.01)        3.66  (1.07)
2.0.0a1   9.73  (2.97)        10.85 (3.16)   <- first bad
2.0.0a2   10.00 (3.05)        10.91 (3.17)
2.0.0a3   10.10 (3.08)        11.12 (3.23)
2.0.0a4   10.39 (3.17)        11.02 (3.20)
2.0.0a5   10.15 (3.10)        10.91 (3.17)
2.0.0a6   10.19 (3.11)        10.85 (3.15)
2.0.0rc1  9.99  (3.04)        10.75 (3.12)
2.0.0     10.07 (3.07)        11.10 (3.23)
========  ==================  ==================

The pre-regression releases differ by a few lines each (0.8.4 by 39) and agree within the
machine's noise (up to 7% apart in one pass, in no consistent order). ``benchmark-agent bisect
9bef41a 8f15298 bench.yaml`` named 2.0.0a1 in 107 s (5 steps, each against 0.8 in one session:
2.0.0 x3.02, 2.0.0a2 x3.07, 0.8.3 x1.00 good, 2.0.0a1 x2.96 bad, 0.8.4 x0.98 good); with
``noise_threshold`` 2% an earlier bisect skipped 0.8.3 at x1.06 and still named 2.0.0a1. One
``pytest --bench bench.yaml --bench-against 9bef41a`` at 2.0.0: regressed x2.97 [2.72, 3.17],
13 s.

**Why it is a fair test.** The call, its arguments and the document are the same at every
commit; only the package changes, taken from the commit under test (the script refuses any
other copy). Version 1's default does more than version 2's (tables and footnotes are built in;
version 2 needs plugins for them), so the slowdown is not extra work asked for. The factor
depends on the document, and prose is where it is largest: on the same machine, plain
paragraphs were about 4x slower in 2.0.0a1 than in 0.8.4, quotes 3x, headings 2.3x, lists 1.3x,
text dense with emphasis, code spans and links 1.1x; prose is most of a typical document. The
regression is one release (2.0.0a1, where the rewrite landed) with five releases before it and
seven after, each within noise of its neighbours, so bisect has one commit to find.

    python benchmarks/real_history.py /tmp/mistune-history              # build, print the shas
    python benchmarks/real_history.py /tmp/mistune-history --measure 5  # and measure each

From another script: ``importlib.util.spec_from_file_location("real_history", path)``, then
``module.build_history(root, cache=...)`` (no ``from __future__ import annotations`` here, so
that the dataclass needs no ``sys.modules`` entry when loaded this way).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PACKAGE = "mistune"
RELEASES = [
    "0.8",
    "0.8.1",
    "0.8.2",
    "0.8.3",
    "0.8.4",
    "2.0.0a1",
    "2.0.0a2",
    "2.0.0a3",
    "2.0.0a4",
    "2.0.0a5",
    "2.0.0a6",
    "2.0.0rc1",
    "2.0.0",
]
FIRST_BAD = "2.0.0a1"  # the release that made markdown_ms slower, as measured (table above)
MEASURED_FACTOR = 3.1  # FIRST_BAD's markdown_ms over 0.8's: 2.97 to 3.19 in four passes here
METRIC = "markdown_ms"
SCRIPT = "bench_mistune.py"

MEASURE = '''\
"""Time mistune.markdown() on a fixed document, mistune imported from this checkout only."""

import os
import statistics
import sys
import time
from pathlib import Path

checkout = Path(os.environ.get("BENCH_CHECKOUT") or Path(__file__).resolve().parent).resolve()
sys.path.insert(0, str(checkout))
import mistune  # noqa: E402

origin = Path(mistune.__file__).resolve()
if checkout not in origin.parents:
    sys.exit(f"mistune was imported from {origin}, not from the checkout {checkout}")
print("BENCH_CODE_FROM", origin)


def document(sections=30):
    """Prose, as most of a document is: headings, plain paragraphs, a quote per section."""
    parts = []
    for i in range(sections):
        parts.append(f"## Section {i}\\n\\n")
        for j in range(3):
            parts.append(
                f"Paragraph {j} of section {i} is plain prose, as most of a document is: "
                "sentences that run on for a line or two, with a *word* stressed here and "
                "there, and nothing else for the inline parser to find in them.\\n\\n"
            )
        parts.append(f"> A quoted remark about section {i},\\n> over two lines.\\n\\n")
    return "".join(parts)


text = document()
for _ in range(2):
    html = mistune.markdown(text)
calls = []
for _ in range(15):
    start = time.process_time()
    mistune.markdown(text)
    calls.append(time.process_time() - start)
print("html_chars", len(html), "text_chars", len(text))
print(f"markdown_ms={1000 * statistics.median(calls):.4f}")
'''


@dataclass
class History:
    """The built repository, its commits ``(version, sha)`` oldest first, GOOD (the first
    release), BAD (the last), the first bad commit and its measured factor (``MEASURED_FACTOR``)."""

    repo: Path
    releases: list[tuple[str, str]]
    good: str
    bad: str
    first_bad: str
    factor: float

    def sha(self, version: str) -> str:
        return dict(self.releases)[version]


def bench_file(python: str = sys.executable, **overrides: Any) -> dict[str, Any]:
    """The committed ``bench.yaml``: one configuration, one measure stage, one primary metric
    (``overrides`` replace top-level keys, e.g. ``replicates={"min": 5, "max": 15}``).

    ``noise_threshold`` 5%: two releases of the same speed measured up to 7% apart here (the
    regression is 3x); no ``fail_threshold`` and no ``replicates``: the defaults (5%, and the
    adaptive blocks of ``--bench-against``) are what a bisection of it tries."""
    document = {
        "name": "mistune-markdown",
        "hypothesis": "this release renders the fixed document no slower than the other",
        "stages": [
            {
                "name": "measure",
                "kind": "measure",
                "cmd": f"{python} {SCRIPT}",
                "metrics_from": {"stdout": True, "fields": [METRIC]},
            }
        ],
        "metrics": {
            METRIC: {
                "direction": "lower",
                "primary": True,
                "noise_threshold": 0.05,
            }
        },
    }
    document.update(overrides)
    return document


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """``git -C repo ARGS`` with a throwaway identity and no signing; its stdout, stripped."""
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=real-history"]
        + ["-c", "user.email=real-history@example.invalid", "-c", "commit.gpgsign=false", *args],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return done.stdout.strip()


def sdist(version: str, cache: Path) -> Path:
    """``mistune-VERSION.tar.gz`` in ``cache``, downloaded by pip if it is not there yet."""
    path = cache / f"{PACKAGE}-{version}.tar.gz"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
            + ["--no-binary", ":all:", "--dest", str(cache), f"{PACKAGE}=={version}"],
            capture_output=True,
            text=True,
        )
        if done.returncode or not path.exists():
            raise RuntimeError(
                f"pip download {PACKAGE}=={version} (exit {done.returncode}) left no {path.name}"
                f" in {cache}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )
    return path


def unpack(archive: Path, into: Path) -> None:
    """The sdist's files, without its top folder ``mistune-VERSION/``, into ``into``."""
    with tempfile.TemporaryDirectory() as folder, tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
        (top,) = Path(folder).iterdir()
        for item in top.iterdir():
            shutil.move(str(item), into / item.name)


def build_history(
    root: Path,
    cache: Path | None = None,
    python: str = sys.executable,
    bench: dict[str, Any] | None = None,
) -> History:
    """A fresh repository at ``root/"repo"``: one commit per release of ``RELEASES``, each with
    the same ``bench.yaml`` (``bench``, default :func:`bench_file`), measuring script and
    ``.gitignore``. ``cache`` keeps the sdists between calls (default ``root/"sdists"``)."""
    root = Path(root)
    cache = Path(cache) if cache else root / "sdists"
    archives = [sdist(version, cache) for version in RELEASES]
    repo = root / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    fixed = {
        "bench.yaml": yaml.safe_dump(bench or bench_file(python), sort_keys=False),
        SCRIPT: MEASURE,
        ".gitignore": "__pycache__/\n*.pyc\n",
    }
    releases = []
    for k, (version, archive) in enumerate(zip(RELEASES, archives, strict=True)):
        for item in repo.iterdir():
            if item.name != ".git":
                shutil.rmtree(item) if item.is_dir() else item.unlink()
        unpack(archive, repo)
        for name, text in fixed.items():
            (repo / name).write_text(text)
        git(repo, "add", "-A")
        date = f"2020-01-{k + 1:02d}T12:00:00+0000"
        env = os.environ | {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        git(repo, "commit", "-q", "-m", version, env=env)
        releases.append((version, git(repo, "rev-parse", "HEAD")))
    shas = dict(releases)
    return History(
        repo=repo,
        releases=releases,
        good=releases[0][1],
        bad=releases[-1][1],
        first_bad=shas[FIRST_BAD],
        factor=MEASURED_FACTOR,
    )


def measure(history: History, rounds: int = 5, python: str = sys.executable) -> dict[str, float]:
    """Each release's median ``markdown_ms`` over ``rounds`` trials, the releases interleaved."""
    samples: dict[str, list[float]] = {version: [] for version, _ in history.releases}
    with tempfile.TemporaryDirectory() as folder:
        checkouts = {}
        for version, sha in history.releases:
            checkouts[version] = Path(folder) / version
            git(history.repo, "worktree", "add", "-q", "--detach", str(checkouts[version]), sha)
        try:
            for _ in range(rounds):
                for version, path in checkouts.items():
                    done = subprocess.run(
                        [python, SCRIPT],
                        cwd=path,
                        env=os.environ | {"BENCH_CHECKOUT": str(path)},
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                    line = next(x for x in done.stdout.splitlines() if x.startswith(METRIC))
                    samples[version].append(float(line.split("=", 1)[1]))
        finally:
            for path in checkouts.values():
                git(history.repo, "worktree", "remove", "--force", str(path))
    return {version: statistics.median(values) for version, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="where the repository (root/repo) is built")
    parser.add_argument("--cache", type=Path, help="sdist cache (default root/sdists)")
    parser.add_argument("--measure", type=int, default=0, metavar="ROUNDS")
    args = parser.parse_args()
    start = time.perf_counter()
    history = build_history(args.root, args.cache)
    print(f"built {history.repo} in {time.perf_counter() - start:.1f} s")
    for version, sha in history.releases:
        mark = "  <- first bad" if sha == history.first_bad else ""
        print(f"  {sha[:12]}  {version}{mark}")
    print(f"good {history.good}\nbad  {history.bad}\nfirst bad {history.first_bad}")
    print(f"  bisect: benchmark-agent bisect {history.good[:12]} {history.bad[:12]} bench.yaml")
    if args.measure:
        medians = measure(history, args.measure)
        base = medians[RELEASES[0]]
        for version, value in medians.items():
            print(f"  {version:<9} {METRIC} {value:8.3f}  x{value / base:.2f}")


if __name__ == "__main__":
    main()
