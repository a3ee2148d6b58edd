"""A benchmark file as the session runs it: validated, its recipe merged in, its Domain compiled.

Loading sits above both config/ (the file's models, its recipe) and the Domain layer (a Python
Domain compiles to stages), so it is the domains package's, and the engine, the tuner and the
verbs call it from above.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_benchmark_agent.config.models import BenchmarkConfig, load_config
from pytest_benchmark_agent.config.recipe import apply_recipe
from pytest_benchmark_agent.util import redact


def expand(config: BenchmarkConfig, path: Path) -> BenchmarkConfig:
    """What gate 1 checks and the plan runs: the recipe merged in, the domain compiled.

    The Domain API (~18 ms to import) loads only for a Python Domain."""
    merged = apply_recipe(config, path)
    if merged.domain == "command":
        return merged
    from pytest_benchmark_agent.domains.api import expand_domain  # Domain files only

    return expand_domain(merged, path)


def load_benchmark(path: Path | str, overrides: dict[str, Any] | None = None) -> BenchmarkConfig:
    """:func:`~.config.models.load_config`, then :func:`expand`: the config as the session runs
    it. Its secrets are registered: every record this process writes hides them."""
    config = expand(load_config(path, overrides), Path(path))
    redact.register(config)
    return config
