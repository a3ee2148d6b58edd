"""A real remote worker: ``sshd`` on 127.0.0.1 with a throwaway key, a second user whose home
differs, and ``--tx ssh=USER@127.0.0.1//python=...``. The benchmark's checkout is prepared on
the "remote" side by the test (as docs/benchmark/DISTRIBUTED.md tells users to), its data home
is the remote user's own, and every record reaches the controller through xdist.

The second user shares root's uid: the interpreter here lives under /root (mode 0700), which
another uid could not run; its home, working directory and data home are its own. Skipped,
with the reason, where sshd cannot start (not installed, not root, no loopback sockets).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from benchhelpers import BenchProject
from test_distributed import distributed_bench

pytest.importorskip("xdist")

USER = "benchremote"
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(ssh spec prefix, the remote user's home) for a live sshd; skips where none can run."""
    if os.geteuid() != 0:
        pytest.skip("starting sshd and adding a user needs root")
    if not os.access(SSHD, os.X_OK):
        pytest.skip("no sshd here (Debian: apt-get install openssh-server; .ci/run does)")
    if shutil.which("useradd") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("no useradd or ssh-keygen here")
    keys, home = tmp_path / "keys", tmp_path / "remote-home"
    keys.mkdir()
    home.mkdir()
    for name in ("host", "client"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / name)], check=True
        )
    (keys / "authorized_keys").write_text((keys / "client.pub").read_text())
    # -f: the uid is root's, always "in use"; a killed earlier run may have left the user
    subprocess.run(["userdel", "-f", USER], capture_output=True)
    created = subprocess.run(  # -p '*': no password, but not a locked account (sshd refuses one)
        ["useradd", "-o", "-u", "0", "-g", "0", "-M", "-d", str(home), "-s", "/bin/sh"]
        + ["-p", "*", USER],
        capture_output=True,
        text=True,
    )
    if created.returncode != 0:
        pytest.skip(f"cannot add user {USER}: {created.stderr.strip()}")
    port = _free_port()
    (keys / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {keys / 'host'}\n"
        f"AuthorizedKeysFile {keys / 'authorized_keys'}\nPidFile {keys / 'sshd.pid'}\n"
        f"AllowUsers {USER}\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
    server = subprocess.Popen(
        [SSHD, "-D", "-E", str(keys / "sshd.log"), "-f", str(keys / "sshd_config")]
    )
    client = keys / "ssh_config"
    client.write_text(
        f"Host 127.0.0.1\n  Port {port}\n  IdentityFile {keys / 'client'}\n  BatchMode yes\n"
        "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
    )
    try:
        for _ in range(100):  # a count bound: up to ~10 s for sshd to answer
            probe = subprocess.run(
                ["ssh", "-F", str(client), f"{USER}@127.0.0.1", "echo $HOME"],
                capture_output=True,
                text=True,
            )
            if probe.returncode == 0 or server.poll() is not None:
                break
            time.sleep(0.1)
        if probe.returncode != 0:
            server.kill()
            server.wait()
            log = keys / "sshd.log"
            why = (log.read_text().strip() if log.exists() else "") or probe.stderr.strip()
            pytest.skip(f"sshd could not start or take a login here: {why}")
        assert probe.stdout.strip() == str(home)
        yield f"ssh={USER}@127.0.0.1//ssh_config={client}", home
    finally:
        if server.poll() is None:
            server.terminate()
            server.wait()
        subprocess.run(["userdel", "-f", USER], capture_output=True)


def test_a_worker_over_ssh_sends_its_records_to_the_controller(
    project: BenchProject, remote: tuple[str, Path]
) -> None:
    spec, home = remote
    project.bench(distributed_bench())
    checkout = home / "checkout"  # the remote checkout, prepared as a user would
    shutil.copytree(project.path, checkout, ignore=shutil.ignore_patterns("benchmark_data"))
    result = project.run(
        "--dist",
        "load",
        "--tx",
        f"{spec}//python={sys.executable}//chdir={checkout}//env:BENCH_HOST_ID=remote",
        "--tx",
        "popen//env:BENCH_HOST_ID=local",
        "-p",
        "no:benchmark",
        subprocess=True,
    )
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    record = project.results()
    ids = [t["id"] for t in record["trials"]]
    assert len(ids) == 8 and len(set(ids)) == 8
    assert record["state"] == "complete" and record["counts"] == {"passed": 8}
    remote_trials = [t for t in record["trials"] if t["host"] == "remote"]
    assert remote_trials, "the remote worker ran no trial"
    # its preps were built in the remote user's own data home, and say so
    remote_preps = [p for p in record["preps"] if p["host"] == "remote"]
    assert {p["action"] for p in remote_preps} == {"built"}
    assert (checkout / "benchmark_data" / "cache").is_dir()
    remote_run = checkout / "benchmark_data" / "runs" / project.runs()[-1].name
    assert not (remote_run / "results.yaml").exists()  # the controller alone writes records
    assert (project.runs()[-1] / "report.md").is_file()
    assert not any("another environment" in c for c in record["caveats"]), record["caveats"]
