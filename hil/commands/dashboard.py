"""`hil dashboard`: the static nightly dashboard over many results.json files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hil.commands.common import add_regression_options, writable


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`hil dashboard`'s options."""
    parser.add_argument("inputs", nargs="+", metavar="RESULTS_JSON",
                        help="results files of any nights, chipsets, flows and precisions")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="folder for index.html (open it from disk: no server, no network)")
    add_regression_options(parser)  # as hil compare judges


def cmd_dashboard(args: argparse.Namespace) -> int:
    """Read every results file (a bad one: exit 3 naming it), write OUT/index.html."""
    from hil.dashboard import model, page
    from hil.report.compare import parse_min_delta, parse_threshold
    from hil.report.results import load_results

    threshold = parse_threshold(args.threshold)
    min_delta_ms = parse_min_delta(args.min_delta_ms)
    out = writable(args.out, "--out", folder=True)
    assert out is not None
    runs = [model.dated_run(Path(p), load_results(Path(p))) for p in args.inputs]
    board = model.build(runs, threshold, min_delta_ms)
    path = page.write(board, out)
    sys.stdout.write(f"dashboard: {path} ({len(board.nights)} night(s), {len(runs)} run(s), "
                     f"{len(board.flags)} latency regression(s))\n")
    return 0
