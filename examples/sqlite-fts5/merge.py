"""Copy the built index and apply the treatment: leave it, or merge it with FTS5 `optimize`.

Only the merge differs between treatments: both copies keep the same page size,
the same free pages (no VACUUM) and the same documents. Prints
`BENCH_EFFECTIVE fts.merge=<mode>` and `segments=<n>`.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
from pathlib import Path

from corpus import TABLE, count_segments

MODES = ("none", "optimize")


def merge(index: Path, mode: str, out: Path) -> int:
    """Copy `index` to `out`, merge it when `mode` is "optimize"; return its segment count."""
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(index, out)
    conn = sqlite3.connect(out, isolation_level=None)
    try:
        if mode == "optimize":
            conn.execute(f"INSERT INTO {TABLE}({TABLE}) VALUES ('optimize')")
        return count_segments(conn)
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True, help="database built by build.py")
    parser.add_argument("--mode", required=True, help="one of: " + ", ".join(MODES))
    parser.add_argument("--out", type=Path, required=True, help="database file to create")
    args = parser.parse_args()
    if args.mode not in MODES:
        parser.error(f"unknown --mode {args.mode!r}; use one of: {', '.join(MODES)}")
    if not args.index.is_file():
        parser.error(f"--index {args.index} is not a file; run build.py first")
    segments = merge(args.index, args.mode, args.out)
    print(f"BENCH_EFFECTIVE fts.merge={args.mode}")
    print(f"segments={segments}")


if __name__ == "__main__":
    main()
