"""The property-based test of issue 19: benchmark files and placeholder values generated from
the format's grammar (docs/benchmark/FORMAT.md), valid and hostile alike, never get past the
engine as anything but a result or a clear error.

In-process, a generated file goes through loading, gate 1, planning and the record writer:
each either succeeds or raises ConfigError, nothing else, and a loaded config's record reads
back equal. A few generated files run as real sessions with hostile placeholder values: the exit
code is one the engine gives on purpose, no traceback, nothing written outside the data home, no
injected command ran, and every finished trial is on disk.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hostilehelpers import (
    assert_clean_exit,
    assert_nothing_outside,
    assert_trials_on_disk,
    files_outside,
    private_env,
    snapshot,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_benchmark_agent.config import gate1
from pytest_benchmark_agent.config.models import load_config
from pytest_benchmark_agent.config.safe_yaml import parse_value, parse_yaml
from pytest_benchmark_agent.engine.plan import build_plan
from pytest_benchmark_agent.errors import ConfigError
from pytest_benchmark_agent.records.writer import dump_yaml

CANARY = "INJECTED"
IDENT = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
#: Text a user (or an attacker) may give a placeholder: shell syntax, quotes, newlines, unicode.
PAYLOADS = st.sampled_from(
    [
        f"; touch {CANARY}",
        f"$(touch {CANARY})",
        f"`touch {CANARY}`",
        f"a' ; touch {CANARY}; echo '",
        f'a" && touch {CANARY} && echo "',
        f"x\ntouch {CANARY}",
        f"| tee {CANARY}",
        "{size}",
        "-rf /",
        "*",
        "~",
        "",
    ]
)
TEXT = PAYLOADS | st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\0"))
VALUES = (
    st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.booleans()
    | TEXT
    | st.lists(st.integers(0, 9), max_size=3)
)
#: Numbers as a careless file writes them: fine, negative, huge, non-finite, text.
NUMBERS = st.sampled_from([1, 2, 0, -3, 10**12, 2.5, float("inf"), float("nan"), "5", "x", True])
FAST = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


@st.composite
def stages(draw: st.DrawFn, params: list[str]) -> dict[str, Any]:
    names = params + ["seed", "out", "data", "undeclared"]
    used = draw(st.lists(st.sampled_from(names), max_size=3))
    stage: dict[str, Any] = {
        "name": draw(IDENT),
        "kind": draw(st.sampled_from(["prep", "measure", "other"])),
        "cmd": " ".join(f"echo {{{n}}};" for n in used) + " echo score=1",
    }
    if draw(st.booleans()):
        stage["produces"] = draw(
            st.lists(st.sampled_from(["data", "../up", "a/b", ""]), max_size=2)
        )
    if draw(st.booleans()):
        stage["needs"] = draw(st.lists(IDENT, max_size=2))
    if draw(st.booleans()):
        stage["env"] = draw(st.dictionaries(st.sampled_from(["OK", "A=B", "", "TOKEN"]), TEXT))
    if draw(st.booleans()):
        stage["metrics_from"] = draw(
            st.sampled_from(
                [{"stdout": True, "fields": ["score"]}, {"file": "{out}/m.json"}, {"fields": ["x"]}]
            )
        )
    if draw(st.booleans()):
        stage[draw(st.sampled_from(["mem_mb", "timeout_s", "gpus"]))] = draw(NUMBERS)
    return stage


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """A benchmark file from FORMAT.md's grammar, each field valid or not."""
    params = draw(st.dictionaries(IDENT, VALUES, min_size=1, max_size=4))
    document: dict[str, Any] = {"name": draw(IDENT | TEXT), "params": params}
    if draw(st.booleans()):
        document["treatment_variable"] = draw(st.sampled_from([*params, "nope"]))
        document["treatments"] = draw(st.lists(VALUES, min_size=0, max_size=3))
    if draw(st.booleans()):
        document["replicates"] = draw(
            NUMBERS | st.fixed_dictionaries({"min": NUMBERS, "max": NUMBERS})
        )
    document["stages"] = draw(st.lists(stages(list(params)), max_size=3))
    document["metrics"] = draw(
        st.dictionaries(
            st.sampled_from(["score", "wall_s", "other"]),
            st.fixed_dictionaries(
                {"direction": st.sampled_from(["lower", "higher", "equal", "up"])},
                optional={
                    "primary": st.booleans(),
                    "noise_threshold": NUMBERS | st.sampled_from(["5%", "x%"]),
                    "min_replicates": NUMBERS,
                },
            ),
            max_size=2,
        )
    )
    if draw(st.booleans()):
        document["resources"] = {"mem_mb": draw(NUMBERS)}
    if draw(st.booleans()):
        document[draw(st.sampled_from(["bugdet", "seeds", "env_vars"]))] = draw(VALUES)
    return document


