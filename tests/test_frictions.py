"""The small frictions of issue 22, each through its real entry point: ``--version``, whole help
sentences, ``compare`` with the control first (on records a session would leave), treatments
YAML would retype, ``clean`` of trial scratch folders, the ``bench`` fixture's treatment lookup,
and the skill's ``allowed-tools``."""

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
from support.records import constant, recorded, scored_config

from pytest_benchmark_agent.cli.main import build_parser, main
from pytest_benchmark_agent.config.models import load_config
from pytest_benchmark_agent.config.retyped import RetypedValueWarning
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
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Control ``b`` sorts after ``a``: its row still comes first."""
    home = tmp_path / "benchmark_data"
    config = scored_config(params={"mode": "b", "size": 3}, treatments=["b", "a"])
    for run_id in ("r1", "r2"):
        recorded(home, run_id, {"score": constant({"b": 9, "a": 6})}, config=config)
    code, out = cli(home, capsys, "compare", "r1", "r2")
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


def test_a_param_yaml_retypes_is_a_gate1_warning_in_a_real_session(project: BenchProject) -> None:
    """Params warn as treatments do, for every coercion (none is refused): the file, the
    field, the value as typed and as read, and the fix; the session runs with the value read."""
    project.write(
        "bench.yaml",
        """\
        name: typed
        params: {mode: a, version: 3.10, zip: no, big: 1.0e+3, light: on, sizes: [1, 010],
                 kept: "3.10"}
        treatment_variable: mode
        treatments: [a, b]
        stages:
          - name: m
            kind: measure
            cmd: "echo score=1; echo {mode} {version} {zip} {big} {light} {sizes} {kept}"
            metrics_from: {stdout: true, fields: [score]}
        metrics: {score: {direction: higher, primary: true}}
        """,
    )
    with pytest.warns(RetypedValueWarning) as caught:
        load_config(project.path / "bench.yaml")
    said = [str(w.message) for w in caught]
    path = project.path / "bench.yaml"
    assert [line.split(" (quote it")[0] for line in said] == [
        f"{path}: params.version is typed 3.10 and YAML reads it as 3.1; it runs as 3.1",
        f"{path}: params.zip is typed no and YAML reads it as false; it runs as false",
        f"{path}: params.big is typed 1.0e+3 and YAML reads it as 1000.0; it runs as 1000.0",
        f"{path}: params.light is typed on and YAML reads it as true; it runs as true",
        f"{path}: params.sizes[1] is typed 010 and YAML reads it as 8; it runs as 8",
    ]
    assert "(quote it to keep it as written: '3.10'; see docs/benchmark/FORMAT.md)" in said[0]

    result = project.run("-rw")
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    assert "RetypedValueWarning" in out and "params.light is typed on" in out
    assert not any("params.kept" in line for line in said)  # quoted: read as written
    stdout = Path(project.results()["trials"][0]["stdout"]).read_text()
    assert stdout.splitlines()[1] == "a 3.1 false 1000.0 true [1, 8] 3.10"  # as read


def test_a_param_word_yaml_reads_as_a_boolean_warns(tmp_path: Path) -> None:
    path = tmp_path / "bench.yaml"
    path.write_text(
        _bench_file(tmp_path, "[3.9, 4.0]")
        .read_text()
        .replace("params: {version: 3.9}", "params: {version: 3.9, compress: no}")
    )
    with pytest.warns(RetypedValueWarning, match=r"params.compress is typed no and YAML reads"):
        config = load_config(path)
    assert config.params["compress"] is False


def test_the_plugin_and_the_docs_name_the_skill_as_claude_code_shows_it() -> None:
    for manifest in ("skill/.claude-plugin/plugin.json", ".claude-plugin/marketplace.json"):
        text = (ROOT / manifest).read_text()
        assert "/benchmark-agent:benchmark skill" in text, manifest
    tracked = subprocess.run(
        ["git", "ls-files", "*.md", "*.json"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    bare = re.compile(r"(?<![\w/.-])/benchmark(?![\w/:.-])")  # not docs/benchmark, not :benchmark
    assert tracked
    for name in tracked:
        text = (ROOT / name).read_text(errors="replace")
        assert not bare.search(text), name


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
    assert result.treatments == ("1", "9")
    assert result.verdict("score", 9) is result.verdict("score", "9")
    with pytest.raises(KeyError) as error:
        result.verdict("score", 5)
    assert "judged are ['9'] (the control '1' is judged against)" in str(error.value)


def test_the_skills_allowed_tools_cover_every_command_it_tells_the_agent_to_run() -> None:
    text = (ROOT / "skill" / "benchmark" / "SKILL.md").read_text()
    front = yaml.safe_load(text.split("---", 2)[1])
    prefixes = re.findall(r"Bash\(([^)]*?):\*\)", front["allowed-tools"])
    commands = re.findall(r"`((?:benchmark-agent|pytest|python|pip|kill)\b[^`]*)`", text)
    assert commands
    for command in commands:
        assert any(command.startswith(prefix) for prefix in prefixes), command
    assert "/benchmark-agent:benchmark" in text and not re.search(r"`/benchmark[ `]", text)
