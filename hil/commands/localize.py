"""`hil localize`: bisect one failing case on a board (as `hil run --localize`), or with
`--against fp32` walk its A8W8 graph against fp32 on the host."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hil.commands.common import DRIFT_FLOOR_DB, lowering_flow, select_cases
from hil.commands.run import run_cases
from hil.errors import UsageError
from hil.verdict import EXIT_INTERRUPTED, EXIT_OK


def cmd_localize(args: argparse.Namespace) -> int:
    """`hil localize`: bisect one failing case on a board, or (`--against fp32`) walk its
    A8W8 graph against fp32 on the host."""
    if args.against is not None:
        return _drift(args)
    if args.sqnr_floor is not None:
        raise UsageError("--sqnr-floor: only with --against fp32")
    args.precision = args.precision or "fp32"
    code, records = run_cases(args, lambda: ([_one_case(args)], (1, 1)), localize=True)
    record = next(iter(records), None)
    if code == EXIT_INTERRUPTED or record is None or "FAIL_MISMATCH" in (
            record["verdict"], record.get("actual_verdict")):
        return code
    from hil.report.results import case_key
    from hil.verdict import Verdict

    verdict = Verdict(record["verdict"])
    board = f" on {record['board']}" if record.get("board") else ""
    ended = f"{case_key(record)} ended {verdict.value}{board}"
    if verdict.is_error:
        sys.stderr.write(f"hil: {ended}: not localized\n")
        return code
    reason = ("it passed: nothing to localize" if verdict.passed
              else "only a FAIL_MISMATCH case can be localized (localization bisects numbers)")
    raise UsageError(f"{ended}: {reason}")


def _one_case(args: argparse.Namespace) -> Any:
    """The one case `--suite`/`--filter` (required by the parser)/`--precision` select
    (UsageError otherwise)."""
    if args.precision not in ("fp32", "a8w8"):
        raise UsageError(f"--precision: hil localize takes one precision (fp32 or a8w8), "
                         f"not {args.precision!r}")
    cases, _ = select_cases(args)
    if len(cases) != 1:
        names = ", ".join(case.key for case in cases[:5]) + (", ..." if len(cases) > 5 else "")
        raise UsageError(f"--filter {args.filter}: {len(cases)} cases match ({names}); hil localize takes "
                         "one (hil run --localize takes many)")
    return cases[0]


def _drift(args: argparse.Namespace) -> int:
    """`hil localize --against fp32`: the A8W8 graph against fp32, node by node, no board."""
    if args.against != "fp32":
        raise UsageError(f"--against: unknown value {args.against!r} (fp32)")
    if args.board or args.inventory:
        raise UsageError("--against fp32 runs on the host only: leave out --board/--inventory")
    args.precision = args.precision or "a8w8"
    if args.precision != "a8w8":
        raise UsageError(f"--against fp32 compares an A8W8 graph with fp32: --precision a8w8, "
                         f"not {args.precision!r}")
    case = _one_case(args)
    floor = DRIFT_FLOOR_DB if args.sqnr_floor is None else args.sqnr_floor
    from hil.localize.drift import drift_against_fp32
    from hil.report.localization import drift_lines, plot_drift
    from hil.report.results import atomic_write_text, sanitise
    from hil.report.thirdparty import FILE_NAME as THIRD_PARTY_LOG
    from hil.report.thirdparty import third_party_to_file

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with third_party_to_file(out / THIRD_PARTY_LOG):
        record = drift_against_fp32(case, lowering_flow(args.flow), floor)
    path = Path(args.results) if args.results else out / "drift.json"
    document = sanitise({"case": case.key, "drift": record})
    atomic_write_text(path, json.dumps(document, indent=1, allow_nan=False) + "\n")
    sys.stdout.write("\n".join(drift_lines(case.key, record)) + f"\ndrift: {path}\n")
    if args.plot:
        plot_drift(case.key, record, Path(args.plot))
        sys.stdout.write(f"SQNR curve: {args.plot}\n")
    return EXIT_OK
