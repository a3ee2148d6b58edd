"""pytest-benchmark-agent: benchmarks as pytest sessions, with fair comparisons and guardrails."""

__version__ = "0.1.0"
