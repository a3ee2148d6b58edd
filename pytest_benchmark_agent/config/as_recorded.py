"""Gate 1's checks that what runs is what config.yaml records: a param has one text on a
command line (no ``!!set``, whose order changes per session, no ``!!binary``, recorded decoded
but run as ``b'...'``), a command fits the kernel's limit for one argument, and a metric's name
is one the metrics parser can read (engine/metrics.py builds its line pattern from
:data:`METRIC_NAME`). Each returns ``(field, problem, fix)`` triples, as gate 1 does.
"""

from __future__ import annotations

import re
from typing import Any

from pytest_benchmark_agent.config.models import BenchmarkConfig
from pytest_benchmark_agent.util.placeholders import as_text

#: A metric's name as the metrics parser reads it on a ``name=value`` line
#: (engine/metrics.py builds its line pattern from this one).
METRIC_NAME = re.compile(r"[A-Za-z_][\w.@\-/]*")
#: The longest single argument Linux passes to a program (MAX_ARG_STRLEN: 32 pages of 4 KiB);
#: a stage's command is one argument of ``sh -c``.
MAX_ARGUMENT_BYTES = 128 << 10
#: Param values that have no one text on a command line: a set (unordered: substituted in a
#: different order per session) and bytes (``!!binary``: recorded decoded, run as ``b'...'``).
_NOT_SUBSTITUTABLE = (set, frozenset, bytes, bytearray)


def _odd_value(value: Any) -> str | None:
    """The YAML kind of a value no command can be given exactly (see above), or None."""
    if isinstance(value, _NOT_SUBSTITUTABLE):
        return "!!binary" if isinstance(value, bytes | bytearray) else "!!set"
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return next((kind for item in value if (kind := _odd_value(item))), None)
    return None


def param_value_problems(config: BenchmarkConfig) -> list[tuple[str, str, str]]:
    """Params and treatments whose value is a ``!!set`` or ``!!binary``: what ran would not be
    what config.yaml records."""
    found = [(f"params.{name}", value) for name, value in config.params.items()]
    found += [(f"treatments[{i}]", value) for i, value in enumerate(config.treatments or [])]
    problems: list[tuple[str, str, str]] = []
    for field, value in found:
        kind = _odd_value(value)
        if kind:
            problems.append(
                (
                    field,
                    f"is a {kind} value, which has no one text on a command line (a set's "
                    "order changes per session; bytes are recorded decoded but run as b'...').",
                    "give a plain string, number or list instead.",
                )
            )
    return problems


def command_size_problems(config: BenchmarkConfig) -> list[tuple[str, str, str]]:
    """A stage command (or a param value substituted into one) over the kernel's limit for one
    argument could never start: said here, not as a failed write of the records."""
    problems: list[tuple[str, str, str]] = []
    texts = [(f"stages[{i}].cmd", stage.cmd or "") for i, stage in enumerate(config.stages)]
    texts += [(f"params.{name}", as_text(value)) for name, value in config.params.items()]
    for field, text in texts:
        size = len(text.encode(errors="replace"))
        if size > MAX_ARGUMENT_BYTES:
            problems.append(
                (
                    field,
                    f"is {size} bytes; a command is one argument of sh -c, and Linux passes at "
                    f"most {MAX_ARGUMENT_BYTES} bytes (128 KiB) in one argument.",
                    "put the long text in a file and have the command read it.",
                )
            )
    return problems
