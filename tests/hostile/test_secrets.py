"""Issue 19, class 2: a benchmark's secrets reach its stages and never a file.

Secret-named params (``api_key``), ``--bench-set`` values of secret-named params, params
declared ``secret: true``, secret-named stage ``env:`` entries and the userinfo of URL values are
given to the stage as they are, and written ``<redacted>`` in every file of the data home
(records, journal, report, cache manifest, session log, export); cache signatures key them with
the home's own HMAC key. Real sessions throughout; every file of the home is searched.
"""

from __future__ import annotations

import json
import shlex
import time

import pytest
from benchhelpers import BenchProject
from hostilehelpers import agent, assert_clean_exit, assert_no_secret, assert_trials_on_disk

from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.records.reader import load_yaml
from pytest_benchmark_agent.records.writer import dump_yaml
from pytest_benchmark_agent.util.redact import (
    KEY_FILE,
    REDACTED,
    is_secret_name,
    register,
    scrub,
)

API_KEY = "ak-7Hq2pZ9wLx4Vb8Nc"
LOGIN = "hunter2 isn't $HOME"  # shell-quoted in a command: its quoted form is hidden too
URL_PASSWORD = "Pw0rd-in-the-url"
ENV_PASSWORD = "env-pass-5dF8gH1j"
SET_TOKEN = "set-token-Qw3Er5Ty"
SECRETS = (API_KEY, LOGIN, shlex.quote(LOGIN), URL_PASSWORD, ENV_PASSWORD, SET_TOKEN)

#: The stage checks it got every real value (the EXPECT_* variables are the test's, not the
#: benchmark's) and reports ``received=1`` only then.
CHECK = (
    'test {api_key} = "$EXPECT_API_KEY" && test {db_login} = "$EXPECT_LOGIN" '
    '&& test {authToken} = "$EXPECT_TOKEN" && test "$DB_PASSWORD" = "$EXPECT_ENV" '
    '&& test {mirror} = "$EXPECT_URL"'
)


def secret_bench(measure: str = f"{CHECK} && echo received=1 || echo received=0") -> dict:
    """Every kind of secret, used by a prep (cached by signature) and a measure stage."""
    return {
        "name": "secrets",
        "params": {
            "mode": "a",
            "api_key": API_KEY,
            "db_login": LOGIN,
            "authToken": "placeholder",
            "mirror": f"https://bench:{URL_PASSWORD}@mirror.example/data",
            "keyword": "fts",
        },
        "manifest": {"db_login": {"why": "the test database's login", "secret": True}},
        "treatment_variable": "mode",
        "treatments": ["a", "b"],
        "replicates": 1,
        "stages": [
            {
                "name": "build",
                "kind": "prep",
                "cmd": f"{CHECK} && echo {{keyword}} > {{data}}",
                "env": {"DB_PASSWORD": ENV_PASSWORD},
                "produces": ["data"],
            },
            {
                "name": "measure",
                "kind": "measure",
                "needs": ["build"],
                "cmd": f"cat {{data}} > /dev/null; echo mode={{mode}}; {measure}",
                "env": {"DB_PASSWORD": ENV_PASSWORD},
                "metrics_from": {"stdout": True, "fields": ["received"]},
            },
        ],
        "metrics": {"received": {"direction": "higher", "primary": True}},
    }


