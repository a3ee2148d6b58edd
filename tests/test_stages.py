"""run_stage's single wait loop: exit, output, timeout, progress and the memory guard, together.

Real subprocesses throughout. No test bounds a duration; where a stage could hang the loop, the
call runs in a thread and the test checks it came back at all (a hang, not a slowness, fails).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from pytest_benchmark_agent.engine import stages
from pytest_benchmark_agent.engine.invocation import StageInvocation
from pytest_benchmark_agent.engine.stage_output import SPILL_BYTES, StageOutput, StreamRedactor
from pytest_benchmark_agent.engine.stages import StageRun, run_stage
from pytest_benchmark_agent.guards.cgroup import CgroupMemory


def stage(tmp_path: Path, command: str, **options: object) -> StageRun:
    return run_stage(
        StageInvocation(
            "measure",
            command,
            cwd=tmp_path,
            env=dict(os.environ),
            log_dir=tmp_path / "logs",
            **options,
        )
    )  # type: ignore[arg-type]


def test_a_silent_stage_leaves_no_log_files(tmp_path: Path) -> None:
    result = stage(tmp_path, "true")
    assert result.exit_code == 0
    assert not (tmp_path / "logs").exists()
    record = result.as_record()
    assert "stdout" not in record and "stderr" not in record
    assert result.stdout() == ""
    assert result.stderr_tail() == "(stderr was empty)"


def test_output_is_kept_in_files_only_when_written(tmp_path: Path) -> None:
    result = stage(tmp_path, "echo score=3; echo oops >&2; exit 4")
    assert result.exit_code == 4
    assert result.stdout() == "score=3\n"
    assert result.stderr_tail() == "oops"
    record = result.as_record()
    assert Path(record["stdout"]).read_text() == "score=3\n"
    assert Path(record["stderr"]).read_text() == "oops\n"


def test_output_past_the_spill_size_streams_to_its_file(tmp_path: Path) -> None:
    size = 3 * SPILL_BYTES + 123  # more than a pipe holds, so the loop must keep reading
    result = stage(tmp_path, f"{sys.executable} -c \"import sys; sys.stdout.write('x' * {size})\"")
    assert result.exit_code == 0
    assert (tmp_path / "logs" / "stdout.txt").stat().st_size == size
    assert len(result.stdout()) == size


TOKEN = "ghp_" + "a1B2" * 9


def test_a_token_the_stage_prints_never_reaches_its_log_files(tmp_path: Path) -> None:
    result = stage(tmp_path, f"echo key={TOKEN}; echo auth: {TOKEN} >&2; exit 1")
    for name in ("stdout.txt", "stderr.txt"):
        text = (tmp_path / "logs" / name).read_text()
        assert TOKEN not in text and "<redacted>" in text
    assert result.stdout() == "key=<redacted>\n"


def test_a_token_split_between_two_reads_is_still_redacted() -> None:
    redactor = StreamRedactor()
    written = redactor.feed(b"first line\nkey=" + TOKEN[:10].encode())
    written += redactor.feed(TOKEN[10:].encode() + b" and more")
    written += redactor.flush()
    assert written == b"first line\nkey=<redacted> and more"


def test_a_long_line_is_redacted_in_parts_cut_at_a_blank() -> None:
    redactor = StreamRedactor()
    padding = b"x" * 100_000
    written = redactor.feed(padding + b" " + TOKEN[:10].encode())
    assert written == padding + b" "  # the part after the last blank is held back
    written += redactor.feed(TOKEN[10:].encode()) + redactor.flush()
    assert written == padding + b" <redacted>"


def test_bytes_that_are_not_utf8_pass_through_unchanged() -> None:
    redactor = StreamRedactor()
    data = b"\xff\xfe raw \x80 bytes\n" + f"{TOKEN}\n".encode()
    assert redactor.feed(data) + redactor.flush() == b"\xff\xfe raw \x80 bytes\n<redacted>\n"


def test_output_buffer_spills_once_and_keeps_order(tmp_path: Path) -> None:
    output = StageOutput(tmp_path / "deep" / "out.txt", spill_bytes=4)
    for chunk in (b"a\n", b"cd\n", b"ef", b"g"):
        output.write(chunk)
    assert output.written  # past 4 bytes it went to the file (its folder made on the way)
    output.close()  # the incomplete last line, held back for redaction, is written too
    assert output.text() == "a\ncd\nefg"


def test_a_daemon_holding_the_pipes_does_not_hold_the_stage(tmp_path: Path) -> None:
    """A process that left the stage's group keeps its stdout open: the stage still ends."""
    pidfile = tmp_path / "daemon.pid"
    results: list[StageRun] = []
    worker = threading.Thread(
        target=lambda: results.append(
            stage(
                tmp_path,
                f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' & "
                f"while [ ! -s {pidfile} ]; do sleep 0.01; done; echo done",
            )
        )
    )
    worker.start()
    worker.join(120)
    try:
        assert results, "run_stage waited for a writer outside the stage's process group"
        assert results[0].stdout() == "done\n"
    finally:
        os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_timeout_stops_the_whole_group(tmp_path: Path) -> None:
    result = stage(tmp_path, "sleep 300 & sleep 300", timeout_s=0.2)
    assert result.timed_out
    assert result.exit_code == -signal.SIGKILL


