"""``benchmark-agent export`` / ``import``: a run round-trips into an empty data directory and
serves there as a baseline named by its commit; a hostile or broken file is refused, naming
the file and the field, and writes nothing."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from benchhelpers import git

from pytest_benchmark_agent.cli.main import main
from pytest_benchmark_agent.records.portable import FORMAT, MAX_RUN_ID
from pytest_benchmark_agent.records.reader import load_yaml
from pytest_benchmark_agent.records.record import load_run
from pytest_benchmark_agent.records.store import runs_in

SECRET = "hunter2-do-not-leak"
BENCH = """\
name: portable
hypothesis: the cost stays at 100
replicates: 5
env_vars: [BENCH_API_TOKEN]
stages:
  - name: measure
    kind: measure
    cmd: echo cost=$(cat cost.txt)
    metrics_from: {stdout: true, fields: [cost]}
metrics:
  cost: {direction: lower, primary: true}
"""


def bench(repo: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "BENCHMARK_HOME"}
    env["BENCH_API_TOKEN"] = SECRET
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--bench",
            "bench.yaml",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "--bench-home",
            str(home),
            *args,
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A git repository holding the benchmark, one run of it, and that run exported."""
    repo = tmp_path_factory.mktemp("portable") / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    (repo / "bench.yaml").write_text(BENCH)
    (repo / "cost.txt").write_text("100\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "A")
    home = repo.parent / "home"
    done = bench(repo, home)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = runs_in(home)[-1]
    exported = repo.parent / "run.json"
    assert main(["--home", str(home), "export", run_dir.name[:24], "-o", str(exported)]) == 0
    return {
        "repo": repo,
        "home": home,
        "run_dir": run_dir,
        "file": exported,
        "sha": git(repo, "rev-parse", "HEAD"),
    }


def document(project: dict[str, Any]) -> dict[str, Any]:
    return json.loads(project["file"].read_text())


def import_(file: Path, home: Path, *more: str) -> int:
    return main(["import", str(file), "--home", str(home), *more])


def written(tmp: Path, name: str, doc: Any) -> Path:
    path = tmp / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def test_the_export_holds_the_record_config_fingerprints_and_samples(project) -> None:
    doc = document(project)
    run_dir = project["run_dir"]
    assert doc["format"] == FORMAT and doc["schema_version"] == 1
    assert doc["run_id"] == doc["record"]["run_id"] == run_dir.name
    assert doc["config"]["config"]["name"] == "portable"
    assert doc["config"]["fingerprint"]["code_identity"]["commit"] == project["sha"]
    assert [t["metrics"]["cost"] for t in doc["trials"]] == [100] * 5
    assert doc["index"]["code"]["commit"] == project["sha"]
    assert doc["report"].startswith("# portable")
    assert SECRET not in project["file"].read_text()  # redacted when recorded, and it stays so
    assert "<redacted>" in json.dumps(doc["config"]["fingerprint"]["vars"])


def test_export_to_standard_output(project, capsys) -> None:
    assert main(["--home", str(project["home"]), "export", "latest", "-o", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == project["run_dir"].name


def test_import_round_trips_and_serves_as_the_baseline_of_its_commit(
    project, tmp_path, capsys
) -> None:
    home = tmp_path / "empty-home"
    assert import_(project["file"], home) == 0
    assert f"imported {project['run_dir'].name}" in capsys.readouterr().out
    original, imported = project["run_dir"], home / "runs" / project["run_dir"].name
    assert load_run(imported).replace(dir=None) == load_run(original).replace(dir=None)
    assert load_yaml(imported / "config.yaml") == load_yaml(original / "config.yaml")
    assert (imported / "trials.jsonl").read_text().count("\n") == 5
    entry = json.loads((imported / "index.json").read_text())
    assert entry["code"]["commit"] == project["sha"] and entry["code"]["dirty"] is False
    kept = json.loads((original / "index.json").read_text())
    for key in ("name", "state", "tag", "counts", "config_hash", "comparison_key", "code"):
        assert entry[key] == kept[key], key
    assert imported.name in (home / "results_index.md").read_text()
    assert [p.name for p in runs_in(home)] == [imported.name]
    assert not list((home / ".imports").iterdir())  # no staging folder left behind

    # The same file again changes nothing; compare reads the imported run.
    assert import_(project["file"], home) == 0
    assert "already present" in capsys.readouterr().out
    assert main(["--home", str(home), "compare", imported.name, imported.name]) == 0
    assert "`cost`" in capsys.readouterr().out

    # A run of the next commit in that home finds it by main's sha.
    (project["repo"] / "README.md").write_text("docs only\n")
    git(project["repo"], "add", "README.md")
    git(project["repo"], "commit", "-q", "-m", "C")
    done = bench(
        project["repo"],
        home,
        "--bench-baseline",
        project["sha"],
        "--bench-fail-on=regression,unjudged",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    baseline = load_run(runs_in(home)[-1]).baseline
    assert baseline is not None and baseline.run_id == imported.name
    assert baseline.gate is not None and baseline.gate.outcome == "passed"
    assert baseline.code["baseline"] == project["sha"][:7]


def test_the_code_block_is_built_from_the_fingerprint_when_the_export_lacks_it(
    project, tmp_path
) -> None:
    doc = document(project)
    doc["index"] = None
    home = tmp_path / "home"
    assert import_(written(tmp_path, "no-index.json", doc), home) == 0
    entry = json.loads((home / "runs" / doc["run_id"] / "index.json").read_text())
    assert entry["code"] == document(project)["index"]["code"]


@pytest.mark.parametrize(
    "run_id",
    [
        "../escaped",
        "/abs/path",
        "a/b",
        "nul\x00byte",
        "..",
        ".hidden",
        "",
        "x" * (MAX_RUN_ID + 1),
        42,
        None,
    ],
)
def test_a_run_id_that_would_leave_the_home_is_refused(project, tmp_path, capsys, run_id) -> None:
    doc = document(project)
    doc["run_id"] = doc["record"]["run_id"] = doc["config"]["run_id"] = run_id
    file = written(tmp_path, "hostile.json", doc)
    home = tmp_path / "home"
    assert import_(file, home) == 2
    err = capsys.readouterr().err
    assert str(file) in err and "run_id:" in err, err
    assert not (home / "runs").exists() and not (tmp_path / "escaped").exists()


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for key in parents:
        doc = doc[int(key)] if isinstance(doc, list) else doc[key]
    if value is KeyError:
        del doc[last]
    else:
        doc[last] = value


@pytest.mark.parametrize(
    ("path", "value", "said"),
    [
        ("format", "something-else", "format: is 'something-else'"),
        ("schema_version", 99, "schema_version: is 99, this version reads 1; upgrade"),
        ("schema_version", "1", "schema_version: is '1', expected an integer"),
        ("record", KeyError, "record: expected an object, found null (missing)"),
        ("record.run_id", "another-run", "record.run_id: is 'another-run'"),
        ("record.tag", 7, "record.tag: expected text, found the number 7"),
        ("config.fingerprint", [], "config.fingerprint: expected an object, found a list"),
        (
            "config.config.metrics",
            {"cost": {"direction": "sideways"}},
            "config.config: the frozen config does not validate",
        ),
        ("trials", {"0": 1}, "trials: expected a list"),
        ("trials.0.metrics", "100", "trials[0].metrics: expected an object, found text '100'"),
        ("trials.1.status", None, "trials[1].status: expected text, found null"),
    ],
)
def test_a_malformed_file_names_the_field(project, tmp_path, capsys, path, value, said) -> None:
    doc = copy.deepcopy(document(project))
    _set(doc, path, value)
    file = written(tmp_path, "bad.json", doc)
    assert import_(file, tmp_path / "home") == 2
    err = capsys.readouterr().err
    assert f"{file}: {said}" in err, err
    assert not (tmp_path / "home" / "runs").exists()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "not valid JSON"),
        ("[1, 2]", "expected a JSON object, found a list"),
        (b"\xff\xfe{}", "not UTF-8 text"),
    ],
)
def test_a_file_that_is_no_export_is_refused(tmp_path, capsys, text, said) -> None:
    file = tmp_path / "junk.json"
    file.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert import_(file, tmp_path / "home") == 2
    assert f"{file}: {said}" in capsys.readouterr().err


def test_a_truncated_download_is_refused_without_a_traceback(project, tmp_path) -> None:
    text = project["file"].read_text()
    file = written(tmp_path, "cut.json", text[: len(text) // 2])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_benchmark_agent.cli.main",
            "import",
            str(file),
            "--home",
            str(tmp_path / "home"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert f"{file}: not valid JSON" in done.stderr and "truncated download" in done.stderr
    assert "Traceback" not in done.stderr
    missing = tmp_path / "absent.json"
    assert import_(missing, tmp_path / "home") == 2


def test_an_existing_run_is_replaced_only_with_force(project, tmp_path, capsys) -> None:
    home = tmp_path / "home"
    assert import_(project["file"], home) == 0
    doc = document(project)
    doc["record"]["tag"] = "QUALIFIED"
    changed = written(tmp_path, "changed.json", doc)
    assert import_(changed, home) == 2
    assert "already in" in capsys.readouterr().err
    run_dir = home / "runs" / doc["run_id"]
    assert load_run(run_dir).tag == "EXPLORATORY"
    assert import_(changed, home, "--force") == 0
    assert f"replaced {doc['run_id']}" in capsys.readouterr().out
    assert load_run(run_dir).tag == "QUALIFIED"
    assert json.loads((run_dir / "index.json").read_text())["tag"] == "QUALIFIED"
    assert "## QUALIFIED (1)" in (home / "results_index.md").read_text()
    assert [p.name for p in runs_in(home)] == [doc["run_id"]]
    assert not list((home / ".imports").iterdir())
