"""The `benchmark-agent` console script (being built)."""


def main() -> int:
    return 0