@st.composite
def near_valid(draw: st.DrawFn) -> dict[str, Any]:
    """A file that passes gate 1 as generated, but for at most one field drawn from
    :func:`documents`: the placeholder values, treatments and sizes are generated."""
    values = draw(st.lists(VALUES, min_size=2, max_size=3, unique_by=str))
    document = _runnable(values)
    document["params"].update(draw(st.dictionaries(IDENT, VALUES, max_size=2)))
    document["replicates"] = draw(st.integers(1, 3))
    if draw(st.booleans()):
        wild = draw(documents())
        key = draw(st.sampled_from(sorted(wild)))
        document[key] = wild[key]
    return document


def _hostile_text(document: dict[str, Any], mutation: int) -> str:
    """The file's text, sometimes damaged as an editor or an attacker would."""
    text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    if mutation == 1:
        text += "name: again\n"  # a duplicate key
    elif mutation == 2:
        text += "x: &a [q, q, q, q, q, q, q, q, q, q]\n" + "".join(
            f"x{i}: &a{i} [{', '.join([f'*a{i - 1}' if i else '*a'] * 10)}]\n" for i in range(7)
        )
    elif mutation == 3:
        text = text[: len(text) // 2]  # a torn file
    return text


@FAST
@given(documents() | near_valid(), st.sampled_from([0, 0, 0, 1, 2, 3]))
def test_a_generated_file_is_planned_or_refused_clearly(document: dict, mutation: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "bench.yaml")
        path.write_text(_hostile_text(document, mutation))
        try:
            config = load_config(path)
            gate1.check(config, path)
            build_plan(config, path)
        except ConfigError as error:
            assert str(path) in str(error)
            return
        record = config.model_dump(mode="json", exclude_none=True)
        assert parse_yaml(dump_yaml(record)) == record


@FAST
@given(TEXT | st.text(st.sampled_from("[]{}:&*!|>'\"#%@`-? ,\n\t\\")))
def test_a_placeholder_value_is_read_or_refused_clearly(text: str) -> None:
    """``--bench-set name=TEXT``: a value or a ValueError saying why, nothing else."""
    try:
        value = parse_value(text)
    except ValueError as error:
        assert "is not a valid YAML value" in str(error)
        return
    assert parse_yaml(dump_yaml({"v": value})) == {"v": value}


def _runnable(values: list[str]) -> dict[str, Any]:
    """A file that runs: the treatment variable's values are the generated text."""
    return {
        "name": "prop",
        "params": {"p": values[0], "n": 3},
        "treatment_variable": "p",
        "treatments": values,
        "replicates": 1,
        "stages": [
            {
                "name": "build",
                "kind": "prep",
                "cmd": "printf '%s' {p} > {data}",
                "produces": ["data"],
            },
            {
                "name": "measure",
                "kind": "measure",
                "needs": ["build"],
                "cmd": "cat {data} > /dev/null; printf '%s' {p} > /dev/null; echo score={n}",
                "metrics_from": {"stdout": True, "fields": ["score"]},
            },
        ],
        "metrics": {"score": {"direction": "higher", "primary": True}},
    }


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(TEXT, min_size=2, max_size=2, unique=True))
def test_a_generated_session_keeps_every_invariant(values: list[str]) -> None:
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        (folder / "bench.yaml").write_text(yaml.safe_dump(_runnable(values), allow_unicode=True))
        home = folder / "home"
        before = snapshot(folder)
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "--bench", "-p", "no:cacheprovider"]
            + ["-p", "no:randomly", "--bench-home", str(home), "bench.yaml"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert_clean_exit(result)
        assert_nothing_outside(home, before, folder)
        assert not list(folder.rglob(CANARY)), "an injected command ran"
        for run_dir in sorted((home / "runs").iterdir()) if (home / "runs").is_dir() else []:
            assert_trials_on_disk(run_dir)


#: What no human-facing output may show raw: terminal controls (CSI, OSC, BEL, a C1 CSI),
#: bidi controls, and Markdown/HTML that opens a tag or a comment.
RAW_CONTROLS = ["\x1b", "\x07", "\x9b", "\u202e", "\u2066", "\u200f"]
MARKUP = ["<script>", "<!--"]
SECRET = "Prop-s3cret-Token-77"
HOSTILE = st.lists(
    st.sampled_from(["\x1b[2J", "\x1b]0;t\x07", "\x9b1A", "\u202e", "\u2066", "\u200f"] + MARKUP)
    | st.text(st.characters(codec="ascii", exclude_characters="\0\n\r`"), max_size=4),
    min_size=1,
    max_size=4,
).map("".join)


def _outputs(folder: Path, home: Path, terminal: str) -> dict[str, str]:
    """Every human-facing output of the session: terminal, reports, index, step summary."""
    found = {"terminal": terminal, "step summary": (folder / "summary.md").read_text()}
    found["results_index.md"] = (home / "results_index.md").read_text()
    for run_dir in (home / "runs").iterdir():
        for name in ("report.md", "report.html"):
            found[f"{run_dir.name}/{name}"] = (run_dir / name).read_text()
    return found


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(HOSTILE, min_size=2, max_size=2, unique_by=lambda s: s.strip()), HOSTILE)
def test_hostile_labels_and_stage_output_never_reach_an_output_raw(
    labels: list[str], noise: str
) -> None:
    labels = [f"t{index}{label}" for index, label in enumerate(labels)]
    document = _runnable(labels)
    document["params"]["api_token"] = "given-on-the-command-line"
    document["params"]["noise"] = noise
    document["stages"][1]["cmd"] = (
        "printf '%s %s\\n' {noise} {api_token} >&2; printf '%s' {p} > /dev/null; exit 3"
    )
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        (folder / "bench.yaml").write_text(yaml.safe_dump(document, allow_unicode=True))
        home = folder / "home"
        env = private_env(folder, GITHUB_STEP_SUMMARY=str(folder / "summary.md"))
        before = snapshot(folder)
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "--bench", "-p", "no:cacheprovider", "-s"]
            + ["--bench-home", str(home), f"--bench-set=api_token={SECRET}", "bench.yaml"],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        terminal = assert_clean_exit(result, {1})
        outside = files_outside(home, before, folder)
        assert outside == [str(folder / "summary.md")], outside  # GitHub's file, appended
        for where, text in _outputs(folder, home, terminal).items():
            assert SECRET not in text, f"the secret is in {where}"
            for raw in RAW_CONTROLS:
                assert raw not in text, f"{raw!r} is in {where}"
            if where.endswith(".html"):
                assert "<script>" not in text and "<!--" not in text, where
            elif where != "terminal":  # Markdown: HTML is inert only inside a code span
                outside_code = re.sub(r"`[^`\n]*`", "", text)
                assert not any(tag in outside_code for tag in MARKUP), where
