"""The code a run measured: its identity in and out of git (real repositories), what counts as
code, how code differences are classified, and special files that must never hang a session."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from benchhelpers import BenchProject, git, simple_bench

from pytest_benchmark_agent.records.fingerprint import (
    code_label,
    collect_fingerprint,
    compare_fingerprints,
    default_code,
)

#: Long enough for any machine; only a hang reaches it (no timing is asserted).
HANG = 120


pytestmark = pytest.mark.usefixtures("no_gpu")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real repository on branch ``main``: a benchmark folder with its script and file."""
    root = tmp_path / "repo"
    (root / "bench").mkdir(parents=True)
    (root / "bench" / "run.sh").write_text("echo score=1\n")
    (root / "bench" / "bench.yaml").write_text("name: x\n")
    (root / "README.md").write_text("readme\n")
    git(root, "init", "-q")
    git(root, "symbolic-ref", "HEAD", "refs/heads/main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "A")
    return root


def fingerprint(repo: Path) -> dict:
    """As a session takes it: the benchmark's folder, the data home and file excluded."""
    folder = repo / "bench"
    return collect_fingerprint(
        default_code(folder, [], []),
        [],
        origin=folder,
        exclude=[folder / "benchmark_data", folder / "bench.yaml"],
    )


def identity(repo: Path) -> dict:
    return fingerprint(repo)["code_identity"]


def test_a_clean_checkout_is_named_by_its_commit_and_branch(repo):
    head = git(repo, "rev-parse", "HEAD")
    assert identity(repo) == {
        "vcs": "git",
        "commit": head,
        "short": head[:7],
        "branch": "main",
        "dirty": False,
        "diff_hash": None,
    }
    assert code_label(identity(repo)) == head[:7]
    git(repo, "checkout", "-q", "--detach")
    assert identity(repo)["branch"] is None and identity(repo)["commit"] == head


def test_untracked_files_and_pytest_outputs_change_nothing(repo):
    before = fingerprint(repo)
    (repo / "bench" / "notes.txt").write_text("to do\n")
    (repo / "bench" / "out.xml").write_text("<testsuites/>\n")
    (repo / "bench" / "benchmark_data").mkdir()
    (repo / "bench" / "benchmark_data" / "index.json").write_text("{}\n")
    after = fingerprint(repo)
    assert after["code"] == before["code"] and after["code_identity"] == before["code_identity"]


def test_a_tracked_edit_makes_the_tree_dirty_with_a_hash_of_the_diff(repo):
    (repo / "bench" / "bench.yaml").write_text("name: y\n")  # the benchmark file is not code
    assert identity(repo)["dirty"] is False
    script = repo / "bench" / "run.sh"
    script.write_text("echo score=2\n")
    first = identity(repo)
    script.write_text("echo score=3\n")
    second = identity(repo)
    assert first["dirty"] and second["dirty"] and first["diff_hash"] != second["diff_hash"]
    assert code_label(first) == f"{first['short']}+dirty:{first['diff_hash'][:7]}"
    (repo / "README.md").write_text("edited\n")  # outside the folder: still this checkout
    assert identity(repo)["diff_hash"] != second["diff_hash"]
    script.write_text("echo score=1\n")
    (repo / "README.md").write_text("readme\n")
    assert identity(repo)["dirty"] is False


def test_a_commit_changes_the_identity_and_is_a_code_difference(repo):
    before = fingerprint(repo)
    (repo / "bench" / "run.sh").write_text("echo score=2\n")
    git(repo, "commit", "-q", "-am", "B")
    after = fingerprint(repo)
    head = git(repo, "rev-parse", "HEAD")
    assert after["code_identity"]["commit"] == head != before["code_identity"]["commit"]
    assert after["code_identity"]["short"] == head[:7]
    diff = compare_fingerprints(before, after)
    assert diff.comparable and diff.blocking == [] and diff.benign == []
    assert f"code_identity.short: {before['code_identity']['short']} -> {head[:7]}" in diff.code
    assert any(line.startswith(f"code[{repo / 'bench'}].tree: ") for line in diff.code)


def test_every_code_difference_is_code_and_others_still_block(repo):
    base = fingerprint(repo)
    other = copy.deepcopy(base)
    other["code_identity"].update(dirty=True, diff_hash="f00d")
    other["code"][str(repo / "bench")].update(root="/elsewhere", diff_hash="f00d")
    diff = compare_fingerprints(base, other)
    assert diff.comparable and diff.blocking == [] and diff.benign == []
    assert sorted(line.split(":")[0] for line in diff.code) == [
        f"code[{repo / 'bench'}].diff_hash",
        f"code[{repo / 'bench'}].root",
        "code_identity.diff_hash",
        "code_identity.dirty",
    ]
    other["env"]["cpu_model"] = "another CPU"
    diff = compare_fingerprints(base, other)
    assert not diff.comparable and diff.blocking[0].startswith("env.cpu_model: ")
    assert len(diff.code) == 4


def test_a_repository_without_commits_is_unknown_code(tmp_path):
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q")
    (root / "run.sh").write_text("true\n")
    fresh = collect_fingerprint([], [], origin=root)["code_identity"]
    assert (fresh["commit"], fresh["short"], fresh["dirty"]) == (None, None, False)
    git(root, "add", "run.sh")
    added = collect_fingerprint([], [], origin=root)["code_identity"]
    assert added["dirty"] is True and added["diff_hash"]
    assert code_label(added) == "unknown"


def test_outside_git_only_declared_code_counts(tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "stage.py").write_text("print(1)\n")
    (folder / "notes.txt").write_text("stray\n")
    assert default_code(folder, [], []) == []
    nothing = collect_fingerprint([], [], origin=folder)
    assert nothing["code"] == {}
    assert nothing["code_identity"] == {"vcs": None, "content_hash": None}
    assert code_label(nothing["code_identity"]) == "unknown"
    inputs = default_code(folder, [], [folder / "stage.py", folder / "missing.py"])
    assert inputs == [folder / "stage.py"]
    declared = default_code(folder, [folder / "notes.txt"], [folder / "stage.py"])
    assert declared == [folder / "notes.txt"]

    def content() -> dict:
        return collect_fingerprint(inputs, [], origin=folder)["code_identity"]

    first = content()
    assert first["vcs"] is None and code_label(first) == f"content:{first['content_hash'][:7]}"
    (folder / "notes.txt").write_text("more\n")
    (folder / "junit.xml").write_text("<testsuites/>\n")
    assert content() == first
    (folder / "stage.py").write_text("print(2)\n")
    assert content() != first


def test_code_labels_of_records_without_an_identity():
    assert code_label(None) == code_label({}) == "unknown"
    assert (
        code_label({"vcs": "git", "commit": "a" * 40, "dirty": True, "diff_hash": None})
        == "aaaaaaa+dirty"
    )


# -- special files -----------------------------------------------------------------------------


def hash_in_subprocess(folder: Path) -> str:
    """The code identity of ``folder`` computed in a child process, so that a hang fails the
    test (TimeoutExpired) instead of stopping the suite."""
    script = (
        "import sys; from pathlib import Path; "
        "from pytest_benchmark_agent.records.fingerprint import collect_fingerprint; "
        "p = Path(sys.argv[1]); "
        "print(collect_fingerprint([p], [], origin=p)['code_identity']['content_hash'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(folder)],
        capture_output=True,
        text=True,
        timeout=HANG,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def special(tmp_path: Path) -> Path:
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "run.sh").write_text("true\n")
    return folder


def test_a_fifo_counts_by_name_and_type_and_never_blocks(special):
    plain = hash_in_subprocess(special)
    os.mkfifo(special / "pipe")
    with_fifo = hash_in_subprocess(special)
    assert with_fifo != plain
    (special / "pipe").unlink()
    (special / "pipe").write_text("")
    assert hash_in_subprocess(special) not in (plain, with_fifo)


def test_a_link_to_dev_zero_counts_by_name_and_type(special):
    plain = hash_in_subprocess(special)
    (special / "zero").symlink_to("/dev/zero")
    os.mkfifo(special / "pipe")
    (special / "pipe-link").symlink_to(special / "pipe")
    linked = hash_in_subprocess(special)
    assert linked != plain
    (special / "zero").unlink()
    (special / "zero").symlink_to("/dev/null")  # another device of one type: the same code
    assert hash_in_subprocess(special) == linked
    (special / "zero").unlink()
    (special / "zero").write_text("")
    assert hash_in_subprocess(special) != linked


def test_a_link_to_a_regular_file_counts_by_its_content(special):
    target = special.parent / "shared.sh"
    target.write_text("echo 1\n")
    (special / "shared.sh").symlink_to(target)
    first = hash_in_subprocess(special)
    target.write_text("echo 2\n")
    assert hash_in_subprocess(special) != first


def test_a_session_beside_a_fifo_finishes(project: BenchProject) -> None:
    """A FIFO in the benchmark's folder and in its declared code: the session neither reads it
    nor waits on it."""
    os.mkfifo(project.path / "stray.fifo")
    (project.path / "code").mkdir()
    os.mkfifo(project.path / "code" / "pipe")
    (project.path / "code" / "zero").symlink_to("/dev/zero")
    project.bench(simple_bench(replicates=1, code=["code"]))
    result = project.pytester.runpytest_subprocess(
        "--bench", "-p", "no:cacheprovider", "-p", "no:randomly", timeout=HANG
    )
    assert result.ret == 0


# -- end to end --------------------------------------------------------------------------------


def recorded_code(project: BenchProject) -> list[tuple[dict, dict]]:
    prints = [
        yaml.safe_load((run / "config.yaml").read_text())["fingerprint"] for run in project.runs()
    ]
    return [(fp["code"], fp["code_identity"]) for fp in prints]


def test_stray_files_and_junitxml_outside_git_leave_the_code_alone(project: BenchProject):
    document = simple_bench(replicates=1)
    document["stages"][0]["cmd"] = "echo {size} > {data}"
    document["stages"][1]["inputs"] = ["helper.sh"]
    project.write("helper.sh", "true\n")
    project.bench(document)
    assert project.run().ret == 0
    project.write("notes.txt", "stray\n")
    assert project.run("--junitxml=out.xml").ret == 0
    assert (project.path / "out.xml").exists()
    assert project.run().ret == 0
    first, second, third = recorded_code(project)
    assert first == second == third
    assert list(first[0]) == [str(project.path / "helper.sh")]
    assert first[1]["vcs"] is None and first[1]["content_hash"]


def test_a_session_in_git_records_the_commit_and_ignores_untracked_files(
    project: BenchProject,
) -> None:
    document = simple_bench(replicates=1)
    document["stages"][0]["cmd"] = "echo {size} > {data}"
    project.bench(document)
    project.write(".gitignore", "benchmark_data/\n")
    git(project.path, "init", "-q")
    git(project.path, "add", ".")
    git(project.path, "commit", "-q", "-m", "A")
    assert project.run().ret == 0
    project.write("notes.txt", "stray\n")
    assert project.run("--junitxml=out.xml").ret == 0
    first, second = recorded_code(project)
    assert first == second
    head = git(project.path, "rev-parse", "HEAD")
    assert first[1]["commit"] == head and first[1]["dirty"] is False
