"""Write the generated retrieval set named --dataset into the folder --out (the data prep)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aliases import generate, write


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dataset", required=True, help="the set's name, e.g. synthetic-aliases-v1"
    )
    parser.add_argument("--out", type=Path, required=True, help="folder to create")
    args = parser.parse_args()
    write(args.dataset, args.out)
    sizes = {split: len(rows) for split, rows in generate(args.dataset).items()}
    for split, size in sizes.items():
        print(f"{split}_rows={size}")


if __name__ == "__main__":
    main()
