"""Statistics: distributions, descriptive statistics, refusals and gate 2's tests."""
