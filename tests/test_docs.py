"""Every code block of docs/benchmark/README.md and DOMAIN_API.md runs, and the YAML reference
lists exactly the fields of the config models.

A fenced block preceded by ``<!-- file: NAME -->`` is written to NAME (appended when NAME was
written before) in the document's scratch folder; Python files are compiled, TOML and YAML
files parsed. Every other block must be ``bash``: it runs there with ``bash -euo pipefail``, in
document order, with ``$REPO`` set to the repository root. Any other block fails the test.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from pytest_benchmark_agent.config.metric import MetricSpec
from pytest_benchmark_agent.config.models import BenchmarkConfig, ManifestEntry
from pytest_benchmark_agent.config.resources import Budget, Resources
from pytest_benchmark_agent.config.stage import MetricsFrom, Stage

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs" / "benchmark"
_BLOCK = re.compile(
    r"(?:<!-- file: (?P<file>[^ ]+) -->\n)?```(?P<lang>[\w-]*)\n(?P<body>.*?)```", re.S
)


def blocks(text: str) -> list[tuple[str | None, str, str]]:
    """(file or None, language, body) of every fenced block, in order."""
    return [(m["file"], m["lang"], m["body"]) for m in _BLOCK.finditer(text)]


def test_blocks_are_parsed_whole() -> None:
    text = (DOCS / "README.md").read_text()
    assert len(blocks(text)) == text.count("```") // 2


@pytest.mark.happy
@pytest.mark.parametrize("doc", ["README.md", "DOMAIN_API.md"])
def test_every_code_block_runs(doc: str, tmp_path: Path) -> None:
    if doc == "DOMAIN_API.md":
        pytest.importorskip("seismic", reason="the worked example needs pyseismic-lsr")
    env = {**os.environ, "REPO": str(REPO)}
    env.pop("BENCHMARK_HOME", None)
    written: set[str] = set()
    for index, (file, lang, body) in enumerate(blocks((DOCS / doc).read_text())):
        where = f"{doc} block {index} ({lang or 'no language'})"
        if file is not None:
            path = tmp_path / file
            with path.open("a" if file in written else "w") as out:
                out.write(("\n\n" if file in written else "") + body)
            written.add(file)
            _check_file(path, where)
            continue
        assert lang == "bash", f"{where}: a block must be bash or be written to a file"
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", body],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{where} failed:\n{body}\n{done.stdout}\n{done.stderr}"


def _check_file(path: Path, where: str) -> None:
    if path.suffix == ".py":
        compile(path.read_text(), str(path), "exec")
    elif path.suffix == ".toml":
        tomllib = pytest.importorskip("tomllib", reason="TOML parsing needs Python 3.11")
        tomllib.loads(path.read_text())
    elif path.suffix in (".yaml", ".yml"):
        assert isinstance(yaml.safe_load(path.read_text()), dict), where


def test_the_yaml_reference_lists_every_model_field() -> None:
    text = (DOCS / "FORMAT.md").read_text()
    for model in (
        BenchmarkConfig,
        Stage,
        MetricsFrom,
        MetricSpec,
        Resources,
        Budget,
        ManifestEntry,
    ):
        section = text.split(f"### {model.__name__}\n", 1)
        assert len(section) == 2, f"FORMAT.md has no section for {model.__name__}"
        table = section[1].strip().split("\n\n", 1)[0]
        documented = re.findall(r"^\| `([\w]+)` \|", table, re.M)
        assert documented == list(model.model_fields), model.__name__


def test_the_design_table_names_every_module_under_its_package() -> None:
    rows = [line for line in (DOCS / "DESIGN.md").read_text().splitlines() if line.startswith("| ")]
    package, listed = "(top)", set()
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        package = cells[0].strip("`/") if cells[0] else package
        listed |= {(package, name) for name in re.findall(r"`([\w]+\.py)`", cells[1])}
    source = REPO / "pytest_benchmark_agent"
    modules = {
        ("(top)" if path.parent == source else path.parent.name, path.name)
        for path in source.rglob("*.py")
        if path.name != "__init__.py"
    }
    assert modules - listed == set(), "modules missing from DESIGN.md's table"
    assert listed - modules == set(), "DESIGN.md names modules that do not exist"
