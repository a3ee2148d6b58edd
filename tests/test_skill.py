"""The Claude Code plugin: manifests with documented fields only, and a SKILL.md whose every
``benchmark-agent`` command exists (run with ``--help``) and knows every option it is shown with."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
from importlib.metadata import version as installed_version
from pathlib import Path

import pytest
import yaml

from pytest_benchmark_agent.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
MARKETPLACE = ROOT / ".claude-plugin" / "marketplace.json"
PLUGIN = ROOT / "skill" / ".claude-plugin" / "plugin.json"
SKILL = ROOT / "skill" / "benchmark" / "SKILL.md"

# Field lists from Claude Code's documentation, "Plugin marketplaces" > "Marketplace schema"
# (https://code.claude.com/docs/en/plugin-marketplaces, and its reference page
# https://code.claude.com/docs/en/plugins/marketplace-reference): required and optional fields
# of the marketplace file, of its owner, and of a plugin entry.
MARKETPLACE_REQUIRED = {"name", "owner", "plugins"}
MARKETPLACE_FIELDS = MARKETPLACE_REQUIRED | {"$schema", "description", "version", "metadata"}
MARKETPLACE_METADATA_FIELDS = {"description", "version", "pluginRoot"}
OWNER_FIELDS = {"name", "email", "url"}
ENTRY_REQUIRED = {"name", "source"}
ENTRY_FIELDS = ENTRY_REQUIRED | {
    "description",
    "version",
    "author",
    "homepage",
    "repository",
    "license",
    "keywords",
    "category",
    "tags",
    "strict",
    "commands",
    "agents",
    "skills",
    "hooks",
    "mcpServers",
    "lspServers",
    "outputStyles",
}
# From "Plugins reference" > "Plugin manifest schema" (https://code.claude.com/docs/en/plugins-reference):
# the required field, the metadata fields and the component path fields of plugin.json.
PLUGIN_REQUIRED = {"name"}
PLUGIN_FIELDS = PLUGIN_REQUIRED | {
    "version",
    "description",
    "author",
    "homepage",
    "repository",
    "license",
    "keywords",
    "commands",
    "agents",
    "skills",
    "hooks",
    "mcpServers",
    "outputStyles",
    "lspServers",
}
AUTHOR_FIELDS = {"name", "email", "url"}
# From "Agent Skills" > frontmatter reference (https://code.claude.com/docs/en/skills).
SKILL_REQUIRED = {"name", "description", "argument-hint", "allowed-tools"}
SKILL_FIELDS = SKILL_REQUIRED | {
    "disable-model-invocation",
    "user-invocable",
    "model",
    "context",
    "agent",
    "hooks",
}
KEBAB = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
VERBS = (
    "plan",
    "run",
    "tune",
    "analyze",
    "compare",
    "history",
    "status",
    "reclassify",
    "domain",
    "bisect",
    "export",
    "import",
    "clean",
)


#: Verbs another issue owns that had not landed when this skill was written.
def test_marketplace_lists_the_plugin_with_documented_fields_only() -> None:
    market = json.loads(MARKETPLACE.read_text())
    assert MARKETPLACE_REQUIRED <= market.keys() <= MARKETPLACE_FIELDS
    assert market["name"] == "benchmark-tools" and KEBAB.match(market["name"])
    assert set(market["owner"]) <= OWNER_FIELDS and market["owner"]["name"]
    assert set(market.get("metadata", {})) <= MARKETPLACE_METADATA_FIELDS
    (entry,) = market["plugins"]
    assert ENTRY_REQUIRED <= entry.keys() <= ENTRY_FIELDS
    assert entry["name"] == "benchmark-agent"
    assert entry["source"].startswith("./")
    plugin_root = (MARKETPLACE.parents[1] / entry["source"]).resolve()
    assert (plugin_root / ".claude-plugin" / "plugin.json").resolve() == PLUGIN


def test_plugin_manifest_has_documented_fields_and_points_at_the_skill() -> None:
    plugin = json.loads(PLUGIN.read_text())
    market_entry = json.loads(MARKETPLACE.read_text())["plugins"][0]
    assert PLUGIN_REQUIRED <= plugin.keys() <= PLUGIN_FIELDS
    assert KEBAB.match(plugin["name"]) and plugin["name"] == market_entry["name"]
    assert set(plugin["author"]) <= AUTHOR_FIELDS
    assert (
        plugin["version"] == market_entry["version"] == installed_version("pytest-benchmark-agent")
    )
    skills_dir = plugin["skills"]
    assert skills_dir.startswith("./") and ".." not in skills_dir
    plugin_root = PLUGIN.parents[1]
    assert (plugin_root / skills_dir / "benchmark" / "SKILL.md").resolve() == SKILL


def test_the_plugin_is_a_folder_of_its_own_so_an_install_copies_nothing_else() -> None:
    """Claude Code copies a directory plugin whole (no .gitignore is read): with the repository
    root as the plugin, an install from a checkout took its untracked ``benchmark_data/`` and
    ``.venv/`` into the plugin cache. The plugin's folder holds its manifest and skill alone."""
    (entry,) = json.loads(MARKETPLACE.read_text())["plugins"]
    plugin_root = (ROOT / entry["source"]).resolve()
    assert plugin_root != ROOT and ROOT in plugin_root.parents
    assert sorted(path.name for path in plugin_root.iterdir()) == [".claude-plugin", "benchmark"]
    assert not (plugin_root / "benchmark_data").exists()


