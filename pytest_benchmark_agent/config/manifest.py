"""Gate 1's check of a recipe's or domain's provenance manifest: every param it lists is
declared (with why it is required, its default, and the value the latest RELIABLE run used),
and a ``must_match`` param is never what varies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_benchmark_agent.config.models import (
    BenchmarkConfig,
    treatment_variable,
)
from pytest_benchmark_agent.errors import Problem
from pytest_benchmark_agent.util.placeholders import as_text

#: The latest RELIABLE run of a benchmark, by its name: (run id, the params and seeds it used),
#: or None. The caller reads the records (judge/review.py); the manifest check shows it as a hint.
LatestReliable = Callable[[str], tuple[str, dict[str, Any]] | None]


def manifest_problems(config: BenchmarkConfig, latest: LatestReliable | None) -> list[Problem]:
    """The manifest's params missing from ``config`` or varying where they must match;
    ``latest`` gives a missing one's suggested value (none without it)."""
    if not config.manifest:
        return []
    owner = (
        f"recipe '{config.recipe}'"
        if config.recipe
        else f"domain '{config.domain}'"
        if config.domain != "command"
        else "this file"
    )
    missing = [
        name
        for name in config.manifest
        if (config.seeds is None if name == "seeds" else name not in config.params)
    ]
    reliable = latest(config.name) if latest and missing else None
    problems: list[Problem] = []
    for name, entry in config.manifest.items():
        if name in missing:
            field = "seeds" if name == "seeds" else f"params.{name}"
            default = (
                "it has no default: name the one you use"
                if entry.default is None
                else f"its default is {as_text(entry.default)!r}"
            )
            fix = (
                f"declare seeds: {as_text(entry.default or [1, 2, 3])}"
                if name == "seeds"
                else f"declare it under params: (even at its default), e.g. {name}: "
                f"{as_text(entry.default) if entry.default is not None else 'VALUE'}"
            )
            if reliable is not None and name in reliable[1]:
                fix += (
                    f"; the latest RELIABLE run {reliable[0]} used {as_text(reliable[1][name])!r}"
                )
            problems.append(
                (
                    field,
                    f"is required by the manifest of {owner}: {entry.why.rstrip('.')}; {default}.",
                    fix + ".",
                )
            )
        varying = {treatment_variable(config), *(config.search_space or {})}
        if entry.must_match and name in varying:
            problems.append(
                (
                    f"manifest.{name}",
                    f"must be the same in every compared run "
                    f"({entry.why.rstrip('.')}), so it cannot be what varies.",
                    f"keep {name} fixed and run one benchmark per {name}.",
                )
            )
    return problems
