"""``direction: equal`` guards: kept exactly as the stage wrote them (an int of any size, else the
text), compared exactly within a run and across runs, recorded and shown verbatim, never
summarized with a mean."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml
from benchhelpers import BenchProject
from gate2helpers import lazy_imports_done_outside_runs, run_as  # noqa: F401

from pytest_benchmark_agent.cli.main import main
from pytest_benchmark_agent.config.models import load_config
from pytest_benchmark_agent.config.safe_yaml import parse_yaml
from pytest_benchmark_agent.engine.metrics import parse_metrics
from pytest_benchmark_agent.engine.plan import build_plan
from pytest_benchmark_agent.errors import MetricError
from pytest_benchmark_agent.judge import gate2 as judge
from pytest_benchmark_agent.judge.across import cross_verdicts
from pytest_benchmark_agent.records.record import RunRecord
from pytest_benchmark_agent.records.run import BenchRun
from pytest_benchmark_agent.records.writer import dump_yaml
from pytest_benchmark_agent.stats.analysis import Observation, PlainMetricRule, analyze_run
from pytest_benchmark_agent.stats.comparability import usable
from pytest_benchmark_agent.stats.describe import describe, describe_exact, show_value, values_text

BIG, NEXT = 2**53 + 1, 2**53  # one and the same float: 9007199254740993 and 9007199254740992
EQUAL = PlainMetricRule(direction="equal", guard=True)
SHA = "3f2a9c0e5b7d41e8a6c2f9b0d3e4a5b6c7d8e9f0a1b2c3d4e5f60718293a4b5c"
#: Texts a YAML 1.1 reader would take for numbers, booleans or null if they were written plain.
LOOKALIKES = [
    "1e10",
    "0x1f",
    "0123",
    "1_000",
    "12:30",
    ".5",
    "+1",
    "-0",
    "1.0",
    "0o17",
    "0b101",
    "Inf",
    ".inf",
    "NaN",
    "null",
    "~",
    "true",
    "yes",
    "y",
    "off",
    "2024-01-02",
]


# -- reading what the stage wrote -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "value"),
    [
        ("h=9007199254740993", BIG),
        ("h: -12", -12),
        ("h=0", 0),
        ("h=" + "9" * 60, int("9" * 60)),
        ("h=007", "007"),  # not canonical: the leading zeros are part of the value
        ("h=+7", "+7"),
        ("h=0x1f", "0x1f"),
        ("h=1e10", "1e10"),
        ("h=1.50", "1.50"),
        (f"h={SHA}", SHA),
        ("h=YWJjZA+/==", "YWJjZA+/=="),
        ('{"h": 9007199254740993, "x": 1}', BIG),
        ('{"h": "00ff"}', "00ff"),
        ('{"h": "7"}', "7"),  # a JSON string stays a string
        ('{"h": 1.50}', "1.50"),  # a JSON float as its literal, not rounded through a float
        ('{"h": true}', "true"),
    ],
)
def test_an_exact_metric_is_kept_as_the_stage_wrote_it(output: str, value: int | str) -> None:
    got = parse_metrics(f"warming up\n{output}\ndone\n", ["h"], "stdout", exact={"h"})["h"]
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (
            '{"h": [1, 2]}',
            "metric 'h' on stdout is [1, 2]: a metric compared exactly must be one "
            "value (an integer or a string), not a list, an object or null.",
        ),
        (
            '{"h": null}',
            "metric 'h' on stdout is None: a metric compared exactly must be one value",
        ),
        ("h=", "metric 'h' on stdout is empty; it must print 'h=<value>'."),
        ("other=1", "metric 'h' was not reported on stdout; it must print 'h=<value>'."),
    ],
)
def test_an_exact_metric_that_is_not_one_value_fails_naming_it(output: str, message: str) -> None:
    with pytest.raises(MetricError, match="^" + re.escape(message)):
        parse_metrics(output, ["h"], "stdout", exact={"h"})


def test_a_lower_or_higher_metric_must_still_be_a_number() -> None:
    with pytest.raises(
        MetricError,
        match=r"^metric 'lat' on stdout is 'deadbeef', not a number "
        r"\(a value compared exactly, such as a hash or a "
        r"checksum, needs `lat: \{direction: equal\}`\)",
    ):
        parse_metrics("lat=deadbeef", ["lat"], "stdout", exact={"h"})
    with pytest.raises(MetricError, match="not a finite number"):
        parse_metrics('{"lat": 1' + "0" * 400 + "}", ["lat"], "stdout")  # beyond a float
    values = parse_metrics('{"lat": 1.50, "n": 3}', ["lat", "n"], "stdout")
    assert values == {"lat": 1.5, "n": 3.0} and all(type(v) is float for v in values.values())


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (BIG, "9007199254740993"),
        (SHA, SHA),
        ("0x1f", "0x1f"),
        ("007", "007"),
        ("7", '"7"'),
        (4242.0, "4242"),
        (0.1, "0.1"),
        (1.318e15, "1318000000000000"),
    ],
)
def test_a_value_is_shown_as_recorded(value: int | str | float, text: str) -> None:
    assert show_value(value) == text


# -- comparing exactly ----------------------------------------------------------------------------


def _identity(control: list, treated: list, spec: PlainMetricRule = EQUAL) -> dict:
    observations = {
        "h": [Observation("a", k, None, v) for k, v in enumerate(control)]
        + [Observation("b", k, None, v) for k, v in enumerate(treated)]
    }
    return analyze_run(observations, {"h": spec}, ["a", "b"], "a").verdicts["h"]["b"].to_dict()


def test_integers_one_apart_beyond_a_floats_digits_differ() -> None:
    verdict = _identity([BIG] * 3, [NEXT] * 3)
    assert verdict["verdict"] == "regressed"
    assert verdict["reason"] == (
        "3 of 3 values differ from the control's 9007199254740993 (e.g. 9007199254740992)"
    )
    assert verdict["p"] is None and verdict["design"] == "identity"
    assert _identity([BIG] * 3, [BIG] * 3)["verdict"] == "no_change"


def test_hashes_are_compared_as_text() -> None:
    assert _identity([SHA] * 2, [SHA] * 2)["verdict"] == "no_change"
    assert _identity(["1e10"] * 2, ["1e10"] * 2)["verdict"] == "no_change"
    changed = _identity([SHA] * 3, [SHA, SHA.upper(), SHA])
    assert changed["verdict"] == "regressed"
    assert (
        changed["reason"] == f"1 of 3 values differ from the control's {SHA} (e.g. {SHA.upper()})"
    )
    # "10" and "1e1" are one float, "007" and 7 one int: as written they differ
    assert _identity(["10"], ["1e1"])["verdict"] == "regressed"
    assert _identity(["007"], [7])["reason"] == (
        "1 of 1 values differ from the control's 007 (e.g. 7)"
    )
    assert _identity(["7"], [7])["reason"] == (
        '1 of 1 values differ from the control\'s "7" (e.g. 7)'
    )  # JSON's "7" is not the int 7


def test_exact_values_never_reach_the_numeric_statistics() -> None:
    assert usable(EQUAL, BIG) is BIG and usable(EQUAL, SHA) is SHA
    assert usable(EQUAL, float("nan")) is None and usable(EQUAL, 2.5) == 2.5
    lower = PlainMetricRule(direction="lower")
    assert usable(lower, SHA) is None and usable(lower, 10**400) is None
    assert usable(lower, 3) == 3.0 and type(usable(lower, 3)) is float
    # a record whose metric is a number metric now, with the text of an exact one: ignored, said
    observations = {
        "lat": [Observation("a", k, None, SHA) for k in range(5)]
        + [Observation("b", k, None, 1.0) for k in range(5)]
    }
    result = analyze_run(observations, {"lat": lower}, ["a", "b"], "a")
    assert result.verdicts["lat"]["b"].reason == "no samples for the control"
    assert result.caveats == [
        "lat: 5 value(s) that are not numbers ignored (a value compared "
        "exactly needs direction: equal)"
    ]


def test_distinct_values_with_counts_are_the_summary() -> None:
    row = describe_exact([SHA, "0x1f", SHA, BIG])
    assert row == {
        "n": 4,
        "distinct": 3,
        "values": [
            {"value": SHA, "count": 2},
            {"value": "0x1f", "count": 1},
            {"value": BIG, "count": 1},
        ],
    }
    assert values_text(row, "`") == f"`{SHA}` x2, `0x1f` x1, `9007199254740993` x1"
    assert describe(["00ff", "00ff"]) == describe_exact(["00ff", "00ff"])  # text: never a mean


def _view(run_id: str, hashes: list) -> RunRecord:
    trials = [
        {
            "id": f"m[a-rep{k}]",
            "stage": "m",
            "treatment": "a",
            "replicate": k,
            "seed": None,
            "status": "passed",
            "metrics": {"h": value},
        }
        for k, value in enumerate(hashes)
    ]
    return RunRecord.from_dict(
        {
            "run_id": run_id,
            "name": "x",
            "tag": "RELIABLE",
            "state": "complete",
            "control": "a",
            "treatments": ["a"],
            "trials": trials,
        }
    )


def test_across_runs_the_values_are_compared_exactly() -> None:
    verdicts, _ = cross_verdicts(_view("new", [NEXT] * 3), _view("old", [BIG] * 3), {"h": EQUAL})
    assert verdicts["h"]["a"].regressed
    assert "9007199254740993 (e.g. 9007199254740992)" in (verdicts["h"]["a"].reason or "")
    verdicts, _ = cross_verdicts(_view("new", [SHA] * 3), _view("old", [SHA] * 3), {"h": EQUAL})
    assert verdicts["h"]["a"].no_change


def test_a_run_with_nothing_to_compare_reads_text_values_as_the_analysis_does(
    tmp_path: Path,
) -> None:
    metrics = {"t": {"direction": "lower", "primary": True}, "h": {"direction": "equal"}}
    document = {
        "name": "x",
        "params": {"mode": "a"},
        "treatment_variable": "mode",
        "treatments": ["a", "b"],
        "replicates": 3,
        "stages": [
            {
                "name": "m",
                "kind": "measure",
                "cmd": "echo {mode}",
                "metrics_from": {"stdout": True, "fields": ["t", "h"]},
            }
        ],
        "metrics": metrics,
    }
    (tmp_path / "bench.yaml").write_text(yaml.safe_dump(document))
    plan = build_plan(load_config(tmp_path / "bench.yaml"), tmp_path / "bench.yaml")
    run = BenchRun(plan=plan, home=tmp_path / "home", run_id="run-1")
    run.planned, run.state = list(plan.trials), "complete"
    for spec in run.planned:  # the control's trials alone passed, one with a changed hash
        trial = run.blank_trial(spec, "passed" if spec.treatment_label == "a" else "not_run")
        metrics = {"t": 1.0, "h": SHA if spec.replicate else "0x1f"}
        run.trials.append(dataclasses.replace(trial, metrics=metrics, host="h"))
    this = run.record()
    refused = judge._nothing_to_compare(this)
    assert refused is not None and refused == judge._analysed(this, None, None)
    assert "h: the control's own values are not all identical" in refused.caveats


# -- records: results.yaml and trials.jsonl hold them exactly -------------------------------------


def test_the_yaml_record_reads_back_every_value_as_written() -> None:
    values = [*LOOKALIKES, SHA, BIG, -BIG, 10**60, "YWJjZA+/==", "a: b", "#x"]
    document = {"trials": [{"metrics": {"h": value}} for value in values]}
    text = dump_yaml(document)
    for loaded in (parse_yaml(text), yaml.safe_load(text)):
        back = [trial["metrics"]["h"] for trial in loaded["trials"]]
        assert back == values and [type(v) for v in back] == [type(v) for v in values]


# -- end to end: real stages through pytest --bench -----------------------------------------------


def hashed(project: BenchProject, metric_kind: str = "equal", replicates: int = 2) -> None:
    """``measure.sh MODE`` prints ``score`` and the hash and digest in data/ for MODE (data
    outside the code, so changing it changes the result, not the fingerprint)."""
    project.write(
        "code/measure.sh",
        'echo score=5\necho "results_hash=$(cat data/hash-$1.txt)"\n'
        'echo "{\\"digest\\": \\"$(cat data/digest.txt)\\", '
        '\\"rows\\": $(cat data/rows.txt)}"\n',
    )
    project.bench(
        {
            "name": "hashed",
            "hypothesis": "b returns what a returns",
            "params": {"mode": "a"},
            "treatment_variable": "mode",
            "treatments": ["a", "b"],
            "replicates": replicates,
            "code": ["code"],
            "stages": [
                {
                    "name": "measure",
                    "kind": "measure",
                    "cmd": "sh code/measure.sh {mode}",
                    "metrics_from": {
                        "stdout": True,
                        "fields": ["score", "results_hash", "digest", "rows"],
                    },
                }
            ],
            "metrics": {
                "score": {"direction": "higher", "primary": True},
                "results_hash": {"direction": metric_kind, "guard": True},
                "digest": {"direction": "equal"},
                "rows": {"direction": "equal"},
            },
        }
    )


def data(
    project: BenchProject, a: object, b: object, digest: str = "1e10", rows: int = 10**30
) -> None:
    project.write("data/hash-a.txt", f"{a}\n")
    project.write("data/hash-b.txt", f"{b}\n")
    project.write("data/digest.txt", f"{digest}\n")
    project.write("data/rows.txt", f"{rows}\n")


def test_hashes_one_apart_are_a_regression_recorded_and_shown_verbatim(
    project: BenchProject,
) -> None:
    hashed(project)
    data(project, BIG, NEXT)
    result = project.run()
    out = result.stdout.str()
    run_dir = project.runs()[-1]
    raw = yaml.safe_load((run_dir / "results.yaml").read_text())
    journal = [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines()]
    for trials in (raw["trials"], journal):
        by = {t["treatment"]: t["metrics"] for t in trials}
        assert by["a"]["results_hash"] == BIG and by["b"]["results_hash"] == NEXT
        assert by["a"]["digest"] == "1e10" and by["a"]["rows"] == 10**30
    summary = raw["summary"]["results_hash"]
    assert summary["a"] == {"n": 2, "distinct": 1, "values": [{"value": BIG, "count": 2}]}
    assert summary["b"] == {"n": 2, "distinct": 1, "values": [{"value": NEXT, "count": 2}]}
    verdict = raw["verdicts"]["results_hash"]["b"]
    assert verdict["verdict"] == "regressed"
    assert verdict["reason"] == (
        "2 of 2 values differ from the control's 9007199254740993 (e.g. 9007199254740992)"
    )
    line = next(x for x in out.splitlines() if x.strip().startswith("results_hash"))
    assert line.split(None, 1)[1] == ("a: 9007199254740993 x2; b: 9007199254740992 x2 regressed")
    assert "e+15" not in out and "e+30" not in out
    report = (run_dir / "report.md").read_text()
    assert (
        "| `b` | 2 | `9007199254740992` x2 | regressed | 2 of 2 values differ from the "
        "control's 9007199254740993 (e.g. 9007199254740992) |" in report
    )
    assert "| `a` (control) | 2 | `1e10` x2 | - | - |" in report
    assert f"`{10**30}` x2" in report and "e+15" not in report and "e+30" not in report
    section = report.split("### `results_hash`", 1)[1].split("###", 1)[0]
    assert "mean" not in section and "CV" not in section and "median" not in section
    assert "b: guard results_hash regressed" in report


def test_hashes_that_look_like_numbers_stay_text_and_equal(project: BenchProject) -> None:
    hashed(project)
    data(project, "0x1f", "0x1f", digest=SHA)
    assert project.run().ret == 0
    run_dir = project.runs()[-1]
    text = (run_dir / "results.yaml").read_text()
    assert 'results_hash: "0x1f"' in text
    raw = yaml.safe_load(text)
    assert {t["metrics"]["results_hash"] for t in raw["trials"]} == {"0x1f"}
    assert {t["metrics"]["digest"] for t in raw["trials"]} == {SHA}
    assert raw["verdicts"]["results_hash"]["b"]["verdict"] == "no_change"
    assert raw["verdicts"]["digest"]["b"]["verdict"] == "no_change"
    assert raw["summary"]["digest"]["b"]["values"] == [{"value": SHA, "count": 2}]
    pytest.importorskip("matplotlib")
    assert not (run_dir / "plot-results_hash.png").exists()  # one value: nothing to draw
    assert (run_dir / "plot-score.png").is_file()


def test_a_lower_metric_printing_a_hash_fails_the_trial_naming_it(project: BenchProject) -> None:
    hashed(project, metric_kind="lower")
    data(project, "deadbeef", "deadbeef")
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert (
        "metric 'results_hash' on stdout is 'deadbeef', not a number (a value compared "
        "exactly, such as a hash or a checksum, needs `results_hash: {direction: equal}`)"
        in result.stdout.str()
    )
    trial = project.results()["trials"][0]
    assert trial["status"] == "failed" and "results_hash" not in trial["metrics"]


def test_a_hash_changed_since_an_earlier_run_is_a_regression_across_runs(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    hashed(project, replicates=6)  # one compared metric: 6 blocks can decide
    data(project, BIG, BIG)
    run_as(project, "r1")
    data(project, NEXT, NEXT)  # the results changed, the code and the config did not
    result = project.run(
        "--bench-run-id", "r2", "--bench-baseline", "r1", "--bench-fail-on", "regression"
    )
    assert result.ret == 1  # a guard that changed against the baseline fails the CI gate
    against = project.results()["baseline"]["verdicts"]
    why = "6 of 6 values differ from the control's 9007199254740993 (e.g. 9007199254740992)"
    assert against["results_hash"]["a"]["verdict"] == "regressed"
    assert against["results_hash"]["a"]["reason"] == why
    assert against["digest"]["a"]["verdict"] == against["rows"]["b"]["verdict"] == "no_change"
    capsys.readouterr()
    main(["--home", str(project.home), "compare", "r1", "r2"])
    rows = [
        line.split()
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("  a ") and why in line
    ]
    assert rows and rows[0][1:6] == [
        "9007199254740993",
        "x6",
        "9007199254740992",
        "x6",
        "regressed",
    ]


def test_the_plot_of_an_exact_metric_has_its_values_verbatim_as_its_rows(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from pytest_benchmark_agent.records.schema import TrialRecord
    from pytest_benchmark_agent.report.plots import PlotLayout, _figure, write_plots
    from pytest_benchmark_agent.stats.comparability import Verdict

    trials = [
        TrialRecord(
            id=f"m[{t}-rep{k}]",
            stage="m",
            status="passed",
            treatment=t,
            replicate=k,
            host="h",
            metrics={"h": NEXT if (t, k) == ("b", 1) else BIG, "t": 1.0 + k},
        )
        for k in range(3)
        for t in ("a", "b")
    ]
    axes = _figure("h", trials, ["a", "b"], {"b": Verdict("regressed")}, exact=True).axes[0]
    assert [tick.get_text() for tick in axes.get_yticklabels()] == [str(BIG), str(NEXT)]
    from matplotlib.collections import LineCollection

    lines = [c for c in axes.collections if type(c) is LineCollection]
    assert len(lines) == 1  # the blocks' lines, no median bars: the values are not numbers
    assert [list(segment[:, 1]) for segment in axes.collections[0].get_segments()] == [
        [0.0, 0.0],
        [0.0, 1.0],
        [0.0, 0.0],
    ]  # block 1's line goes to the other value
    files, note = write_plots(tmp_path, trials, ["h", "t"], ["a", "b"], {}, PlotLayout(exact={"h"}))
    assert files == ["plot-h.png", "plot-t.png"] and note is None
