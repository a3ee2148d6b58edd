"""Time ``slowsum.total(n)`` as the environment this revision's prep built has it installed.

Prints ``BENCH_CODE_FROM <path>`` (where ``slowsum`` was imported from: the engine records it
in each trial, and under ``--bench-against`` refuses a trial that imported the other revision's
checkout) and ``total_s=<seconds>`` (CPU time of one call, the mean of five).
"""

from __future__ import annotations

import sys
import time

import slowsum

CALLS = 5

print("BENCH_CODE_FROM", slowsum.__file__)
n = int(sys.argv[1])
start = time.process_time()
for _ in range(CALLS):
    slowsum.total(n)
print(f"total_s={(time.process_time() - start) / CALLS}")
