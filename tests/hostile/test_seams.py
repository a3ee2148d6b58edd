"""Issue 37: each class of hostile input closed at one seam, so no new path can miss it.

Every case runs real ``pytest --bench`` sessions and ``benchmark-agent`` verbs in a folder of
its own, with its own ``$HOME`` and ``$TMPDIR`` (:func:`hostilehelpers.private_env`), and
asserts the invariants of tests/hostile: a clean exit code, no traceback, nothing written
outside the data home (``$HOME`` and ``$TMPDIR`` included), no secret in any file or on the
terminal, every journalled trial in the record. docs/benchmark/RELIABILITY.md lists the cases.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hostilehelpers import (
    CLEAN_EXITS,
    assert_clean_exit,
    assert_no_raw,
    assert_nothing_outside,
    assert_trials_on_disk,
    private_env,
    snapshot,
    tiny_bench,
)

from pytest_benchmark_agent.util.fsutil import acquire_lock, release_lock

SECRET = "Zq7-seam-s3cret-Value"
#: What a stage or a label may hold that no human-facing output may show raw.
ESC, BIDI = "\x1b", "\u202e"


class Folder:
    """A benchmark folder with its data home, private $HOME/$TMPDIR and a snapshot of it."""

    def __init__(self, root: Path, document: dict[str, Any] | None = None, **env: str) -> None:
        self.root = root
        self.home = root / "home"
        self.env = private_env(root, **env)
        if document is not None:
            self.bench(document)
        self.before = snapshot(root)

    def bench(self, document: dict[str, Any]) -> None:
        (self.root / "bench.yaml").write_text(yaml.safe_dump(document, allow_unicode=True))

    def session(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "--bench", "-p", "no:cacheprovider"]
            + ["-p", "no:randomly", "--bench-home", str(self.home), "bench.yaml", *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def agent(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["benchmark-agent", "--home", str(self.home), *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def runs(self) -> list[Path]:
        folder = self.home / "runs"
        return sorted(folder.iterdir()) if folder.is_dir() else []

    def checked(self, result: Any, allowed: Any = CLEAN_EXITS, secret: str = SECRET) -> str:
        """The invariants after one session or verb; its output."""
        text = assert_clean_exit(result, allowed)
        assert secret not in text, "a secret reached the terminal"
        assert_nothing_outside(self.home, self.before, self.root)
        for folder, _, files in os.walk(self.root):
            for name in files:
                path = Path(folder, name)
                if path.is_symlink() or not path.is_file():
                    continue
                assert secret.encode() not in path.read_bytes(), f"the secret is in {path}"
        for run_dir in self.runs():
            if (run_dir / "results.yaml").is_file():
                assert_trials_on_disk(run_dir)
        return text


def _measure(cmd: str, **overrides: Any) -> dict[str, Any]:
    """:func:`tiny_bench` whose measure stage runs ``cmd`` (it prints ``score=...``; the
    treatment is passed in a comment, so the two treatments are a real comparison)."""
    document = tiny_bench(**overrides)
    document["stages"][1]["cmd"] = f"{cmd} # {{mode}}"
    return document


# -- 1. a record is never overwritten or mixed ------------------------------------------------


def test_a_run_id_given_twice_is_refused_and_the_first_record_kept(tmp_path: Path) -> None:
    folder = Folder(tmp_path, tiny_bench())
    assert folder.checked(folder.session("--bench-run-id", "fixed-1"), {0})
    run_dir = folder.home / "runs" / "fixed-1"
    kept = {name: (run_dir / name).read_bytes() for name in ("results.yaml", "trials.jsonl")}
    again = folder.checked(folder.session("--bench-run-id", "fixed-1"), {2})
    assert "run fixed-1 already exists" in again and "--bench-run-id" in again
    assert {name: (run_dir / name).read_bytes() for name in kept} == kept


def test_two_sessions_with_one_run_id_at_once_make_one_record(tmp_path: Path) -> None:
    folder = Folder(tmp_path, _measure("sleep 1; echo score=$(( {size} * 2 ))"))
    command = [sys.executable, "-m", "pytest", "--bench", "-p", "no:cacheprovider"]
    command += ["--bench-home", str(folder.home), "--bench-run-id", "same", "bench.yaml"]
    both = [
        subprocess.Popen(
            command, cwd=tmp_path, env=folder.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=300)[0].decode() for process in both]
    codes = sorted(process.returncode for process in both)
    assert codes == [0, 2], outputs
    assert any("run same already exists" in text for text in outputs)
    journal = (folder.home / "runs" / "same" / "trials.jsonl").read_text().splitlines()
    assert len(journal) == 2  # one session's two trials, not a mix of four
    folder.checked(subprocess.CompletedProcess([], 0, "", ""))


def test_a_claim_lost_between_collection_and_start_runs_nothing(tmp_path: Path) -> None:
    """The other session claims the id after this one collected: the atomic claim refuses."""
    folder = Folder(tmp_path, tiny_bench())
    (tmp_path / "conftest.py").write_text(
        "from pathlib import Path\n\n"
        "def pytest_collection_finish(session):\n"
        "    Path('home/runs/raced/owners').mkdir(parents=True)\n"
    )
    folder.before = snapshot(tmp_path)
    text = folder.checked(folder.session("--bench-run-id", "raced"), {2})
    assert "run raced already exists" in text
    assert sorted(p.name for p in (folder.home / "runs" / "raced").iterdir()) == ["owners"]


def test_tune_resume_of_a_tune_still_running_is_refused(tmp_path: Path) -> None:
    folder = Folder(tmp_path)
    document = tiny_bench(params={"x": 1}, replicates=5)
    document.pop("treatments"), document.pop("treatment_variable")
    document["stages"][1]["cmd"] = "echo score={x}"
    document.update(
        search_space={"x": [1, 2]}, objective={"metric": "score", "direction": "higher"}
    )
    document["stages"] = document["stages"][1:]
    document["stages"][0].pop("needs")
    folder.bench(document)
    folder.before = snapshot(tmp_path)
    assert folder.checked(folder.agent("tune", "bench.yaml", "--strategy", "grid"), {0, 1})
    (tune_dir,) = [d for d in folder.runs() if (d / ".tune.lock").exists()]
    lock = acquire_lock(tune_dir / ".tune.lock", wait=False)  # its owner, alive
    assert lock is not None
    record = (tune_dir / "results.yaml").read_bytes()
    try:
        text = folder.checked(folder.agent("tune", "bench.yaml", "--resume", tune_dir.name), {2})
    finally:
        release_lock(lock)
    assert "that tune is running now" in text
    assert (tune_dir / "results.yaml").read_bytes() == record


def test_import_of_a_record_still_running_is_refused(tmp_path: Path) -> None:
    folder = Folder(tmp_path, tiny_bench())
    folder.checked(folder.session(), {0})
    exported = json.loads(folder.agent("export", "latest").stdout)
    exported["record"]["state"] = "running"
    other = Folder(tmp_path / "other")
    (other.root / "running.json").write_text(json.dumps(exported))
    other.before = snapshot(other.root)
    text = other.checked(other.agent("import", "running.json"), {2})
    assert "record.state: is 'running'" in text and not other.runs()


# -- 2. one redaction seam for every byte that leaves a stage -------------------------------------


def test_an_env_vars_secret_echoed_by_a_failing_stage_is_redacted(tmp_path: Path) -> None:
    document = _measure("echo token is $SEAM_API_TOKEN >&2; exit 3", env_vars=["SEAM_API_TOKEN"])
    folder = Folder(tmp_path, document, SEAM_API_TOKEN=SECRET)
    text = folder.checked(folder.session("-s"), {1})
    assert "token is <redacted>" in text
    for verb in (("export", "latest"), ("export", "latest", "--format", "csv"), ("history",)):
        folder.checked(folder.agent(*verb), {0})


def test_a_secret_param_printed_as_an_equal_metric_is_redacted_everywhere(tmp_path: Path) -> None:
    document = tiny_bench(params={"api_key": "set-on-the-command-line", "size": 3})
    document.pop("treatment_variable"), document.pop("treatments")
    document["stages"][1]["cmd"] = "echo score=1; echo tag={api_key}"
    document["stages"][0]["cmd"] = "echo 1 > {data}"
    document["stages"][1]["metrics_from"]["fields"] = ["score", "tag"]
    document["metrics"]["tag"] = {"direction": "equal"}
    document["replicates"] = 2
    folder = Folder(tmp_path, document)
    text = folder.checked(folder.session("-s", f"--bench-set=api_key={SECRET}"), {0})
    assert "tag" in text and "<redacted>" in text


@pytest.mark.parametrize("target", ["/etc/passwd", "/usr", "/"])
def test_a_metrics_file_resolving_outside_the_stage_is_refused_unread(
    tmp_path: Path, target: str
) -> None:
    document = _measure(f"ln -sfn {target} {{out}}/m.txt")
    document["stages"][1]["metrics_from"] = {"file": "{out}/m.txt", "fields": ["score"]}
    folder = Folder(tmp_path, document)
    text = folder.checked(folder.session(), {1}, secret="root:x:0")
    assert "resolves to" in text and "outside the stage's folders" in text


def test_an_artifact_linking_outside_its_cache_folder_is_refused_unhashed(tmp_path: Path) -> None:
    document = tiny_bench()
    document["stages"][0]["cmd"] = "ln -s /usr {data}"
    folder = Folder(tmp_path, document)
    text = folder.checked(folder.session(), {1})
    assert "left its artifact 'data' resolving to /usr, outside its cache folder" in text
    assert not list((folder.home / "cache").rglob("manifest.json"))


# -- 3. one bounded reader for every file the tool did not just write ---------------------------

DEEP = "[" * 100_000


@pytest.mark.parametrize(
    "damage", ["index.json", "trials.jsonl", "heartbeat.json", "owners/1-1.json"]
)
def test_a_deeply_nested_file_breaks_no_verb_and_no_later_session(
    tmp_path: Path, damage: str
) -> None:
    folder = Folder(tmp_path, tiny_bench())
    folder.checked(folder.session(), {0})
    folder.checked(folder.session(), {0})
    earlier = folder.runs()[0]
    path = earlier / damage
    path.parent.mkdir(exist_ok=True)
    with path.open("a" if damage == "trials.jsonl" else "w") as file:
        file.write(DEEP + "\n")
    latest = folder.runs()[-1].name
    for verb in (
        ("history",),
        ("status",),
        ("status", earlier.name),
        ("compare", earlier.name, latest),
        ("export", earlier.name),
        ("clean", "--dry-run"),
    ):
        folder.checked(folder.agent(*verb))
    assert folder.checked(folder.session(), {0})


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_import_of_a_fifo_or_dev_zero_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    folder = Folder(tmp_path)
    path = tmp_path / "export.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    folder.before = snapshot(tmp_path)
    text = folder.checked(folder.agent("import", str(path), timeout=60), {2})
    assert "not a file" in text


# -- 4. one printer for text from outside ---------------------------------------------------------

HOSTILE_LABELS = [f"a{ESC}]0;title\a{ESC}[2J", f"b{BIDI}gnp.exe", 'c"><script>x</script>', "d<!--"]


def test_escape_sequences_a_stage_prints_reach_no_terminal_raw(tmp_path: Path) -> None:
    noise = r"printf '\033]0;owned\007\033[2J\033[10A\033]8;;http://x\033\\link\033]8;;\033\\\n'"
    document = _measure(f"{noise}; {noise} >&2; exit 1")
    folder = Folder(tmp_path, document)
    for args in ((), ("-s",)):
        text = folder.checked(folder.session(*args), {1})
        assert_no_raw(text, [ESC, "\a"], "the terminal")
        assert "\\x1b]0;owned" in text


def test_hostile_labels_are_inert_in_every_human_facing_output(tmp_path: Path) -> None:
    summary = tmp_path / "home" / "step-summary.md"  # GitHub's file: not the engine's writing
    summary.parent.mkdir()
    document = tiny_bench(treatments=HOSTILE_LABELS, params={"mode": HOSTILE_LABELS[0], "size": 3})
    document["stages"][1]["cmd"] = "echo score=$(( {size} * 2 )) # {mode}"
    folder = Folder(tmp_path, document, GITHUB_STEP_SUMMARY=str(summary))
    outputs = {"terminal": folder.checked(folder.session(), {0})}
    outputs["analyze"] = folder.checked(folder.agent("analyze", "latest"), {0})
    outputs["history"] = folder.checked(folder.agent("history"), {0})
    run_dir = folder.runs()[-1]
    for name in ("report.md", "report.html"):
        outputs[name] = (run_dir / name).read_text()
    outputs["results_index.md"] = (folder.home / "results_index.md").read_text()
    outputs["step summary"] = summary.read_text()
    for where, text in outputs.items():
        assert_no_raw(text, [ESC, BIDI, "\a"], where)
    for where in ("report.md", "results_index.md", "step summary"):  # a code span is literal
        outside_code = re.sub(r"`[^`\n]*`", "", outputs[where])
        assert_no_raw(outside_code, ["<script>", "<!--"], where)
    assert "<script>x" not in outputs["report.html"]
    assert "&lt;script&gt;x" in outputs["report.html"]


# -- 5. what ran is what is recorded ------------------------------------------------------------


def _with_size(value: Any) -> dict[str, Any]:
    return tiny_bench(params={"mode": "a", "size": value})


def _with_metric(name: str) -> dict[str, Any]:
    document = tiny_bench(metrics={name: {"direction": "higher", "primary": True}})
    document["stages"][1]["metrics_from"]["fields"] = [name]
    return document


@pytest.mark.parametrize(
    ("document", "said"),
    [
        (_with_size({1, 2}), "params.size: is a !!set value"),
        (_with_size(b"hello"), "params.size: is a !!binary value"),
        (_with_size("x" * 140_000), "at most 131072 bytes (128 KiB) in one argument"),
        (_with_metric("sc:ore"), "the metrics parser cannot read this name"),
    ],
    ids=["set", "binary", "128KiB", "metric-name"],
)
def test_what_cannot_run_as_recorded_is_a_gate_one_error(
    tmp_path: Path, document: dict[str, Any], said: str
) -> None:
    folder = Folder(tmp_path, document)
    text = folder.checked(folder.session(), {2})
    assert said in text and not folder.runs()


def test_a_name_refused_for_its_characters_says_which(tmp_path: Path) -> None:
    folder = Folder(tmp_path, tiny_bench(name=f"fts{ESC}merge\tv2"))
    text = folder.checked(folder.session(), {2})
    assert "it holds '\\t', '\\x1b'" in text


# -- 6. small ones ----------------------------------------------------------------------------


def test_ctrl_c_in_a_run_finished_hook_is_the_usual_interrupted_exit(tmp_path: Path) -> None:
    folder = Folder(tmp_path, tiny_bench())
    (tmp_path / "conftest.py").write_text(
        "import os, signal\n\n"
        "def pytest_bench_run_finished(run):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
    )
    folder.before = snapshot(tmp_path)
    text = folder.checked(folder.session(), {2})
    assert "interrupted while run" in text


def test_the_interrupt_banner_names_no_private_class(tmp_path: Path) -> None:
    folder = Folder(tmp_path, _measure("sleep 60; echo score=1"))
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--bench", "-p", "no:cacheprovider"]
        + ["--bench-home", str(folder.home), "bench.yaml"],
        cwd=tmp_path,
        env=folder.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 240
    while not _measuring(folder.home) and time.monotonic() < deadline:
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    output = process.communicate(timeout=120)[0]
    text = folder.checked(subprocess.CompletedProcess([], process.returncode, output, ""), {2})
    assert "KeyboardInterrupt" in text and "_Interrupted" not in text


def _measuring(home: Path) -> bool:
    """Whether a run's heartbeat says its measure stage is running."""
    for beat in home.glob("runs/*/heartbeat.json"):
        try:
            return json.loads(beat.read_text()).get("stage") == "measure"
        except (OSError, ValueError):
            return False
    return False


