"""Fingerprints of real machines and real git repositories, their comparison, and redaction."""

from __future__ import annotations

import copy
import hashlib
import importlib.metadata as metadata
import os
import platform
import re
from pathlib import Path

import pytest
import yaml
from benchhelpers import git
from nvml_double import FakeDevice, FakeNvml

from pytest_benchmark_agent.guards import gpu as nvml
from pytest_benchmark_agent.records.fingerprint import (
    FingerprintError,
    _header,
    _tool_packages,
    _version,
    collect_fingerprint,
    compare_fingerprints,
)
from pytest_benchmark_agent.util.redact import REDACTED, redact_mapping, redact_value, stage_text

FAKE_TOKEN = "tok-4f9a2c-never-in-any-file"
DB_PASSWORD = "hunter2-db-secret"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository with an engine folder under test and an unrelated docs folder."""
    root = tmp_path / "repo"
    (root / "engine").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "engine" / "core.py").write_text("def f():\n    return 1\n")
    (root / "docs" / "notes.md").write_text("notes\n")
    (root / ".gitignore").write_text("build/\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    return root


def code_of(path: Path) -> dict:
    return collect_fingerprint([path], [])["code"][str(path)]


def test_env_section_describes_this_machine(no_gpu):
    env = collect_fingerprint([Path(".")], [], packages=["pyyaml", "no-such-package-xyz"])["env"]
    assert env["python"] == platform.python_version()
    assert env["implementation"] == platform.python_implementation()
    assert env["kernel"] == platform.release() and env["os"] == platform.system()
    assert env["cpu_count"] == os.cpu_count() and 1 <= env["cpu_available"] <= os.cpu_count()
    assert env["cpu_model"] and env["distro"] and env["hostname"]
    assert env["memory_total_mb"] > 0
    assert env["packages"] == {"pyyaml": yaml.__version__, "no-such-package-xyz": None}
    assert env["tool_packages"]["pytest-benchmark-agent"]
    assert env["tool_packages"]["scipy"]
    assert "counter_backend" not in env  # no stage counts


def test_a_counting_run_records_the_backend_the_engine_names(no_gpu):
    """The fingerprint asks the caller's backend (the engine's counting backend) only when a
    stage counts; a machine without one records null, never a guess."""
    for named in ("cachegrind 3.19.0", None):
        env = collect_fingerprint([], [], counter_backend=lambda named=named: named)["env"]
        assert env["counter_backend"] == named


def test_package_versions_read_from_metadata_headers_match_importlib_metadata():
    installed = {dist.metadata["Name"] for dist in metadata.distributions()}
    assert {name: _version(name) for name in installed} == {
        name: metadata.version(name) for name in installed
    }
    required = [req for req in metadata.requires("pytest-benchmark-agent") if "extra" not in req]
    assert _tool_packages() == [
        "pytest-benchmark-agent",
        *(re.split(r"[^A-Za-z0-9._\-]", req)[0] for req in required),
    ]


def test_metadata_header_fields_ignore_the_body_and_unfold_lines(tmp_path):
    info = tmp_path / "demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nLicense: a long\n        licence\n"
        "Requires-Dist: alpha>=1\nRequires-Dist: beta; extra == 'x'\n\n"
        "Version: 9.9 (in the description)\nRequires-Dist: not-a-field\n"
    )
    dist = metadata.PathDistribution(info)
    assert _header(dist, "Version") == ["1.0"] == [dist.version]
    assert _header(dist, "License") == ["a long licence"]
    assert _header(dist, "Requires-Dist") == dist.requires == ["alpha>=1", "beta; extra == 'x'"]
    egg = tmp_path / "demo.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 2.0\n")
    (egg / "requires.txt").write_text("gamma>=2\n")
    old = metadata.PathDistribution(egg)
    assert _header(old, "Version") == ["2.0"] and _header(old, "Requires-Dist") == []
    assert old.requires == ["gamma>=2"]  # what _tool_packages falls back to for an egg-info


def test_clean_checkout_has_commit_and_tree_but_no_change_hash(repo, no_gpu):
    code = code_of(repo / "engine")
    assert code["commit"] == git(repo, "rev-parse", "HEAD")
    assert code["tree"] == git(repo, "rev-parse", "HEAD:engine")
    assert code["dirty"] is False and code["diff_hash"] is None
    assert code["root"] == str(repo.resolve())


def test_uncommitted_changes_are_hashed(repo, no_gpu):
    core = repo / "engine" / "core.py"
    core.write_text("def f():\n    return 2\n")
    first = code_of(repo / "engine")
    core.write_text("def f():\n    return 3\n")
    second = code_of(repo / "engine")
    assert first["dirty"] and second["dirty"]
    assert first["diff_hash"] != second["diff_hash"]
    core.write_text("def f():\n    return 2\n")
    assert code_of(repo / "engine")["diff_hash"] == first["diff_hash"]


def test_untracked_files_are_not_code_until_added(repo, no_gpu):
    extra = repo / "engine" / "new.py"
    extra.write_text("A = 1\n")
    clean = code_of(repo / "engine")
    assert clean["dirty"] is False and clean["diff_hash"] is None
    git(repo, "add", "engine/new.py")
    first = code_of(repo / "engine")
    extra.write_text("A = 2\n")
    second = code_of(repo / "engine")
    assert first["dirty"] and first["diff_hash"] != second["diff_hash"]


def test_changes_outside_the_code_path_do_not_touch_it(repo, no_gpu):
    before = collect_fingerprint([repo / "engine"], [], origin=repo)
    (repo / "docs" / "notes.md").write_text("more notes\n")
    assert code_of(repo / "engine")["dirty"] is False
    git(repo, "commit", "-q", "-am", "docs only")
    after = collect_fingerprint([repo / "engine"], [], origin=repo)
    diff = compare_fingerprints(before, after)
    assert diff.comparable and diff.blocking == [] and diff.benign == []
    assert sorted(line.split(":")[0] for line in diff.code) == [
        f"code[{repo / 'engine'}].commit",
        "code_identity.commit",
        "code_identity.short",
    ]


def test_a_commit_that_changes_the_code_is_a_code_difference(repo, no_gpu):
    before = collect_fingerprint([repo / "engine"], [], origin=repo)
    (repo / "engine" / "core.py").write_text("def f():\n    return 5\n")
    git(repo, "commit", "-q", "-am", "change the engine")
    diff = compare_fingerprints(before, collect_fingerprint([repo / "engine"], [], origin=repo))
    assert diff.comparable and diff.blocking == [] and diff.benign == []
    assert any(line.startswith(f"code[{repo / 'engine'}].tree: ") for line in diff.code)


def test_the_data_directory_is_not_code(repo, monkeypatch, no_gpu):
    """Even where the data directory (or another excluded folder) was committed."""
    monkeypatch.chdir(repo)
    monkeypatch.delenv("BENCHMARK_HOME", raising=False)
    for folder in ("benchmark_data", "scratch"):
        (repo / folder).mkdir()
        (repo / folder / "r1.yaml").write_text("samples: [1]\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "records committed by mistake")
    (repo / "benchmark_data" / "r1.yaml").write_text("samples: [2]\n")
    assert code_of(Path("."))["dirty"] is False
    assert collect_fingerprint([], [])["code_identity"]["dirty"] is False
    (repo / "scratch" / "r1.yaml").write_text("samples: [3]\n")
    both = [repo / "scratch", repo / "benchmark_data"]
    assert collect_fingerprint([Path(".")], [], exclude=both)["code"]["."]["dirty"] is False
    unexcluded = collect_fingerprint([Path(".")], [], exclude=[])
    assert unexcluded["code"]["."]["dirty"] is True
    assert unexcluded["code_identity"]["dirty"] is True


def test_an_excluded_file_is_not_code_in_git_or_outside(repo, tmp_path, no_gpu):
    """The benchmark file beside the code: its edits, committed or not, do not count."""
    bench = repo / "engine" / "bench.yaml"
    bench.write_text("params: {n: 1}\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "bench")

    def code() -> dict:
        fp = collect_fingerprint([repo / "engine"], [], exclude=[bench])
        return fp["code"][str(repo / "engine")]

    first = code()
    assert first["tree"].startswith("ls-tree:") and first["dirty"] is False
    bench.write_text("params: {n: 2}\n")
    assert code() == first
    git(repo, "commit", "-q", "-am", "edit the bench")
    assert {**code(), "commit": None} == {**first, "commit": None}
    (repo / "engine" / "core.py").write_text("def f():\n    return 7\n")
    git(repo, "commit", "-q", "-am", "edit the code")
    assert code()["tree"] != first["tree"]
    assert code_of(repo / "engine")["tree"] == git(repo, "rev-parse", "HEAD:engine")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "run.sh").write_text("true\n")
    (plain / "bench.yaml").write_text("params: {n: 1}\n")

    def content() -> str:
        return collect_fingerprint([plain], [], exclude=[plain / "bench.yaml"])["code"][str(plain)][
            "content_hash"
        ]

    before = content()
    (plain / "bench.yaml").write_text("params: {n: 2}\n")
    assert content() == before
    (plain / "run.sh").write_text("false\n")
    assert content() != before


def test_git_ignored_code_is_hashed_by_content(repo, no_gpu):
    build = repo / "build"
    build.mkdir()
    (build / "kernel.so").write_bytes(b"\x7fELF one")
    first = code_of(build)
    (build / "kernel.so").write_bytes(b"\x7fELF two")
    second = code_of(build)
    assert first["tree"] is None and first["content_hash"] != second["content_hash"]


def test_code_outside_git_is_hashed_by_content(tmp_path, no_gpu):
    src = tmp_path / "plain"
    (src / "__pycache__").mkdir(parents=True)
    (src / "run.py").write_text("print(1)\n")
    first = code_of(src)
    (src / "__pycache__" / "run.cpython-311.pyc").write_bytes(b"junk")
    assert code_of(src) == first and first["vcs"] is None
    (src / "run.py").write_text("print(2)\n")
    assert code_of(src)["content_hash"] != first["content_hash"]
    assert (
        code_of(src / "run.py")["content_hash"]
        == hashlib.sha256(b"\0file\0run.py\0print(2)\n").hexdigest()
    )


def test_a_missing_code_path_names_the_field(tmp_path, no_gpu):
    with pytest.raises(FingerprintError, match=r"code: .*missing does not exist.*`code:`"):
        collect_fingerprint([tmp_path / "missing"], [])


def test_accelerator_section_from_nvml():
    double = FakeNvml([FakeDevice(name="NVIDIA H200", total_mb=143771)])
    with nvml.use_backend(double):
        acc = collect_fingerprint([Path(".")], [])["accelerator"]
    assert acc["available"] and acc["reason"] is None
    assert (acc["driver_version"], acc["cuda_driver_version"]) == ("550.54.15", "12.4")
    assert acc["devices"] == [
        {
            "index": 0,
            "uuid": double.devices[0].uuid,
            "name": "NVIDIA H200",
            "memory_total_mb": 143771,
        }
    ]


def test_accelerator_absent_gives_the_reason(no_gpu):
    acc = collect_fingerprint([Path(".")], [])["accelerator"]
    assert acc["available"] is False and acc["devices"] == []
    assert "libnvidia-ml.so.1" in acc["reason"]


def test_secrets_never_reach_the_fingerprint_file(tmp_path, monkeypatch, no_gpu):
    monkeypatch.setenv("API_TOKEN", FAKE_TOKEN)
    monkeypatch.setenv("DATABASE_URL", f"postgresql://bench:{DB_PASSWORD}@db.example:5432/b")
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    monkeypatch.delenv("BENCH_UNSET_VAR", raising=False)
    names = ["API_TOKEN", "DATABASE_URL", "OMP_NUM_THREADS", "BENCH_UNSET_VAR"]
    fingerprint = collect_fingerprint([Path(".")], names)
    out = tmp_path / "config.yaml"
    out.write_text(yaml.safe_dump({"fingerprint": fingerprint}))
    text = out.read_text()
    assert FAKE_TOKEN not in text and DB_PASSWORD not in text
    assert fingerprint["vars"] == {
        "API_TOKEN": REDACTED,
        "DATABASE_URL": f"postgresql://{REDACTED}@db.example:5432/b",
        "OMP_NUM_THREADS": "4",
        "BENCH_UNSET_VAR": None,
    }


@pytest.fixture
def base(no_gpu) -> dict:
    fingerprint = collect_fingerprint([Path(".")], ["OMP_NUM_THREADS"])
    fingerprint["env"].update(python="3.11.7", kernel="6.1.0-18-amd64", memory_total_mb=24000)
    fingerprint["vars"] = {"OMP_NUM_THREADS": "4"}
    fingerprint["accelerator"] = {
        "available": True,
        "reason": None,
        "driver_version": "550.54.15",
        "cuda_driver_version": "12.4",
        "devices": [
            {"index": 0, "uuid": "GPU-aaa", "name": "NVIDIA H100", "memory_total_mb": 81559}
        ],
    }
    return fingerprint


def changed(fingerprint: dict, edit) -> dict:
    other = copy.deepcopy(fingerprint)
    edit(other)
    return other


def test_identical_fingerprints_have_no_differences(base):
    diff = compare_fingerprints(base, copy.deepcopy(base))
    assert diff.comparable and diff.blocking == [] and diff.benign == []


def test_benign_differences_are_listed_but_do_not_block(base):
    def edit(fp):
        fp["env"].update(
            hostname="other-host", python="3.11.9", kernel="6.1.0-21-amd64", memory_total_mb=23000
        )
        fp["env"]["tool_packages"]["pytest"] = "0.0.1"
        fp["accelerator"]["devices"][0]["uuid"] = "GPU-bbb"

    diff = compare_fingerprints(base, changed(base, edit))
    assert diff.comparable
    assert "env.python: 3.11.7 -> 3.11.9" in diff.benign
    assert "env.kernel: 6.1.0-18-amd64 -> 6.1.0-21-amd64" in diff.benign
    assert "env.memory_total_mb: 24000 -> 23000" in diff.benign
    assert "accelerator.devices[0].uuid: GPU-aaa -> GPU-bbb" in diff.benign
    assert any(line.startswith("env.hostname: ") for line in diff.benign)
    assert any(line.startswith("env.tool_packages[pytest]: ") for line in diff.benign)
    assert len(diff.benign) == 6


def add_device(fp: dict) -> None:
    fp["accelerator"]["devices"].append(dict(fp["accelerator"]["devices"][0]))


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda fp: fp["env"].update(python="3.12.1"), "env.python: 3.11.7 -> 3.12.1"),
        (lambda fp: fp["env"].update(kernel="6.8.0-1-amd64"), "env.kernel: 6.1.0-18-amd64 -> 6.8"),
        (lambda fp: fp["env"].update(cpu_model="Other CPU"), "env.cpu_model: "),
        (lambda fp: fp["env"].update(cpu_available=1), "env.cpu_available: "),
        (lambda fp: fp["env"].update(memory_total_mb=12000), "env.memory_total_mb: 24000 -> 12000"),
        (
            lambda fp: fp["env"]["packages"].update(numpy="2.0"),
            "env.packages[numpy]: <absent> -> 2.0",
        ),
        (lambda fp: fp["vars"].update(OMP_NUM_THREADS="8"), "vars[OMP_NUM_THREADS]: 4 -> 8"),
        (
            lambda fp: fp["accelerator"].update(driver_version="560.1"),
            "accelerator.driver_version: 550.54.15 -> 560.1",
        ),
        (
            lambda fp: fp["accelerator"]["devices"][0].update(name="NVIDIA A100"),
            "accelerator.devices[0].name: NVIDIA H100 -> NVIDIA A100",
        ),
        (add_device, "accelerator.devices[1].name: <absent> -> NVIDIA H100"),
        (lambda fp: fp["env"].update(new_field="x"), "env.new_field: <absent> -> x"),
    ],
)
def test_differences_that_matter_block(base, edit, expected):
    diff = compare_fingerprints(base, changed(base, edit))
    assert not diff.comparable
    assert any(line.startswith(expected) for line in diff.blocking), diff.blocking


def test_accelerator_differences_are_benign_without_gpu_stages(base):
    def edit(fp):
        fp["accelerator"] = {
            "available": False,
            "reason": "no driver",
            "driver_version": None,
            "cuda_driver_version": None,
            "devices": [],
        }

    assert not compare_fingerprints(base, changed(base, edit)).comparable
    diff = compare_fingerprints(base, changed(base, edit), uses_gpu=False)
    assert diff.comparable
    assert "accelerator.available: True -> False" in diff.benign


@pytest.mark.parametrize(
    "name",
    [
        "API_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "GITHUB_TOKEN",
        "DB_PASSWORD",
        "PGPASSWORD",
        "apiKey",
        "client_secret",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "SENTRY_DSN",
        "HF_AUTH",
        "STRIPE_KEY",
    ],
)
def test_secret_names_are_redacted(name):
    assert redact_value(name, "plain-looking-value") == REDACTED


@pytest.mark.parametrize(
    "name",
    ["PWD", "OLDPWD", "HOME", "OMP_NUM_THREADS", "KEYBOARD", "AUTHOR", "CUDA_VISIBLE_DEVICES"],
)
def test_ordinary_names_are_kept(name):
    assert redact_value(name, "0,1") == "0,1"


@pytest.mark.parametrize(
    "value",
    [
        "ghp_" + "a1B2" * 9,
        "github_pat_11ABCDEFG0123456789_abcdefghijkl",
        "sk-ant-api03-" + "x9Y8" * 6,
        "AKIAIOSFODNN7EXAMPLE",
        "xoxb-1234567890-abcdefghij",
        "hf_" + "AbCdEfGhIj" * 4,
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIB...",
        hashlib.sha256(b"key").hexdigest(),
        "Zk9vQmFyQmF6UXV4MTIzNDU2Nzg5MEFCQ0RFRg==",
        "--header Authorization: Bearer abcdefghijklmnop1234",
        "https://ghp_abcdefghijklmnopqrstuvwx1234@github.com/o/r",
    ],
)
def test_secret_looking_values_are_redacted_whatever_the_name(value):
    assert redact_value("SOME_SETTING", value) == REDACTED


@pytest.mark.parametrize(
    "token",
    [
        *(f"gh{kind}_" + "a1B2" * 9 for kind in "pousr"),
        "github_pat_11ABCDEFG0123456789_abcdefghijkl",
        "sk-ant-api03-" + "x9Y8" * 6,
        "rk_live_0123456789ab",
        "sk_test_0123456789ab",
        "xoxb-1234567890-abcdefghij",
        "AKIAIOSFODNN7EXAMPLE",
        "ASIAIOSFODNN7EXAMPLE",
        "AIza" + "B" * 35,
        "hf_" + "AbCdEfGhIj" * 4,
        "glpat-" + "a1B2" * 5,
        "npm_" + "a1B2" * 9,
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig",
        "-----BEGIN RSA PRIVATE KEY-----",
        "Bearer abcdefghijklmnop1234",
    ],
)
def test_every_token_format_in_a_stages_text_is_redacted(token):
    """Each alternative of the token formats holds one of the literals that let a text
    without any of them skip the regex (a stage's whole output passes stage_text)."""
    assert stage_text(f"line one\nthe value {token} printed\n") == (
        f"line one\nthe value {REDACTED} printed\n"
    )


@pytest.mark.parametrize(
    "value",
    [
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "3.11.7",
        "en_US.UTF-8",
        "123e4567-e89b-12d3-a456-426614174000",
        "bench-2024-01-01-fts5-merge-3f2a",
        "ssh://git@github.com/o/r.git",
        "https://example.com/data/v1?split=train&n=100",
    ],
)
def test_ordinary_values_are_kept(value):
    assert redact_value("SOME_SETTING", value) == value


def test_urls_lose_credentials_and_secret_parameters_only():
    assert (
        redact_value("DATABASE_URL", f"postgresql://bench:{DB_PASSWORD}@db:5432/x")
        == f"postgresql://{REDACTED}@db:5432/x"
    )
    url = "https://s3.example/b/k?X-Amz-Signature=abc123&X-Amz-Credential=me&partNumber=1"
    assert (
        redact_value("UPLOAD", url) == f"https://s3.example/b/k?X-Amz-Signature={REDACTED}"
        f"&X-Amz-Credential={REDACTED}&partNumber=1"
    )


def test_unset_and_empty_values_pass():
    assert redact_value("API_TOKEN", None) is None
    assert redact_value("API_TOKEN", "") == ""


def test_mappings_are_redacted_deeply():
    data = {
        "db": {"password": 1234, "host": "db.example"},
        "credentials": {"user": "u", "pass": "p"},
        "tokens": ["a", "b"],
        "args": ["--fast", f"postgres://u:{DB_PASSWORD}@h/d"],
        "n": 3,
    }
    assert redact_mapping(data) == {
        "db": {"password": REDACTED, "host": "db.example"},
        "credentials": REDACTED,
        "tokens": [REDACTED, REDACTED],
        "args": ["--fast", f"postgres://{REDACTED}@h/d"],
        "n": 3,
    }
    assert data["db"]["password"] == 1234  # the input is not modified
