"""``benchmark-agent doctor``: the check a session makes at its start, on its own.

The same suspects (:mod:`pytest_benchmark_agent.records.hostcheck`): load and busy processes,
the CPU governor and turbo, the cgroup's CPU quota and throttling, ``PYTHONDONTWRITEBYTECODE``,
``PYTHONHASHSEED``, swapping; each read value, then what each warning does to the numbers.
"""

from __future__ import annotations

import argparse

from pytest_benchmark_agent.records.hostcheck import check_host, warning_lines


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check this machine for what distorts measurements (load, CPU frequency, quota, Python
    settings, swapping) and say what each finding does to the numbers."""
    findings = check_host(counted=True)
    for finding in findings:
        print(f"{finding.name}: {finding.shown}")
    warnings = warning_lines(findings)
    print()
    if not warnings:
        print("nothing here distorts the numbers")
        return 0
    print(f"{len(warnings)} warning(s):")
    for line in warnings:
        print(f"  {line}")
    return 0


def register(verbs: argparse._SubParsersAction) -> None:
    doctor = verbs.add_parser("doctor", help=cmd_doctor.__doc__, description=cmd_doctor.__doc__)
    doctor.set_defaults(func=cmd_doctor)