def test_matplotlib_keeps_its_cache_in_the_data_home(tmp_path: Path) -> None:
    folder = Folder(tmp_path, tiny_bench(replicates=2))
    folder.checked(folder.session(), {0})
    assert not (tmp_path / "user-home" / ".cache").exists()
    assert list((folder.home / "runs").glob("*/plot-score.png"))
    assert (folder.home / ".matplotlib").is_dir()


def test_an_ownerless_run_that_cannot_be_finalized_is_shown_interrupted(tmp_path: Path) -> None:
    folder = Folder(tmp_path, tiny_bench())
    folder.checked(folder.session(), {0})
    run_dir = folder.runs()[-1]
    (run_dir / "index.json").unlink()
    (run_dir / "config.yaml").write_text("config: [not, a, config]\n")  # cannot finalize
    results = yaml.safe_load((run_dir / "results.yaml").read_text())
    (run_dir / "results.yaml").write_text(yaml.safe_dump({**results, "state": "running"}))
    gone = {"host": os.uname().nodename, "boot_id": None, "pid": 1, "start_ticks": -1}
    (run_dir / "owners" / "1--1.json").write_text(json.dumps(gone))
    for owner in (run_dir / "owners").glob("*.json"):
        if owner.name != "1--1.json":
            owner.unlink()
    text = folder.checked(folder.agent("history"), {0})
    assert f"{run_dir.name}  interrupted" in text and f"{run_dir.name}  running" not in text


def test_a_data_home_that_is_a_file_prints_no_report_path(tmp_path: Path) -> None:
    folder = Folder(tmp_path, tiny_bench())
    folder.home.write_text("not a folder\n")
    folder.before = snapshot(tmp_path)
    text = folder.checked(folder.session(), {4})
    assert "is a file, not a folder" in text and "report:" not in text
