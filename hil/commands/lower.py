"""`hil lower`: the selected cases lowered to artifacts, no board (SKIP and known failures do
not fail it)."""

from __future__ import annotations

import argparse
import sys

from hil.commands.common import lowering_flow, select_cases, writable


def cmd_lower(args: argparse.Namespace) -> int:
    """`hil lower`: artifacts only (SKIP and known failures do not fail it)."""
    from hil.expectation import settle
    from hil.lower import LoweringFailed
    from hil.lower.build import build_artifact
    from hil.report.thirdparty import FILE_NAME, hil_stderr, third_party_to_file
    from hil.verdict import Verdict

    out = writable(args.out, "--out", folder=True)
    failed = 0
    third_party = out / FILE_NAME
    # torch's and executorch's warnings go to the file: stdout carries only the results
    with third_party_to_file(third_party):
        cases, _ = select_cases(args)
        flow = lowering_flow(args.flow)
        for index, case in enumerate([each.on_flow(flow) for each in cases]):
            folder = out / f"c{index:04d}"
            try:
                artifact = build_artifact(case, flow, args.chipset, folder)
            except LoweringFailed as exc:
                record = settle(case.expect, {"verdict": exc.verdict.value, "message": exc.message})
                failed += Verdict(record["verdict"]).is_failure or Verdict(record["verdict"]).is_error
                sys.stdout.write(f"{record['verdict']:<16} {case.key}  {record['message']}\n")
            else:
                sys.stdout.write(f"LOWERED          {case.key} -> {artifact.pte} ({artifact.pte_bytes} B)\n")
            sys.stdout.flush()
    if third_party.stat().st_size:
        hil_stderr().write(f"hil: third-party warnings: {third_party}\n")
    return 1 if failed else 0


def cmd_list(args: argparse.Namespace) -> int:
    """`hil list`: the cases the selection picks, one line each (key, tags, skip or known
    failure), then a count; nothing is lowered or run."""
    cases, shard = select_cases(args)
    for case in cases:
        notes = []
        if case.tags:
            notes.append("tags: " + ",".join(case.tags))
        if case.skip:
            notes.append(f"skip: {case.skip}")
        if case.expect is not None:
            notes.append(f"expect: {case.expect.verdict.value}")
        sys.stdout.write(case.key + ("  [" + "; ".join(notes) + "]" if notes else "") + "\n")
    sys.stdout.write(f"{len(cases)} case(s)" + (f", shard {shard[0]}/{shard[1]}" if shard[1] > 1 else "")
                     + "\n")
    return 0
