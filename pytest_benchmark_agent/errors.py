"""Errors the engine raises for bad input: each names the file, the field and the fix."""

from __future__ import annotations

from pathlib import Path

#: One problem of a benchmark file: (field, message, fix), a line of a :class:`ConfigError`.
Problem = tuple[str, str, str]


class BenchError(Exception):
    """Base class of every error the engine reports to a user."""


class ConfigError(BenchError):
    """A benchmark file that cannot be used as written (malformed, or failing gate 1).

    ``problems`` holds one ``(field, message, fix)`` triple per problem found, so a user fixes
    every problem of a file in one go instead of one per run.
    """

    def __init__(self, path: Path | str, problems: list[Problem]):
        self.path = Path(path)
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        """The problems, one a line, every known secret and URL userinfo scrubbed (the
        message goes to the terminal, and a value it quotes may be one)."""
        from pytest_benchmark_agent.util.redact import scrub_text

        lines = [f"{self.path}: {len(self.problems)} problem(s) in the benchmark file"]
        for field, message, fix in self.problems:
            text = f"  - {field}: {message}" if field else f"  - {message}"
            if fix:
                text += f" Fix: {fix}"
            lines.append(text)
        return scrub_text("\n".join(lines))


class StageFailed(BenchError):
    """A stage exited non-zero, timed out, was stopped by a guard, or broke its output contract."""

    def __init__(self, stage: str, reason: str, *, status: str = "failed", detail: str = ""):
        self.stage = stage
        self.reason = reason
        self.status = status
        self.detail = detail
        message = f"stage '{stage}' {reason}"
        if detail:
            message += f"\n{detail}"
        super().__init__(message)


class MetricError(BenchError):
    """A declared metric that a stage did not report, or reported as something not a number."""