def test_progress_is_reported_while_a_stage_runs(tmp_path: Path) -> None:
    calls: list[tuple[float, float]] = []
    result = stage(
        tmp_path, "sleep 0.5", progress=lambda *args: calls.append(args), progress_every_s=0.05
    )
    assert result.exit_code == 0
    assert calls, "no progress call during a stage ten periods long"
    assert [elapsed for elapsed, _ in calls] == sorted(elapsed for elapsed, _ in calls)


def test_the_guard_samples_in_the_loop_and_kills_a_breach(tmp_path: Path) -> None:
    grow = (
        f'{sys.executable} -c "import time\nblocks = []\nfor _ in range(64):\n'
        f"    blocks.append(b'x' * (8 << 20))\n    time.sleep(0.02)\ntime.sleep(60)\""
    )
    result = stage(tmp_path, grow, mem_ceiling_mb=96, cgroup=CgroupMemory.of_self())
    assert result.exit_code == -signal.SIGKILL
    assert [event["reason"] for event in result.guard_events] == ["stage tree over its ceiling"]
    assert result.guard_samples > 1
    assert result.peak_rss_mb > 96


def test_a_short_stage_gets_a_sample_of_its_leader(tmp_path: Path) -> None:
    result = stage(tmp_path, "true")
    assert result.guard_samples >= 1


def test_without_pidfd_a_waiting_thread_reports_the_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(pid: int) -> int:
        raise OSError("pidfd_open refused")

    monkeypatch.setattr(stages.os, "pidfd_open", refused)
    result = stage(tmp_path, "echo out; sleep 0.1; exit 3")
    assert (result.exit_code, result.stdout()) == (3, "out\n")
    assert result.cpu_s >= 0


def test_interrupt_while_waiting_stops_the_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pidfile = tmp_path / "stage.pid"

    def interrupt(self: object, *args: object) -> bool:
        while not pidfile.exists() or not pidfile.read_text().strip():
            pass
        raise KeyboardInterrupt

    monkeypatch.setattr(stages._Waiter, "wait", interrupt)
    with pytest.raises(KeyboardInterrupt):
        stage(tmp_path, f"echo $$ > {pidfile}; sleep 300")
    with pytest.raises(ProcessLookupError):
        os.kill(int(pidfile.read_text()), 0)


def test_a_stage_starts_as_subprocess_would_start_it(tmp_path: Path) -> None:
    """Its folder (physical path), stdin from /dev/null, its own session (the shell leads it),
    SIGPIPE not ignored (Python ignores it), positional parameters as a plain ``sh -c`` has."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    script = (
        'pwd; readlink /proc/self/fd/0; echo "args=$#"; grep SigIgn /proc/self/status; '
        f'{sys.executable} -c "import os; print(os.getsid(0) == os.getppid())"'
    )
    result = run_stage(
        StageInvocation(
            "measure",
            script,
            cwd=tmp_path / "link",
            env=dict(os.environ),
            log_dir=tmp_path / "logs",
        )
    )
    assert result.exit_code == 0, result.stderr_tail()
    folder, stdin, args, ignored, leads = result.stdout().splitlines()
    assert (folder, stdin, args, leads) == (str(real.resolve()), "/dev/null", "args=0", "True")
    assert not int(ignored.split()[1], 16) & (1 << (signal.SIGPIPE - 1))


def test_an_inherited_descriptor_is_not_left_open_in_a_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read, write = os.pipe()
    os.set_inheritable(write, True)  # as a descriptor handed to pytest by its parent is
    monkeypatch.setattr(stages, "_found_inheritable", None)  # as if this process just started
    try:
        result = stage(tmp_path, f"ls /proc/self/fd; test -e /proc/self/fd/{write} && echo LEAKED")
    finally:
        os.close(read)
        os.close(write)
    assert result.exit_code == 1  # the test fails: the descriptor is not there
    assert "LEAKED" not in result.stdout()


def test_a_missing_folder_fails_the_stage_with_the_shells_reason(tmp_path: Path) -> None:
    result = stage(tmp_path / "gone", "echo never")
    assert result.exit_code == 126
    assert "can't cd" in result.stderr_tail() or "No such file" in result.stderr_tail()
    assert result.stdout() == ""


def test_a_peak_a_few_pages_over_the_ceiling_reads_over_it() -> None:
    """A breach's peak is rounded up: 96 MiB + 4 KiB once read 96.0 against a ceiling of 96."""
    from pytest_benchmark_agent.guards.memory import _peak_mb

    mib = 1 << 20
    assert _peak_mb(96 * mib + 4096) > 96
    assert _peak_mb(96 * mib) == 96.0
