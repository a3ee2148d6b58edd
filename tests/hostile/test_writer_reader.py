"""Class 1 of issue 19: the records' writer writes what their reader reads, for any value (a
treatment value over YAML's 1,024-character key limit once made every later run of its
benchmark crash at its end), and one unreadable earlier record never breaks a later run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from benchhelpers import BenchProject
from hostilehelpers import agent, assert_clean_exit, assert_trials_on_disk, tiny_bench
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_benchmark_agent.config.safe_yaml import parse_yaml
from pytest_benchmark_agent.records.reader import load_results
from pytest_benchmark_agent.records.writer import dump_yaml
from pytest_benchmark_agent.records.yamlwrite import writable

#: Text of any code point but a lone surrogate (no YAML holds one), long enough to pass
#: YAML's 1,024-character limit on an implicit key.
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=8) | st.text(
    st.characters(exclude_categories=["Cs"]), min_size=1000, max_size=1300
)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT
RECORDS = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


@FAST
@given(RECORDS)
def test_any_record_reads_back_equal(data: object) -> None:
    assert parse_yaml(dump_yaml(data)) == data


@FAST
@given(st.dictionaries(st.text(max_size=4), st.text(st.characters(), max_size=30), max_size=4))
def test_a_lone_surrogate_reads_back_as_the_replacement_character(data: dict) -> None:
    """Text decoded with surrogateescape (a file name, an environment value) is written."""
    assert parse_yaml(dump_yaml(data)) == {writable(k): writable(v) for k, v in data.items()}


LONG = "x" * 700 + " é\u2028\t\\\"'#: {[&*!|>%@`" + "ü" * 400


def test_a_long_odd_treatment_value_never_breaks_a_later_run(project: BenchProject) -> None:
    """The issue's case: a 1,100-character treatment value; two runs, then the verbs."""
    project.bench(tiny_bench(params={"mode": "a", "size": 3}, treatments=["a", LONG]))
    for _ in range(2):
        assert_clean_exit(project.run(subprocess=True), allowed={0})
    first, second = project.runs()
    for run_dir in (first, second):
        assert_trials_on_disk(run_dir)
        record = load_results(run_dir)
        assert [str(t) for t in record["treatments"]] == ["a", LONG]
        assert LONG in record["summary"]["score"]
        frozen = parse_yaml((run_dir / "config.yaml").read_text())
        assert frozen["config"]["treatments"] == ["a", LONG]
    for verb in (("history",), ("analyze", "latest"), ("compare", first.name, second.name)):
        assert_clean_exit(agent(project, *verb), allowed={0})


def test_an_environment_value_that_is_not_utf8_is_recorded_readably(
    project: BenchProject,
) -> None:
    """``env_vars`` are fingerprinted: a value of bytes that are not UTF-8 reaches the record
    as text with lone surrogates, which the writer spells as U+FFFD instead of crashing."""
    project.bench(tiny_bench(env_vars=["ODD_BYTES"]))
    env = {**os.environ}
    env.pop("ODD_BYTES", None)
    environb = {k.encode(): v.encode() for k, v in env.items()}
    environb[b"ODD_BYTES"] = b"caf\xe9\xff"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--bench", "-p", "no:cacheprovider", "-p", "no:randomly"]
        + ["--bench-home", str(project.home), "bench.yaml"],
        cwd=project.path,
        env=environb,  # type: ignore[arg-type]
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert_clean_exit(result, allowed={0})
    (run_dir,) = project.runs()
    assert_trials_on_disk(run_dir)
    text = (run_dir / "config.yaml").read_text()
    assert "caf\ufffd\ufffd" in text and "ODD_BYTES" in text
    assert yaml.safe_load(text)["run_id"] == run_dir.name


def test_records_with_keys_and_values_past_every_limit_load(tmp_path: Path) -> None:
    """What a run can put in its record, past YAML's limits, through the files' own path."""
    record = {
        "k" * 5000: {"v" * 1025: ["\0", "\x7f\x85\u2028\u2029\ufeff", "\U0010ffff"]},
        "nested": [[{"?" * 1100: [{"-" * 1100: None}]}]],
        "number-like": ["1e-05", "0x1f", "1_000", ".inf", "2026-12-02", "yes", "~", "<<"],
    }
    path = tmp_path / "results.yaml"
    path.write_text(dump_yaml({"trials": [], **record}))
    assert load_results(tmp_path) == {"trials": [], **record}
