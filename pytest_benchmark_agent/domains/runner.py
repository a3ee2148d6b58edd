"""Run one stage method of a Python Domain: the command every compiled Domain stage runs.

``python -m pytest_benchmark_agent.domains.runner MODULE:CLASS METHOD --file PATH --out DIR
[--param NAME=VALUE ...] [--artifact NAME=PATH ...] [--seed N]``

Param values arrive as the text the engine substituted (numbers, ``true``/``false`` and lists
as JSON) and are decoded back: text that parses as JSON is that value, anything else stays a
string. While the method runs, whatever it (or native code it calls) prints on stdout goes to
stderr: stdout is where the engine reads results, and it gets exactly one JSON line of the
returned metrics, then one ``BENCH_EFFECTIVE name=value`` line per effective param.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_benchmark_agent.domains.api import StageCall, load_class
from pytest_benchmark_agent.util.placeholders import as_text


def decode(text: str) -> Any:
    """A param's value from its command-line text (JSON when it parses, else the text)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _pairs(items: Sequence[str], what: str) -> dict[str, str]:
    pairs = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"domain_runner: --{what} {item!r}: expected NAME=VALUE")
        pairs[name] = value
    return pairs


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 (Python's and native code's stdout) at stderr for the block."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def result_lines(metrics: Mapping[str, Any] | None, effective: Mapping[str, Any]) -> list[str]:
    """The stdout lines the engine reads: one JSON object of metrics, then effective params."""
    lines = []
    if metrics:
        lines.append(
            json.dumps(
                {
                    name: int(value) if isinstance(value, bool) else value
                    for name, value in metrics.items()
                },
                default=str,
            )
        )
    lines += [f"BENCH_EFFECTIVE {name}={as_text(value)}" for name, value in effective.items()]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="domain_runner", description=__doc__.splitlines()[0])
    parser.add_argument("target", help="MODULE:CLASS of the Domain")
    parser.add_argument("method", help="the stage method to run")
    parser.add_argument(
        "--file",
        type=Path,
        help="the module's file (loaded from there when its name does not import it)",
    )
    parser.add_argument("--out", type=Path, required=True, help="the stage's scratch folder")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--artifact", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    module, sep, qualname = args.target.rpartition(":")
    if not sep:
        parser.error(f"target {args.target!r}: expected MODULE:CLASS")
    cls = load_class(module, qualname, args.file.resolve() if args.file else None)
    params = {name: decode(value) for name, value in _pairs(args.param, "param").items()}
    artifacts = {name: Path(value) for name, value in _pairs(args.artifact, "artifact").items()}
    call = StageCall(args.method, params, artifacts, args.out, args.seed)
    with stdout_to_stderr():
        metrics = getattr(cls(), args.method)(call)
    if metrics is not None and not isinstance(metrics, Mapping):
        raise SystemExit(
            f"domain_runner: {args.target}.{args.method} returned "
            f"{type(metrics).__name__}; a stage method returns a mapping of "
            "metric name to number, or None"
        )
    for line in result_lines(metrics, call.effective):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
