"""``benchmark-agent clean`` of the prep cache (issue 22), through real sessions and the real
CLI: by age and by size (least recently used first, a reuse counting as a use), never an entry
whose lock a session holds or one used since a run still in progress began, never a record,
``--dry-run`` removing nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from benchhelpers import BenchProject, simple_bench
from gate2helpers import run_as

from pytest_benchmark_agent.cli.clean import size_arg
from pytest_benchmark_agent.cli.main import main
from pytest_benchmark_agent.records.record import load_run

DAY = 86400.0


def cli(home: Path, capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--home", str(home), *words])
    return code, capsys.readouterr().out


def entries(project: BenchProject) -> dict[str, Path]:
    """The cache's entry folders by the mode their prep wrote (``data`` holds it)."""
    root = project.home / "cache"
    return {
        (folder / "data").read_text().split()[0]: folder
        for folder in sorted(root.iterdir())
        if not folder.name.startswith(".")
    }


def age(folder: Path, days: float) -> None:
    """Make the entry's last use (its manifest's modification time) ``days`` ago."""
    then = time.time() - days * DAY
    os.utime(folder / "manifest.json", (then, then))


def per_mode_prep(**overrides) -> dict:
    """simple_bench with a prep of its own per treatment: one cache entry per mode."""
    document = simple_bench(**overrides)
    document["stages"][0]["cmd"] = "echo {mode} > {data}; echo built >> prep_runs.txt"
    return document


