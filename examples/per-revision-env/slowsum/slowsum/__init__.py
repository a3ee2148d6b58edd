"""A sum in a Python loop: the code under test of examples/per-revision-env."""


def total(n: int) -> int:
    """The sum of 0 .. n-1, one addition at a time."""
    result = 0
    for i in range(n):
        result += i
    return result
