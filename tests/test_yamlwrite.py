"""The records' YAML writer: what it writes loads back equal, with PyYAML's reader."""

from __future__ import annotations

import functools
import math
import random
from pathlib import Path

import pytest
import yaml

from pytest_benchmark_agent.records.writer import dump_yaml
from pytest_benchmark_agent.records.yamlwrite import to_yaml

TRICKY_STRINGS = [
    "",
    " ",
    "a ",
    " a",
    "yes",
    "No",
    "on",
    "OFF",
    "null",
    "~",
    "y",
    "n",
    "true",
    "False",
    "1",
    "-1",
    "0x1f",
    "0o7",
    "1_000",
    "1:20",
    "1.5",
    "1e-05",
    ".inf",
    "-.inf",
    ".nan",
    "NaN",
    "2026-12-02",
    "2026-12-02T14:05:11.120Z",
    "<<",
    "=",
    "- a",
    "? a",
    "a: b",
    "a #b",
    "a#b",
    "#x",
    "!tag",
    "&anchor",
    "*alias",
    "|",
    ">",
    "%",
    "@x",
    "`x",
    "'q'",
    '"q"',
    "{a}",
    "[a]",
    "a,b",
    "run[mode=a-rep0]",
    "stage run (prep)",
    "line\nbreak",
    "tab\there",
    "cr\r",
    "back\\slash",
    "\x00nul",
    "\x07bell",
    "\x1b[0m",
    "\x7f",
    "\x85nel",
    "\x9f",
    "\u00e9t\u00e9",
    "\u2028ls",
    "\u2029ps",
    "\ufeffbom",
    "\ufffe",
    "\uffff",
    "\U0001f600 emoji",
    "trailing\n",
    "a  double space",
    "/abs/path/x.txt",
    "_under",
    "x" * 300,
]

FLOATS = [
    0.0,
    -0.0,
    1.5,
    -2.25,
    1e-05,
    1e16,
    1.5e300,
    5e-324,
    123456789.123,
    math.inf,
    -math.inf,
    0.1 + 0.2,
]


def assert_round_trips(data):
    text = to_yaml(data)
    assert text is not None
    loaded = yaml.safe_load(text)
    assert _same(loaded, data), f"{data!r} came back as {loaded!r} from:\n{text}"
    assert yaml.load(text, Loader=yaml.CSafeLoader) == loaded  # the loader the package uses


def _same(a, b) -> bool:
    """Equality where NaN equals NaN and -0.0 keeps its sign."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize("text", TRICKY_STRINGS)
def test_every_tricky_string_comes_back_as_itself_as_value_key_and_item(text):
    assert_round_trips({"value": text, text: 1, "items": [text, [text]]})


@pytest.mark.parametrize("word", ["y", "Y", "n", "N", "yes", "Off", "null"])
def test_yaml_1_1_boolean_and_null_words_are_quoted_for_every_reader(word):
    assert to_yaml({"v": word}) == f'v: "{word}"\n'


@pytest.mark.parametrize("value", FLOATS + [math.nan, 0, -7, 10**30, True, False, None])
def test_numbers_booleans_and_null_keep_their_type(value):
    assert_round_trips({"v": value, "list": [value], "nested": {"deep": [[value]]}})


def test_empty_containers_and_top_level_shapes():
    for data in [{}, [], None, "text", 3, {"a": {}, "b": [], "c": [{}, []]}, [[1, [2, []]], {}]]:
        assert_round_trips(data)


def test_a_trial_record_shaped_document_round_trips_and_reads_like_pyyaml_block_style():
    trial = {
        "id": "run[mode=b-rep3]",
        "treatment": "b",
        "replicate": 3,
        "seed": 0,
        "status": "guard:memory",
        "metrics": {"wall_s": 0.00123, "p50_ms": 1e-05},
        "started": "2026-12-02T14:05:11.120Z",
        "peak_rss_mb": 3.25,
        "reason": "stage 'run' was stopped:\n  stderr (last lines):\nKilled",
        "guard_events": [{"kind": "memory", "peak_mb": 812.5}],
        "effective": {},
    }
    document = {
        "run_id": "2026-12-02T14-05-09-fts5-3f2a",
        "trials": [trial, trial],
        "summary": {"wall_s": {"a": {"n": 2, "median": 0.5}}},
        "caveats": [],
    }
    assert_round_trips(document)
    text = to_yaml(document)
    assert "trials:\n- id: run[mode=b-rep3]\n  treatment: b\n" in text
    assert "  guard_events:\n  - kind: memory\n    peak_mb: 812.5\n" in text


def test_randomly_built_documents_round_trip():
    rng = random.Random(20261202)
    alphabet = "ab:# -_/.[]=\n\t\"'\\\x85\u2028\x7f\u00e9\U0001f600yesno01e"

    def string():
        return rng.choice(
            TRICKY_STRINGS + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))]
        )

    def value(depth):
        kind = rng.randrange(7 if depth < 4 else 4)
        if kind == 0:
            return string()
        if kind == 1:
            return rng.choice(FLOATS + [rng.uniform(-1e6, 1e6), rng.random() * 1e-9])
        if kind == 2:
            return rng.choice([rng.randint(-(10**12), 10**12), True, False, None])
        if kind == 3:
            return rng.choice([{}, []])
        if kind in (4, 5):
            return {string(): value(depth + 1) for _ in range(rng.randint(1, 4))}
        return [value(depth + 1) for _ in range(rng.randint(1, 4))]

    for _ in range(300):
        assert_round_trips(value(0))


def test_a_lone_surrogate_is_written_as_the_replacement_character():
    """No YAML holds one (a name decoded with surrogateescape): U+FFFD, readable, never a crash."""
    for write in (to_yaml, dump_yaml):
        assert yaml.safe_load(write({"lone": "a\udc80b"})) == {"lone": "a\ufffdb"}
    assert yaml.safe_load(dump_yaml({"lone": "\udc80", "p": (1,)})) == {"lone": "\ufffd", "p": [1]}


@pytest.mark.parametrize(
    "data",
    [
        {1: "int key"},
        [b"bytes"],
        {"t": (1, 2)},
        {"s": {1, 2}},
        {"p": Path("/tmp/x")},
    ],
)
def test_other_types_are_left_to_pyyaml(data):
    assert to_yaml(data) is None
    pyyaml = functools.partial(
        yaml.dump, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True, width=100
    )
    try:
        expected = pyyaml(data)
    except (yaml.YAMLError, UnicodeError) as exc:  # what PyYAML cannot write still fails
        with pytest.raises(type(exc)):
            dump_yaml(data)
    else:
        assert dump_yaml(data) == expected
