"""``benchmark-agent`` follows a terminal program's conventions: ``-V``/``--version``, and help
texts in plain words (the docstrings they come from use reST, whose backquotes a terminal shows
as they are)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version

import pytest

from pytest_benchmark_agent.cli.main import _plain, build_parser

MARKUP = re.compile(r"``|:[a-z]+:`")


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, verb in action.choices.items():
                yield from _parsers(verb, (*path, name))


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flags(flag: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest_benchmark_agent.cli.main", flag],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"benchmark-agent {version('pytest-benchmark-agent')}"


def test_a_lowercase_v_is_not_the_version() -> None:
    """``-v`` means verbose to most programs; it is not taken as ``-V``."""
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["-v"])
    assert exc.value.code == 2


def test_no_help_text_shows_rest_markup() -> None:
    parsers = list(_parsers(build_parser()))
    assert len(parsers) > 15  # every verb and sub-verb was walked
    for path, parser in parsers:
        text = parser.format_help()
        assert not MARKUP.search(text), f"benchmark-agent {' '.join(path)} --help:\n{text}"
        assert "`" not in text, f"benchmark-agent {' '.join(path)} --help:\n{text}"


def test_markup_is_stripped_and_lone_backquotes_are_left() -> None:
    plain = _plain("see ``plan`` and :func:`.collect.select` or `x`")
    assert plain == "see plan and collect.select or x"
    assert (
        _plain("a lone ` stays, as does ``an open one") == "a lone ` stays, as does ``an open one"
    )
    assert _plain(None) is None


def test_the_pytest_options_help_shows_no_rest_markup() -> None:
    """``pytest --help``: the plugin's option group and its ini options, in plain words too."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:randomly"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    text = result.stdout
    start = text.index("benchmark sessions (pytest-benchmark-agent):")
    group = text[start : text.index("\n\n", start)]
    assert "--bench-against" in group
    ini = [line for line in text.splitlines() if line.lstrip().startswith("bench_")]
    assert ini, text
    for shown in (group, *ini):
        assert not MARKUP.search(shown) and "`" not in shown, shown
