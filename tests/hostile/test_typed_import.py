"""Issue 45, point 1: ``import`` and every verb read a run through the typed loader.

An export whose fields have the wrong type or value (a string or list code identity, an
integer ``started``, a control value of 1e308, a tag or name holding ESC, an OSC 8 link or
U+202E) is refused naming the field, before anything is written; a run already on the home
that the loader refuses is skipped by every verb with one warning naming it, and breaks no
other run (it made ``history --changes`` and ``publish`` crash for the whole home, and
``reclassify`` raise KeyError).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hostilehelpers import assert_no_raw
from recordedrun import BIDI, ESC, OSC8, RAW, Recorded, renamed

from pytest_benchmark_agent.records.runcheck import RecordFieldError, check_run_files


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Recorded, dict[str, Any]]:
    """A real run of a two-treatment benchmark, and its export."""
    folder = Recorded(tmp_path_factory.mktemp("typed"))
    folder.session()
    return folder, folder.export()


def _control_value(document: dict[str, Any]) -> None:
    for trial in document["trials"]:
        if trial["treatment"] == document["record"]["control"]:
            trial["metrics"]["score"] = 1e308


EDITS: dict[str, tuple[Callable[[dict[str, Any]], Any], str]] = {
    "identity-string": (
        lambda d: d["config"]["fingerprint"].update(code_identity="abc1234"),
        "config.fingerprint.code_identity: 'abc1234' is not a mapping",
    ),
    "identity-list": (
        lambda d: d["config"]["fingerprint"].update(code_identity=["abc", 1]),
        "config.fingerprint.code_identity: a list is not a mapping",
    ),
    "started-integer": (
        lambda d: d["record"].update(started=1765000000),
        "record.started: 1765000000 is not text",
    ),
    "control-1e308": (_control_value, ".metrics.score: 1e+308 is beyond 1e+150"),
    "tag-osc8": (
        lambda d: d["record"].update(tag="RELIABLE" + OSC8),
        "record.tag: 'RELIABLE\\x1b]8;;https://evil.example/",
    ),
    "name-esc-bidi": (
        lambda d: d["record"].update(name=f"typed{ESC}[2J{BIDI}"),
        "record.name: 'typed\\x1b[2J\\u202e' is no benchmark name",
    ),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_an_export_of_the_wrong_type_is_refused_naming_the_field_and_writes_nothing(
    recorded: tuple[Recorded, dict[str, Any]], tmp_path: Path, case: str
) -> None:
    folder, exported = recorded
    edit, said = EDITS[case]
    document = renamed(exported, case)
    edit(document)
    path = tmp_path / f"{case}.json"
    path.write_text(json.dumps(document))
    home = tmp_path / "other-home"
    text = folder.checked("import", str(path), allowed={2}, home=home)
    assert said in text and str(path) in text and "fix:" in text
    assert_no_raw(text, RAW, "import's output")
    assert not home.exists() or not any(home.rglob("*.yaml")), "import wrote a record"


def test_the_same_export_unedited_imports_and_reads_back(
    recorded: tuple[Recorded, dict[str, Any]], tmp_path: Path
) -> None:
    folder, exported = recorded
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(renamed(exported, "plain")))
    home = tmp_path / "other-home"
    assert "imported plain (typed, " in folder.checked("import", str(path), home=home)
    assert "plain: complete" in folder.checked("status", "plain", home=home)


def _plant(run: Path, target: Path, file: str, edit: Callable[[dict[str, Any]], Any]) -> None:
    """A copy of ``run`` at ``target`` whose ``file`` was edited as a hostile import wrote it."""
    shutil.copytree(run, target)
    data = yaml.safe_load((target / file).read_text())
    edit(data)
    data["run_id"] = target.name
    (target / file).write_text(yaml.safe_dump(data, allow_unicode=True))


def _big(record: dict[str, Any]) -> None:
    for trial in record["trials"]:
        trial["metrics"]["score"] = 1e308


PLANTED: dict[str, tuple[str, Callable[[dict[str, Any]], Any]]] = {
    "x1-identity-string": (
        "config.yaml",
        lambda c: c["fingerprint"].update(code_identity="abc1234"),
    ),
    "x2-started-integer": ("results.yaml", lambda r: r.update(started=1765000000)),
    "x3-control-1e308": ("results.yaml", _big),
    "x4-tag-osc8": ("results.yaml", lambda r: r.update(tag="RELIABLE" + OSC8)),
    "x5-name-bidi": ("results.yaml", lambda r: r.update(name=f"typed{BIDI}")),
}


@pytest.fixture
def planted(recorded: tuple[Recorded, dict[str, Any]], tmp_path: Path) -> tuple[Recorded, Path]:
    """A copy of the recorded home holding, beside its good run, one run per hostile edit."""
    folder, _ = recorded
    home = tmp_path / "home"
    shutil.copytree(folder.home, home)
    good = folder.runs()[-1]
    for name, (file, edit) in PLANTED.items():
        _plant(good, home / "runs" / name, file, edit)
    return folder, home


@pytest.mark.parametrize(
    "verb",
    [["history"], ["history", "--changes"], ["publish", "SITE"], ["status"]],
    ids=["history", "changes", "publish", "status"],
)
def test_a_run_on_the_home_that_does_not_load_is_skipped_once_by_every_verb(
    planted: tuple[Recorded, Path], tmp_path: Path, verb: list[str]
) -> None:
    folder, home = planted
    args = [str(tmp_path / "site") if arg == "SITE" else arg for arg in verb]
    text = folder.checked(*args, home=home)
    assert_no_raw(text, RAW, " ".join(verb))
    for name in PLANTED:
        assert text.count(f"skipped: {home / 'runs' / name}/") == 1, (name, text)
    if verb == ["history"]:
        assert "complete    EXPLORATORY typed" in text


@pytest.mark.parametrize("name", ["x1-identity-string", "x4-tag-osc8"])
def test_a_verb_given_a_run_that_does_not_load_names_its_file_and_field(
    planted: tuple[Recorded, Path], name: str
) -> None:
    folder, home = planted
    good = folder.runs()[-1].name
    for args in (
        ["reclassify", name, "UNRELIABLE", "--why", "hostile"],
        ["status", name],
        ["compare", good, name],
        ["export", name, "--format", "markdown", "-o", "-"],
    ):
        text = folder.checked(*args, allowed={2}, home=home)
        assert f"{home / 'runs' / name}/" in text and "unreadable record (field " in text, text
        assert_no_raw(text, RAW, " ".join(args))
    assert "complete" in folder.checked("status", good, home=home)


FROZEN = {"config": {"metrics": {"score": {"direction": "lower"}, "sum": {"direction": "equal"}}}}


def _trial(**metrics: Any) -> dict[str, Any]:
    return {"id": "t", "treatment": "a", "replicate": 0, "status": "passed", "metrics": metrics}


@pytest.mark.parametrize(
    ("results", "frozen"),
    [
        ({}, {}),  # a run whose session has not written results.yaml yet
        ({"name": "n", "trials": [_trial(score=1.5, sum=10**200)]}, FROZEN),
        ({"name": "n", "spent": {"gpu_hours": 0.0, "cost_usd": None}, "counts": {"passed": 2}}, {}),
    ],
    ids=["empty", "exact-integer", "spent-counts"],
)
def test_what_the_engine_writes_passes_the_typed_check(
    results: dict[str, Any], frozen: dict[str, Any]
) -> None:
    check_run_files(results, frozen)


@pytest.mark.parametrize(
    ("results", "frozen", "field"),
    [
        ({"trials": [_trial(score=float("nan"))]}, FROZEN, "trials[0].metrics.score"),
        ({"trials": [_trial(score=10**200)]}, FROZEN, "trials[0].metrics.score"),
        ({"spent": {"gpu_hours": float("inf")}}, {}, "spent.gpu_hours"),
        ({"counts": {"passed": "2"}}, {}, "counts.passed"),
        ({"state": "done"}, {}, "state"),
        ({"baseline": {"verdicts": {"m": {"b": {"verdict": "x"}}}}}, {}, "baseline.verdicts.m.b"),
        ({"verdicts_by_host": ["h"]}, {}, "verdicts_by_host"),
        ({}, {"fingerprint": {"code_identity": {"short": ["x"]}}}, "code_identity.short"),
    ],
    ids=["nan", "huge-integer", "inf-spent", "text-count", "state", "verdict", "by-host", "short"],
)
def test_a_field_of_the_wrong_type_or_value_is_named(
    results: dict[str, Any], frozen: dict[str, Any], field: str
) -> None:
    with pytest.raises(RecordFieldError) as refused:
        check_run_files({"name": "n", **results}, frozen)
    assert refused.value.field.endswith(field)