def _frontmatter() -> dict:
    text = SKILL.read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n", 2)[1])


def test_skill_frontmatter_and_a_section_per_verb() -> None:
    front = _frontmatter()
    assert SKILL_REQUIRED <= front.keys() <= SKILL_FIELDS
    assert front["name"] == "benchmark" == SKILL.parent.name
    assert len(front["description"]) > 80
    assert all(verb in front["argument-hint"] for verb in VERBS)
    assert "Bash(benchmark-agent:*)" in front["allowed-tools"]
    headings = re.findall(r"^## (\S+)", SKILL.read_text(), flags=re.M)
    assert sorted(headings) == sorted(VERBS)


def _mentions() -> dict[str, list[list[str]]]:
    """Every ``benchmark-agent ...`` command in SKILL.md's code spans, by its verb."""
    body = SKILL.read_text().split("---\n", 2)[2]
    spans = re.findall(r"`([^`\n]*)`", body)
    found: dict[str, list[list[str]]] = {}
    for span in spans:
        for match in re.finditer(r"(?<![\w.-])benchmark-agent\s+(.*)", span):
            words = shlex.split(match.group(1))
            words = words[: words.index("--")] if "--" in words else words
            while words[:1] == ["--home"]:
                words = words[2:]
            if words and re.fullmatch(r"[a-z]+", words[0]):
                found.setdefault(words[0], []).append(words)
    return found


MENTIONS = _mentions()


def test_skill_names_a_command_for_every_verb() -> None:
    assert set(VERBS) <= MENTIONS.keys()
    assert {"lesson", "risk"} <= MENTIONS.keys()


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@pytest.mark.parametrize("verb", sorted(MENTIONS))
def test_every_command_in_the_skill_runs_with_help(verb: str) -> None:
    """Each command exists in ``benchmark-agent`` and accepts every option SKILL.md shows."""
    flags_by_path: dict[tuple[str, ...], set[str]] = {}
    for words in MENTIONS[verb]:
        parser, path = build_parser(), ()
        for word in words:
            choices = _subparsers(parser)
            if word not in choices:
                break
            parser, path = choices[word], (*path, word)
        assert path, f"SKILL.md names 'benchmark-agent {' '.join(words)}': no such verb"
        known = {flag for action in parser._actions for flag in action.option_strings}
        flags = {w.split("=")[0] for w in words if w.startswith("--")}
        assert flags <= known, f"'benchmark-agent {' '.join(words)}': unknown {flags - known}"
        flags_by_path.setdefault(path, set()).update(flags)
    for path, flags in flags_by_path.items():
        result = subprocess.run(
            ["benchmark-agent", *path, "--help"], capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
        assert all(flag in result.stdout for flag in flags)


def test_the_skill_installs_the_engine_from_outside_the_plugin() -> None:
    """The installed plugin is ``skill/`` alone, with no pyproject.toml: an install "from this
    plugin's folder" cannot work there. The skill checks the engine, names an install that works
    from anywhere, and its allowed tools let it run that install."""
    plugin_root = PLUGIN.parents[1]
    assert not (plugin_root / "pyproject.toml").exists()
    body = SKILL.read_text().split("---\n", 2)[2]
    assert "pip install -e" not in body and "plugin's folder" not in body
    assert "`benchmark-agent --version`" in body
    installs = re.findall(r"`(pip install [^`]+)`", body)
    assert "pip install pytest-benchmark-agent" in installs
    assert any("git+https://" in command for command in installs)
    assert "Bash(pip install:*)" in _frontmatter()["allowed-tools"]


@pytest.mark.parametrize("manifest", [PLUGIN.parents[1], MARKETPLACE.parents[1]])
def test_claude_code_validates_the_plugin_and_marketplace_strictly(manifest: Path) -> None:
    """Claude Code's own validator, warnings as errors, where it is installed
    (``npm install -g @anthropic-ai/claude-code``)."""
    claude = shutil.which("claude")
    if claude is None:
        pytest.skip(
            "Claude Code (`claude`) is not on PATH: npm install -g @anthropic-ai/claude-code"
        )
    result = subprocess.run(
        [claude, "plugin", "validate", "--strict", str(manifest)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation passed" in result.stdout


def test_claude_code_refuses_a_plugin_with_an_unknown_field(tmp_path: Path) -> None:
    """The strict validation above can fail: an unknown manifest field is refused."""
    claude = shutil.which("claude")
    if claude is None:
        pytest.skip(
            "Claude Code (`claude`) is not on PATH: npm install -g @anthropic-ai/claude-code"
        )
    plugin = tmp_path / "plugin"
    shutil.copytree(PLUGIN.parents[1], plugin)
    manifest = plugin / ".claude-plugin" / "plugin.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "installCommand": "pip install -e ."}))
    result = subprocess.run(
        [claude, "plugin", "validate", "--strict", str(plugin)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0, result.stdout
