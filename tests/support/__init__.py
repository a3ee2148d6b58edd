"""Helpers only the tests (and the benchmark scripts) use; never imported by the package."""
