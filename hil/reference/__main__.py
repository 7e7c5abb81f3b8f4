"""`python -m hil.reference [--check] [--root DIR]`: regenerate docs/reference/ (or, with
--check, exit 1 naming the pages that are out of date)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hil.reference import stale, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hil.reference", description=__doc__)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when a page differs from what would be written")
    parser.add_argument("--root", type=Path, default=Path.cwd(),
                        help="the repository (default: the current folder)")
    args = parser.parse_args(argv)
    if args.check:
        found = stale(args.root)
        for path in found:
            sys.stderr.write(f"{path}: out of date: run `python -m hil.reference`\n")
        return 1 if found else 0
    for path in write(args.root):
        sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
