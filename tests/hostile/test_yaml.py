"""Class 6 of issue 19, YAML: what a benchmark file or a ``--bench-set`` value can hold that no
reader should build (duplicate keys, alias bombs, recursion, absurd sizes, NUL bytes...) is a
clear error naming the file, the place and the fix, never a traceback, a hang or a crash."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from benchhelpers import BenchProject
from hostilehelpers import assert_clean_exit, tiny_bench

from pytest_benchmark_agent.config.models import load_config
from pytest_benchmark_agent.config.safe_yaml import MAX_ALIAS_NODES, MAX_INPUT_DEPTH, parse_value
from pytest_benchmark_agent.errors import ConfigError


def problems_of(tmp_path: Path, text: str | bytes) -> str:
    """The rendered ConfigError that loading ``text`` as a benchmark file gives."""
    path = tmp_path / "bench.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(textwrap.dedent(text))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return str(caught.value)


def bench_text(**overrides: object) -> str:
    return yaml.safe_dump(tiny_bench(**overrides), sort_keys=False)


def test_a_duplicate_key_is_an_error_naming_both_lines(tmp_path: Path) -> None:
    text = problems_of(tmp_path, bench_text() + "replicates: 3\n")
    line = bench_text().splitlines().index("replicates: 1") + 1
    assert "duplicate key 'replicates'" in text
    assert f"first at line {line}, again at line {len(bench_text().splitlines()) + 1}" in text


def test_a_duplicate_key_deep_in_a_stage_is_an_error_too(tmp_path: Path) -> None:
    text = problems_of(
        tmp_path,
        """\
        name: d
        stages:
          - name: m
            kind: measure
            cmd: echo score=1
            cmd: echo score=2
        """,
    )
    assert "duplicate key 'cmd': first at line 5, again at line 6" in text


def test_a_merge_key_may_be_overridden(tmp_path: Path) -> None:
    """``<<: *base`` then the same key: what merging is for, no duplicate."""
    path = tmp_path / "bench.yaml"
    document = tiny_bench()
    document["params"] = "PARAMS"
    text = yaml.safe_dump(document, sort_keys=False).replace(
        "params: PARAMS", "base: &base {mode: a, size: 3}\nparams:\n  <<: *base\n  size: 4"
    )
    path.write_text(text.replace("base: &base", "x-base: &base"))
    with pytest.raises(ConfigError) as caught:  # x-base is no key of the format...
        load_config(path)
    assert "x-base: is not a known key" in str(caught.value)
    assert "duplicate" not in str(caught.value)  # ...but the merge itself is accepted


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "params: &p {mode: a, size: 3, self: *p}\n",
            "an alias refers to a value that contains it",
        ),
        ("params: &p [*p]\n", "an alias refers to a value that contains it"),
        (
            "x: &a [q, q, q, q, q, q, q, q, q, q]\n"
            + "".join(
                f"x{i}: &a{i} [{', '.join(['*a' if i == 0 else f'*a{i - 1}'] * 10)}]\n"
                for i in range(8)
            ),
            f"aliases expand this value to over {MAX_ALIAS_NODES} values (an alias bomb)",
        ),
        ("params: " + "[" * 50_000 + "]" * 50_000 + "\n", f"nests deeper than {MAX_INPUT_DEPTH}"),
        ("params:\n" + "- " * 30_000 + "x\n", "nests deeper than"),
        ("size: " + "9" * 5000 + "\n", "cannot read '9999"),
        ("when: 2026-13-45\n", "cannot read '2026-13-45' (month must be in 1..12)"),
        ("x: !!float abc\n", "cannot read a value (could not convert string to float: 'abc')"),
        ("x: !!python/object/apply:os.system [echo hi]\n", "could not determine a constructor"),
        ("? [1, 2]\n: x\n", "found unhashable key"),
        ("a: b\x01\n", "the character U+0001 is not allowed in YAML"),
    ],
    ids=[
        "recursive-map",
        "recursive-list",
        "alias-bomb",
        "deep-flow",
        "deep-block",
        "5000-digit-int",
        "bad-date",
        "bad-float-tag",
        "python-tag",
        "unhashable-key",
        "control-char",
    ],
)
def test_hostile_yaml_is_refused_at_load(tmp_path: Path, body: str, expected: str) -> None:
    text = problems_of(tmp_path, "name: h\n" + body)
    assert expected in text, text
    assert "not valid YAML" in text and "bench.yaml" in text


def test_a_file_that_is_not_utf8_names_the_line_and_byte_offset(tmp_path: Path) -> None:
    text = problems_of(tmp_path, b"name: h\nhypothesis: caf\xe9 ok\n")
    assert "line 2, byte offset 23: is not UTF-8 text (byte 0xe9)" in text
    assert "save the file as UTF-8" in text


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"replicates": 100_000_000_000}, "replicates"),
        ({"replicates": {"min": 1, "max": 10**12}}, "replicates.max"),
        ({"treatments": [f"t{i}" for i in range(200)], "replicates": 10_000}, "plan would hold"),
        ({"metrics": {"score": {"primary": True, "min_replicates": 10**9}}}, "min_replicates"),
        ({"resources": {"mem_mb": float("inf")}}, "resources.mem_mb"),
        ({"budget": {"wall_clock_s": float("nan")}}, "budget.wall_clock_s"),
        ({"metrics": {"score": {"primary": True, "floor": float("-inf")}}}, "floor"),
    ],
    ids=["replicates", "replicate-range", "plan-size", "min-replicates", "inf", "nan", "-inf"],
)
def test_absurd_sizes_and_non_finite_numbers_are_refused(
    tmp_path: Path, overrides: dict, field: str
) -> None:
    document = tiny_bench(**overrides)
    if "treatments" in overrides:
        document["params"]["mode"] = "t0"
    text = problems_of(tmp_path, yaml.safe_dump(document, sort_keys=False))
    assert field in text, text


def test_absurd_replicates_end_a_real_session_at_gate_1(project: BenchProject) -> None:
    project.bench(tiny_bench(replicates=100_000_000_000))
    output = assert_clean_exit(project.run(subprocess=True), allowed={2, 4})
    assert "replicates" in output and "less than or equal to 10000" in output
    assert not project.runs()


@pytest.mark.parametrize(
    ("stage_env", "expected"),
    [
        ({"A=B": "x"}, "hold no '='"),
        ({"": "x"}, "non-empty"),
        ({"OK": "a\0b"}, "stages[0].env.OK: holds a NUL byte"),
        ({"O\0K": "x"}, "holds a NUL byte"),
    ],
    ids=["equals", "empty", "nul-value", "nul-name"],
)
def test_bad_environment_names_and_nul_bytes_are_gate_1_errors(
    tmp_path: Path, stage_env: dict, expected: str
) -> None:
    document = tiny_bench()
    document["stages"][0]["env"] = stage_env
    text = problems_of(tmp_path, yaml.safe_dump(document, sort_keys=False))
    assert expected in text, text


def test_a_nul_byte_anywhere_names_its_field(tmp_path: Path) -> None:
    document = tiny_bench(params={"mode": "a", "size": 3, "label": ["ok", "x\0y"]})
    document["stages"][1]["cmd"] = "echo score=1\0"
    text = problems_of(tmp_path, yaml.safe_dump(document, sort_keys=False))
    assert "params.label[1]: holds a NUL byte" in text
    assert "stages[1].cmd: holds a NUL byte" in text


@pytest.mark.parametrize(
    "value",
    ["[1", "{a: ", "a: b: c", "*nothing", "'open", "[" * 5000, "!!python/name:os.system x"],
    ids=["list", "map", "colon", "alias", "quote", "deep", "tag"],
)
def test_a_bench_set_value_that_is_not_yaml_is_a_usage_error(
    project: BenchProject, value: str
) -> None:
    with pytest.raises(ValueError, match="is not a valid YAML value"):
        parse_value(value)
    project.bench(tiny_bench())
    result = project.run("--bench-set", f"size={value}", subprocess=True)
    output = assert_clean_exit(result, allowed={4})
    assert "--bench-set size:" in output and "quote a plain string" in output


def test_a_bench_set_value_with_a_nul_byte_is_a_gate_1_error(project: BenchProject) -> None:
    project.bench(tiny_bench())
    result = project.run("--bench-set", 'size="3\\0"', subprocess=True)
    output = assert_clean_exit(result, allowed={2})
    assert "params.size: holds a NUL byte" in output
    assert not project.runs()
