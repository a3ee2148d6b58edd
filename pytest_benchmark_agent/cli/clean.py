"""``benchmark-agent clean``: remove finished runs' trial scratch folders, like ``dvc gc``.

Every trial keeps a folder under ``runs/RUN_ID/trials/`` (its stdout, stderr and outputs);
they are what a person reads while a run is fresh and dead weight after (76 MB for one
10-trial run). ``clean`` removes them by age (``--older-than DAYS``) and keeps the newest
``--keep N`` runs of each benchmark name; ``--dry-run`` only lists what would go. The record
(``results.yaml``, ``trials.jsonl``, ``config.yaml``, the reports and plots) is never touched,
nor the folders of a RELIABLE run (its evidence), of a run that has not finished (no
``index.json``, or one saying it is running), or anything reached through a symbolic link.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from pytest_benchmark_agent.cli.common import home_of
from pytest_benchmark_agent.records.store import runs_in
from pytest_benchmark_agent.records.writer import index_entry
from pytest_benchmark_agent.report.units import human

#: States of a run whose sessions are over: its scratch folders are no longer written.
ENDED = frozenset({"complete", "halted", "failed", "interrupted", "died"})


def cmd_clean(args: argparse.Namespace) -> int:
    """Remove the trial scratch folders (runs/RUN_ID/trials/) of finished runs, never their
    records and never a RELIABLE run's; --dry-run lists them."""
    home = home_of(args)
    now = time.time()
    seen: dict[str, int] = {}
    total, chosen = 0, 0
    for run_dir in reversed(runs_in(home)):  # newest first, so --keep counts the newest
        entry = index_entry(run_dir)
        if entry is None or entry.get("state") not in ENDED:
            continue  # unfinished (or unreadable, said by index_entry): its session may write
        name = str(entry.get("name"))
        seen[name] = seen.get(name, 0) + 1
        scratch = run_dir / "trials"
        if (
            entry.get("tag") == "RELIABLE"
            or seen[name] <= args.keep
            or not scratch.is_dir()
            or scratch.is_symlink()
            or now - (run_dir / "index.json").stat().st_mtime < args.older_than * 86400
        ):
            continue
        size = _size(scratch)
        total += size
        chosen += 1
        where = scratch.relative_to(home)
        if args.dry_run:
            print(f"would remove {where} ({human(size, 'size_b')})")
        else:
            shutil.rmtree(scratch)
            print(f"removed {where} ({human(size, 'size_b')})")
    verb = "would free" if args.dry_run else "freed"
    print(f"{chosen} run(s)' trial folders: {verb} {human(total, 'size_b')}")
    return 0


def _size(folder: Path) -> int:
    """Bytes of the regular files under ``folder`` (links are not followed)."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def register(verbs: argparse._SubParsersAction) -> None:
    clean = verbs.add_parser("clean", help=cmd_clean.__doc__, description=__doc__)
    clean.add_argument(
        "--older-than",
        type=float,
        default=0.0,
        metavar="DAYS",
        help="only runs that finished at least DAYS days ago (default: any age)",
    )
    clean.add_argument(
        "--keep",
        type=int,
        default=1,
        metavar="N",
        help="the newest N finished runs of each benchmark name keep their folders (default 1)",
    )
    clean.add_argument("--dry-run", action="store_true", help="list what would go; remove nothing")
    clean.add_argument(
        "--home",
        default=argparse.SUPPRESS,
        help="data directory (default $BENCHMARK_HOME or ./benchmark_data)",
    )
    clean.set_defaults(func=cmd_clean)
