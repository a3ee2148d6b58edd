"""The code under test of examples/ci/bench.yaml: a sum in a Python loop (replace it with
your own workload: a script, a test suite, a build step)."""

STEPS = 100_000

total = 0
for i in range(STEPS):
    total += i