@pytest.fixture
def expect(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the stages must receive, in the environment the sessions inherit."""
    for name, value in {
        "EXPECT_API_KEY": API_KEY,
        "EXPECT_LOGIN": LOGIN,
        "EXPECT_TOKEN": SET_TOKEN,
        "EXPECT_ENV": ENV_PASSWORD,
        "EXPECT_URL": f"https://bench:{URL_PASSWORD}@mirror.example/data",
    }.items():
        monkeypatch.setenv(name, value)


def assert_home_clean(project: BenchProject) -> None:
    for secret in SECRETS:
        assert_no_secret(project.home, secret)


def signatures(project: BenchProject) -> set[str]:
    return {p.name for p in (project.home / "cache").iterdir() if p.is_dir()}


def test_the_stage_gets_every_secret_and_no_file_holds_one(project: BenchProject, expect) -> None:
    project.bench(secret_bench())
    result = project.run(f"--bench-set=authToken={SET_TOKEN}", subprocess=True)
    output = assert_clean_exit(result, {0})
    record = project.results()
    trials = assert_trials_on_disk(project.runs()[-1])
    assert [t["metrics"]["received"] for t in trials] == [1.0, 1.0]  # the real values
    assert_home_clean(project)
    assert not [s for s in SECRETS if s in output]
    frozen = load_yaml(project.runs()[-1] / "config.yaml")["config"]
    assert {k: v for k, v in frozen["params"].items() if k != "mode"} == {
        "api_key": REDACTED,
        "db_login": REDACTED,
        "authToken": REDACTED,
        "mirror": f"https://{REDACTED}@mirror.example/data",
        "keyword": "fts",  # KEY inside a word is no secret
    }
    assert {s["env"]["DB_PASSWORD"] for s in frozen["stages"]} == {REDACTED}
    assert record["trials"][0]["command"].count("<redacted>") >= 4
    manifest = next((project.home / "cache").glob("*/manifest.json")).read_text()
    assert "<redacted>" in manifest
    key = project.home / KEY_FILE
    assert oct(key.stat().st_mode & 0o777) == "0o600" and len(key.read_bytes()) == 32


def test_a_failed_stage_shows_its_command_redacted(project: BenchProject, expect) -> None:
    """A non-zero exit puts the rendered command in the trial's reason and the terminal."""
    project.bench(secret_bench(measure="echo received=1; test {api_key} = wrong"))
    result = project.run(f"--bench-set=authToken={SET_TOKEN}", subprocess=True)
    output = assert_clean_exit(result, {1})
    assert "exited with code 1" in output and "command: " in output
    assert not [s for s in SECRETS if s in output]
    reasons = [t["reason"] for t in project.results()["trials"]]
    assert len(reasons) == 2 and all("test <redacted> = wrong" in r for r in reasons)
    assert_home_clean(project)


def test_signatures_are_keyed_per_home_and_reused_within_one(project: BenchProject, expect) -> None:
    """The same file in two homes: the secret prep's signature differs (each home's key),
    so it says nothing about the value; in one home it is stable, and the prep is reused."""
    project.bench(secret_bench())
    args = (f"--bench-set=authToken={SET_TOKEN}",)
    assert_clean_exit(project.run(*args, "--bench-home", str(project.home)), {0})
    assert_clean_exit(project.run(*args, "--bench-home", str(project.home)), {0})
    other = project.path / "other_home"
    assert_clean_exit(project.run(*args, "--bench-home", str(other)), {0})
    assert [p["action"] for p in project.results()["preps"]] == ["reused"]
    assert signatures(project).isdisjoint(p.name for p in (other / "cache").iterdir())
    assert (project.home / KEY_FILE).read_bytes() != (other / KEY_FILE).read_bytes()


def test_the_detached_session_log_and_the_export_hold_no_secret(
    project: BenchProject, expect
) -> None:
    project.bench(secret_bench())
    started = agent(
        project, "run", "bench.yaml", "--detach", "--", f"--bench-set=authToken={SET_TOKEN}"
    )
    assert_clean_exit(started, {0})
    run_dir = project.home / "runs" / started.stdout.split(":")[0]
    for _ in range(600):  # a bound on polls, not a time limit on the session
        if (run_dir / ".complete").exists() or (run_dir / ".failed").exists():
            break
        time.sleep(0.2)
    assert (run_dir / ".complete").exists(), (run_dir / "session.log").read_text()[-3000:]
    exported = project.home / "export.json"
    assert_clean_exit(agent(project, "export", "latest", "-o", str(exported)), {0})
    assert json.loads(exported.read_text())["config"]
    assert (run_dir / "session.log").stat().st_size > 0
    assert_home_clean(project)


@pytest.mark.parametrize(
    "name",
    ["api_key", "DB_PASSWORD", "authToken", "client_secret", "PGPASSWD", "aws_credentials", "AUTH"],
)
def test_names_that_hold_secrets(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["keyword", "author", "key_size", "monkey", "tokenizer_name"])
def test_names_that_do_not(name: str) -> None:
    assert not is_secret_name(name)


def test_a_secret_param_cannot_be_what_varies(project: BenchProject) -> None:
    document = secret_bench()
    document.update(treatment_variable="api_key", treatments=[API_KEY, "other-key-value"])
    document["params"]["mode"] = "a"
    project.bench(document)
    output = assert_clean_exit(project.run(), {2, 4})
    assert "params.api_key: is a secret" in output
    assert API_KEY not in output and "other-key-value" not in output  # the treatments, quoted
    assert not (project.home / "runs").exists() or not list((project.home / "runs").iterdir())


def test_a_verb_that_rewrites_a_record_keeps_it_redacted(project: BenchProject, expect) -> None:
    """``reclassify`` rewrites results.yaml and the report in a process of its own."""
    project.bench(secret_bench())
    assert_clean_exit(project.run(f"--bench-set=authToken={SET_TOKEN}", subprocess=True), {0})
    verb = agent(project, "reclassify", "latest", "UNRELIABLE", "--why", "a note")
    assert_clean_exit(verb, {0})
    assert "UNRELIABLE" in (project.runs()[-1] / "results.yaml").read_text()
    assert_home_clean(project)


def test_a_secret_the_prep_reports_as_used_still_matches_on_a_cache_hit(
    project: BenchProject, expect
) -> None:
    """A prep reporting ``BENCH_EFFECTIVE api_key=...``: its manifest keeps it redacted, and the
    reused entry still agrees with the declared value (no trial turns not_comparable)."""
    document = secret_bench()
    document["stages"][0]["cmd"] += "; echo BENCH_EFFECTIVE api_key={api_key}"
    project.bench(document)
    for _ in range(2):
        assert_clean_exit(project.run(f"--bench-set=authToken={SET_TOKEN}"), {0})
    record = project.results()
    assert [p["action"] for p in record["preps"]] == ["reused"]
    assert {t["status"] for t in record["trials"]} == {"passed"}
    written = ["results.yaml", "config.yaml", "trials.jsonl", "report.md"]
    files = [project.runs()[-1] / name for name in written]
    files += list((project.home / "cache").glob("*/manifest.json"))
    files += list(project.home.rglob("stdout.txt"))  # the prep's own output, redacted as read
    assert files and not [f for f in files if API_KEY in f.read_text()]


def test_a_tune_hides_the_secrets_of_its_base_params(project: BenchProject, expect) -> None:
    """The tuner writes its own record and report in its own process."""
    document = secret_bench()
    del document["treatment_variable"], document["treatments"]
    document.update(
        search_space={"mode": ["a", "b"]},
        objective={"metric": "received", "direction": "higher"},
        replicates=5,
    )
    document["metrics"]["received"]["min_replicates"] = 2
    project.bench(document)
    tuned = agent(
        project, "tune", "bench.yaml", "--strategy", "grid", "--set", f"authToken={SET_TOKEN}"
    )
    assert_clean_exit(tuned, {0})
    assert len(project.runs()) >= 2
    assert_home_clean(project)


def test_the_seam_hides_values_and_keeps_records_readable() -> None:
    """Registered secrets go wherever they stand in a record, in any writer's escaping (a
    quote, a backslash, non-ASCII); numbers, keys and short values elsewhere are untouched."""
    tricky = 'pa"ss\\wörd-Zx81'
    config = BenchmarkConfig.model_validate(
        {
            "name": "seam",
            "params": {"client_secret": tricky, "pin_token": 123456, "auth": "abc"},
            "stages": [{"name": "m", "kind": "measure", "cmd": "true"}],
        }
    )
    register(config)
    record = {
        "params": {"client_secret": tricky, "pin_token": 123456, "auth": "abc", "n": 123456},
        "command": f"run --secret {shlex.quote(tricky)} --n 3",
        "metrics": {"wall_s": 0.123456, "count": 123456},
        "label": "abc",
        "url": "git+https://user:pw@example.invalid/r",
    }
    assert scrub(record) == {
        "params": {"client_secret": REDACTED, "pin_token": REDACTED, "auth": REDACTED, "n": 123456},
        "command": f"run --secret {REDACTED} --n 3",
        "metrics": {"wall_s": 0.123456, "count": 123456},
        "label": "abc",
        "url": f"git+https://{REDACTED}@example.invalid/r",
    }
    assert tricky not in dump_yaml(record) and json.dumps(tricky)[1:-1] not in dump_yaml(record)
    clean = {"trials": [{"id": "m[a-rep0]", "wall_s": 1.5}]}
    assert scrub(clean) is clean  # nothing to hide: the same object, not a copy


def test_a_baseline_and_a_plan_compare_the_config_as_written(project: BenchProject, expect) -> None:
    """A record holds a secret as ``<redacted>``: a later run, its baseline check and the
    plan's review read the live config the same way, so the secret neither blocks them nor is
    shown (nor hashed into the record's identity)."""
    project.bench(secret_bench())
    args = (f"--bench-set=authToken={SET_TOKEN}",)
    assert_clean_exit(project.run(*args), {0})
    output = assert_clean_exit(project.run(*args, "--bench-baseline", "latest"), {0})
    assert "in baseline" not in output
    assert project.results()["baseline"]["run_id"] == project.runs()[0].name
    planned = agent(project, "plan", "bench.yaml", "--", *args)
    assert_clean_exit(planned, {0, 1})
    assert not [s for s in SECRETS if s in planned.stdout + planned.stderr]
    assert_home_clean(project)
