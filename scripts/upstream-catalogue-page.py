#!/usr/bin/env python3
"""Write the upstream-catalogue reference page (Markdown): which upstream ExecuTorch version
says what, and which hil case stands for which upstream test (hil.cases.upstream_page).

    scripts/upstream-catalogue-page.py [--out docs/reference/upstream-catalogue.md]

Generated from hil/cases/upstream_reference.json, the `upstream:` tags of the ops and models
suites, and hil/cases/ops_delegation.json. Without --out it prints the page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="write the page here (default: print it)")
    args = parser.parse_args(argv)

    from hil.cases.upstream_page import page

    text = page()
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
