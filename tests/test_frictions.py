"""The small frictions of issue 22, each through its real entry point: ``--version``, whole help
sentences, ``compare`` with the control first, treatments YAML would retype, ``clean`` of trial
scratch folders, the ``bench`` fixture's treatment lookup, and the skill's ``allowed-tools``."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import yaml
from benchhelpers import BenchProject
from gate2helpers import lazy_imports_done_outside_runs, run_as, scored  # noqa: F401

from pytest_benchmark_agent.cli.main import build_parser, main
from pytest_benchmark_agent.config.models import RetypedValueWarning, load_config
from pytest_benchmark_agent.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def cli(home: Path, capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--home", str(home), *words])
    return code, capsys.readouterr().out


def test_version_names_the_installed_package() -> None:
    from importlib.metadata import version

    done = subprocess.run(
        [sys.executable, "-m", "pytest_benchmark_agent.cli.main", "--version"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0
    assert done.stdout.strip() == f"benchmark-agent {version('pytest-benchmark-agent')}"


def test_every_verb_in_the_list_has_a_whole_sentence() -> None:
    parser = build_parser()
    verbs = next(a for a in parser._actions if a.dest == "verb")
    for listed in verbs._choices_actions:
        description = " ".join((verbs.choices[listed.dest].description or "").split())
        assert listed.help.endswith("."), (listed.dest, listed.help)
        assert description.startswith(listed.help), listed.dest  # its first sentence, whole
    plan = next(a.help for a in verbs._choices_actions if a.dest == "plan")
    assert "the latest RELIABLE run" in plan  # was cut after "RELIABLE"


def test_compare_lists_the_control_first(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    """Control ``b`` sorts after ``a``: its row still comes first."""
    scored(project, params={"mode": "b", "size": 3}, treatments=["b", "a"])
    run_as(project, "r1")
    run_as(project, "r2")
    code, out = cli(project.home, capsys, "compare", "r1", "r2")
    assert code == 0, out
    section = out.split("`score`", 1)[1]
    rows = [line.split()[0] for line in section.splitlines() if re.match(r"  [ab] ", line)]
    assert rows == ["b", "a"]


def _bench_file(tmp_path: Path, treatments: str) -> Path:
    path = tmp_path / "bench.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            name: typed
            params: {{version: 3.9}}
            treatment_variable: version
            treatments: {treatments}
            stages:
              - {{name: m, kind: measure, cmd: "echo {{version}}"}}
            """
        )
    )
    return path


def test_a_word_yaml_reads_as_a_boolean_is_refused_naming_the_treatment(tmp_path: Path) -> None:
    path = _bench_file(tmp_path, '[3.9, "3.10", no]')
    with pytest.raises(ConfigError) as error:
        load_config(path)
    text = str(error.value)
    assert str(path) in text
    assert "treatments[2]: is typed no but YAML reads it as false" in text
    assert "quote it to keep it as written: 'no'" in text and "FORMAT.md" in text
    assert "treatments[1]" not in text  # quoted: read as written


def test_two_spellings_of_one_number_are_refused(tmp_path: Path) -> None:
    same = r"treatments\[1\]: is typed 3.90 .* the same value as 3.9"
    with pytest.raises(ConfigError, match=same):
        load_config(_bench_file(tmp_path, "[3.9, 3.90]"))


def test_a_number_spelled_otherwise_warns_with_both_spellings(tmp_path: Path) -> None:
    both = r"treatments\[1\] is typed 3.10 and YAML reads it as 3.1"
    with pytest.warns(RetypedValueWarning, match=both):
        config = load_config(_bench_file(tmp_path, "[3.9, 3.10]"))
    assert config.treatments == [3.9, 3.1]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RetypedValueWarning)  # quoted: no warning
        assert load_config(_bench_file(tmp_path, '[3.9, "3.10"]')).treatments == [3.9, "3.10"]


def test_clean_removes_old_scratch_folders_and_keeps_records_and_reliable_runs(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    scored(project, replicates=7)
    run_as(project, "r1")
    second = run_as(project, "r2")  # reproduces r1: RELIABLE
    assert second["tag"] == "RELIABLE"
    runs = project.home / "runs"
    assert (runs / "r1" / "trials").is_dir() and (runs / "r2" / "trials").is_dir()

    code, out = cli(project.home, capsys, "clean", "--keep", "0", "--dry-run")
    assert code == 0
    assert "would remove runs/r1/trials (" in out and "r2" not in out
    assert (runs / "r1" / "trials").is_dir()  # a dry run removes nothing

    code, out = cli(project.home, capsys, "clean", "--keep", "0", "--older-than", "30")
    assert code == 0 and "0 run(s)' trial folders" in out  # both finished just now

    code, out = cli(project.home, capsys, "clean", "--keep", "0")
    assert code == 0 and "removed runs/r1/trials (" in out
    assert not (runs / "r1" / "trials").exists()
    assert (runs / "r2" / "trials").is_dir()  # a RELIABLE run's evidence stays
    for name in ("results.yaml", "trials.jsonl", "config.yaml", "report.md", "report.html"):
        assert (runs / "r1" / name).is_file(), name
    assert cli(project.home, capsys, "analyze", "r1")[0] == 0  # the record still reads


def test_clean_keeps_the_newest_runs_of_each_name_by_default(
    project: BenchProject, capsys: pytest.CaptureFixture[str]
) -> None:
    scored(project, replicates=7)
    run_as(project, "r1")
    code, out = cli(project.home, capsys, "clean")
    assert code == 0 and "0 run(s)' trial folders" in out  # --keep 1: the newest keeps its own
    assert (project.home / "runs" / "r1" / "trials").is_dir()


def test_the_bench_fixture_finds_int_treatments_and_lists_them(bench, tmp_path) -> None:
    path = tmp_path / "ints.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "ints",
                "params": {"level": 1},
                "treatment_variable": "level",
                "treatments": [1, 9],
                "replicates": 2,
                "stages": [
                    {
                        "name": "m",
                        "kind": "measure",
                        "cmd": "echo score={level}",
                        "metrics_from": {"stdout": True, "fields": ["score"]},
                    }
                ],
                "metrics": {"score": {"direction": "higher", "primary": True}},
            }
        )
    )
    result = bench.run(path)
    assert result.treatments == ["1", "9"]
    assert result.verdict("score", 9) is result.verdict("score", "9")
    with pytest.raises(KeyError) as error:
        result.verdict("score", 5)
    assert "the run's treatments are ['1', '9']" in str(error.value)


def test_the_skills_allowed_tools_cover_every_command_it_tells_the_agent_to_run() -> None:
    text = (ROOT / "skill" / "benchmark" / "SKILL.md").read_text()
    front = yaml.safe_load(text.split("---", 2)[1])
    prefixes = re.findall(r"Bash\(([^)]*?):\*\)", front["allowed-tools"])
    commands = re.findall(r"`((?:benchmark-agent|pytest|python|pip|kill)\b[^`]*)`", text)
    assert commands
    for command in commands:
        assert any(command.startswith(prefix) for prefix in prefixes), command
    assert "/benchmark-agent:benchmark" in text and not re.search(r"`/benchmark[ `]", text)
