#!/usr/bin/env python3
"""List what hil's catalogue lacks or has otherwise than an ExecuTorch Samsung test tree.

    scripts/upstream-coverage.py PATH

PATH is an ExecuTorch checkout (its `backends/samsung/test/`), a site-packages folder or the
installed `executorch` package (the wheel's tests); with no PATH, the installed wheel. It
prints every upstream op or model test no case covers, every tagged case whose module, ops,
shapes, explicit parameters, precision or tolerance differ from its test's, and delegation
statements of another version the installed partitioner does not satisfy and the reference
file does not record (hil.cases.upstream_coverage). It runs the tree's op tests' code (with a
recording tester): point it at a checkout you trust.

Exit status: 0 nothing missing or different, 1 gaps or differences listed, 3 PATH is not an
ExecuTorch tree."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="exit codes:\n  0  no gap, no difference\n  1  gaps or "
                                            "differences listed\n  3  PATH is not an ExecuTorch tree")
    parser.add_argument("path", nargs="?", type=Path, default=None,
                        help="ExecuTorch checkout, site-packages or executorch package folder "
                             "(default: the installed wheel)")
    args = parser.parse_args(argv)

    import torch

    from hil.cases import load_suite
    from hil.cases.upstream_coverage import coverage
    from hil.cases.upstream_tree import find_test_dir

    path = args.path or Path(torch.__file__).resolve().parents[1]
    try:
        find_test_dir(path)
    except ValueError as exc:
        print(f"upstream-coverage: error: {exc}", file=sys.stderr)
        return 3
    report = coverage(path, load_suite("ops") + load_suite("models"))
    print("\n".join(report.lines()))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