def prep_runs(project: BenchProject) -> int:
    counter = project.path / "prep_runs.txt"
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_clean_removes_entries_last_used_long_ago_and_no_record(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    project.bench(per_mode_prep(replicates=7))
    run_as(project, "r1")
    assert run_as(project, "r2")["tag"] == "RELIABLE"  # r2 reused both entries
    cache = entries(project)
    age(cache["a"], 40)
    age(cache["b"], 3)

    code, out = cli(project.home, capsys, "clean", "--older-than", "30", "--dry-run")
    assert code == 0
    assert f"would remove cache/{cache['a'].name} (" in out and "last used 40.0 days ago" in out
    assert cache["b"].name not in out
    assert "1 cache entry: would free" in out
    assert cache["a"].is_dir()  # a dry run removes nothing

    code, out = cli(project.home, capsys, "clean", "--older-than", "30")
    assert code == 0 and f"removed cache/{cache['a'].name} (" in out
    assert not cache["a"].exists() and (cache["b"] / "manifest.json").is_file()
    for run in ("r1", "r2"):  # every record stays readable, the RELIABLE one too
        assert cli(project.home, capsys, "analyze", run)[0] == 0
        assert (project.home / "runs" / run / "results.yaml").is_file()

    built = prep_runs(project)
    run_as(project, "r3")  # the removed entry is rebuilt when next needed, the other reused
    assert prep_runs(project) == built + 1


def test_max_size_removes_the_least_recently_used_and_a_reuse_is_a_use(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    project.bench(per_mode_prep())
    run_as(project, "r1")
    cache = entries(project)
    age(cache["a"], 10)
    age(cache["b"], 5)  # b is the more recent, until a is reused
    project.bench(per_mode_prep(treatments=["a", "c"]))
    run_as(project, "r2")  # a's entry is reused, c's built
    assert [p.action for p in load_run(project.runs()[-1]).preps] == ["reused", "built"]

    kept = entries(project)  # a and c, the most recently used: exactly what may stay
    two = sum(
        p.lstat().st_size for mode in "ac" for p in kept[mode].rglob("*") if p.is_file()
    )  # (entries differ by a byte or two: a manifest records how long its build took)
    code, out = cli(project.home, capsys, "clean", "--max-size", str(two))
    assert code == 0, out
    assert f"removed cache/{cache['b'].name}" in out and cache["a"].name not in out
    assert (cache["a"] / "manifest.json").is_file() and not cache["b"].exists()
    assert "1 cache entry: freed" in out and len(entries(project)) == 2

    code, out = cli(project.home, capsys, "clean", "--max-size", "1GiB")
    assert code == 0 and "0 cache entries: freed 0 B" in out  # fits: nothing goes


def test_an_entry_whose_lock_a_session_holds_is_kept(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    project.bench(simple_bench())
    run_as(project, "r1")
    (folder,) = entries(project).values()
    age(folder, 40)
    holder = subprocess.Popen(  # what a session does while it checks or builds the entry
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; "
            "from pytest_benchmark_agent.engine.cache import PrepCache; "
            f"lock = PrepCache(Path(sys.argv[1])).lock({folder.name!r}); "
            "print('held', flush=True); sys.stdin.read()",
            str(project.home / "cache"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        code, out = cli(project.home, capsys, "clean", "--older-than", "0")
        assert code == 0
        assert f"kept cache/{folder.name}: a session holds its lock" in out
        assert (folder / "manifest.json").is_file()
    finally:
        holder.communicate("")
    code, out = cli(project.home, capsys, "clean", "--older-than", "0")
    assert f"removed cache/{folder.name}" in out and not folder.exists()


def test_a_running_session_keeps_what_it_uses_and_older_entries_go(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    """While a session is in progress (its prep waiting for a file), an entry used before it
    began goes and the one it is building stays; once it has finished, that one may go too."""
    project.bench(simple_bench())
    run_as(project, "r1")
    (old,) = entries(project).values()
    age(old, 2)
    document = simple_bench(params={"mode": "a", "size": 4})  # another signature
    document["stages"][0]["cmd"] = (
        "while [ ! -f go ]; do sleep 0.05; done; echo {size} > {data}; echo built >> prep_runs.txt"
    )
    project.bench(document)
    env = {**os.environ, "BENCHMARK_HOME": str(project.home)}
    session = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--bench", "-p", "no:cacheprovider", "-q"],
        cwd=project.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        root = project.home / "cache"
        for _ in range(1200):  # until the new entry's folder exists (its prep is building)
            building = [p for p in root.iterdir() if not p.name.startswith(".") and p != old]
            if building or session.poll() is not None:
                break
            time.sleep(0.05)
        assert building, session.communicate()[0]
        code, out = cli(project.home, capsys, "clean", "--older-than", "1")
        assert code == 0
        assert f"removed cache/{old.name}" in out and not old.exists()
        assert building[0].name not in out  # too young for --older-than 1
        code, out = cli(project.home, capsys, "clean", "--older-than", "0", "--dry-run")
        assert f"kept cache/{building[0].name}: used since run " in out
        assert "which is still in progress" in out and "used since run r1 " not in out
    finally:
        (project.path / "go").write_text("")
        output = session.communicate(timeout=300)[0]
    assert session.returncode == 0, output
    code, out = cli(project.home, capsys, "clean", "--older-than", "0")
    assert f"removed cache/{building[0].name}" in out


def test_plain_clean_leaves_the_cache_and_says_how_to_trim_it(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    project.bench(simple_bench())
    run_as(project, "r1")
    (folder,) = entries(project).values()
    age(folder, 400)
    code, out = cli(project.home, capsys, "clean")
    assert code == 0 and "cache: 1 entry, " in out and "--max-size SIZE trims it" in out
    assert folder.is_dir()


def test_max_size_reads_units_and_refuses_what_it_cannot_read() -> None:
    assert size_arg("2GiB") == 2 * 1024**3
    assert size_arg("500M") == 500 * 1024**2 and size_arg("1.5GB") == 1_500_000_000
    assert size_arg("1000") == 1000
    done = subprocess.run(
        [sys.executable, "-m", "pytest_benchmark_agent.cli.main", "clean", "--max-size", "2XB"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "argument --max-size: '2XB' is not a size" in done.stderr
    assert "2GiB" in done.stderr
