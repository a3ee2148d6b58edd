"""``benchmark-agent schema [-o FILE]``: the JSON Schema of the benchmark file.

Generated from the config's models, so it always matches what ``pytest --bench`` accepts; the
copy shipped as ``docs/benchmark/bench.schema.json`` is this verb's output. Editors validate
and complete a ``bench.yaml`` whose first line names it::

    # yaml-language-server: $schema=../../docs/benchmark/bench.schema.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pytest_benchmark_agent.util.fsutil import atomic_write


def schema_text() -> str:
    """The schema as the shipped file holds it: JSON, two-space indented, a final newline."""
    from pytest_benchmark_agent.config.models import json_schema  # pydantic loads only here

    return json.dumps(json_schema(), indent=2) + "\n"


def cmd_schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema of the benchmark file (bench.yaml), or write it with -o FILE."""
    text = schema_text()
    if args.output:
        atomic_write(Path(args.output), text)
    else:
        print(text, end="")
    return 0


def register(verbs: argparse._SubParsersAction) -> None:
    schema = verbs.add_parser("schema", help=cmd_schema.__doc__, description=cmd_schema.__doc__)
    schema.add_argument(
        "-o", "--output", metavar="FILE", help="write the schema to FILE instead of printing it"
    )
    schema.set_defaults(func=cmd_schema)
