#!/usr/bin/env python3
"""Which A8W8 gates catch how much error: the same cases run on one virtual board with the
`noise,rel=R` fault at several R (Gaussian noise of R x each float output's standard
deviation on every runner output, `hil/virtual/noise.py`), one `hil run` per R, then a
Markdown table: per case and R the verdict, the SQNR the board's outputs had against the host
reference, and which gates failed (`bound`: max abs error > atol; `sqnr`: below the floor;
`checker`: the task-level check against fp32). A summary line per suite follows.

    scripts/noise-gates.py --suite models --rel 0.003,0.03,0.1,0.3
    scripts/noise-gates.py --suite ops --rel 0.003,0.1

The sizes to read it by: an int8 output's quantization step is its range / 255, about
0.024-0.04 of its standard deviation for a range of 6-10 standard deviations, so R = 0.003
is a tenth of a step (noise a correct kernel's rounding already exceeds); R = 0.1 is an
output at ~20 dB SQNR, the least a broken kernel leaves (a wrong requantization scale or a
dropped bias moves outputs by a good part of their spread, i.e. R >= 0.3).

Lowered artifacts come from the cache (`--cache-dir`, the default one of `hil run`), so a
suite already run lowers nothing. A measurement, not a test: it prints what it saw, exit 0.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hil.lower.cache import default_cache_dir  # noqa: E402
from hil.virtual.launcher import start_virtual_board  # noqa: E402

PASSED = ("PASS", "PASS_UNDELEGATED")


def failed_gates(case: dict) -> list[str]:
    """The A8W8 gates the case's outputs failed (A8W8 rules have rtol 0: the bound is atol)."""
    outputs = case.get("outputs") or []
    gates = []
    if any(o.get("max_abs") is not None and o.get("atol") is not None and o["max_abs"] > o["atol"]
           for o in outputs):
        gates.append("bound")
    if any(o.get("min_sqnr_db") is not None and o.get("sqnr_db") is not None
           and o["sqnr_db"] < o["min_sqnr_db"] for o in outputs):
        gates.append("sqnr")
    checker = case.get("checker")
    if checker and not checker.get("ok"):
        gates.append("checker")
    return gates


def cell(case: dict) -> str:
    """`PASS 48 dB` / `FAIL bound+sqnr 20 dB` / `XFAIL (FAIL_MISMATCH)` / the verdict."""
    verdict = case["verdict"]
    sqnrs = [o["sqnr_db"] for o in case.get("outputs") or [] if o.get("sqnr_db") is not None]
    sqnr = f" {min(sqnrs):.0f} dB" if sqnrs else ""
    if verdict in PASSED:
        return f"PASS{sqnr}"
    if verdict == "FAIL_MISMATCH":
        return f"FAIL {'+'.join(failed_gates(case)) or '?'}{sqnr}"
    if verdict == "XFAIL":
        return f"XFAIL ({case.get('actual_verdict')}){sqnr}"
    return verdict


def rule(case: dict) -> str:
    output = (case.get("outputs") or [{}])[0]
    atol_rule = (output.get("atol_rule") or "-").split(": ")[-1].replace("quantization step", "step")
    floor = output.get("min_sqnr_db")
    return atol_rule + (f", SQNR >= {floor:g}" if floor is not None else "")


def run_cases(args: argparse.Namespace, board: str, out: Path) -> list[dict]:
    command = [sys.executable, "-m", "hil", "run", "--board", board, "--out", str(out),
               "--precision", "a8w8", "--cache-dir", args.cache_dir, "--timeout", "600",
               "--iterations", "1", "--warmup", "0"]  # numbers, not latency
    for suite in args.suite:
        command += ["--suite", suite]
    for pattern in args.filter:
        command += ["--filter", pattern]
    subprocess.run(command, cwd=REPO, check=False, stdout=subprocess.DEVNULL)
    return json.loads((out / "results.json").read_text())["cases"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", action="append", default=[])
    parser.add_argument("--filter", action="append", default=[])
    parser.add_argument("--rel", default="0.003,0.03,0.1,0.3")
    parser.add_argument("--cache-dir", default=str(default_cache_dir()))
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    args.suite = args.suite or ["models"]
    rels = [float(r) for r in args.rel.split(",")]
    root = Path(args.out or tempfile.mkdtemp(prefix="hil-noise-"))
    runs: dict[float, dict[str, dict]] = {}
    with start_virtual_board(root / "board", "E9955", "hil-noise") as board:
        for rel in rels:
            board.control("fault clear")
            board.control(f"fault noise,rel={rel:g},times=0")
            cases = run_cases(args, board.address, root / f"rel-{rel:g}")
            runs[rel] = {f"{c['suite']}.{c['precision']}.{c['id']}": c for c in cases}
        board.control("fault clear")
    keys = list(runs[rels[0]])
    print("| case | A8W8 rule | " + " | ".join(f"rel={r:g}" for r in rels) + " |")
    print("|---|---|" + "---|" * len(rels))
    for key in keys:
        row = [cell(runs[r][key]) if key in runs[r] else "-" for r in rels]
        print(f"| {key} | {rule(runs[rels[0]][key])} | " + " | ".join(row) + " |")
    print()
    numeric = (*PASSED, "FAIL_MISMATCH")
    for suite in sorted({key.rsplit(".", 1)[0] for key in keys}):
        mine = [k for k in keys if k.rsplit(".", 1)[0] == suite]
        parts = []
        for rel in rels:
            judged = [runs[rel][k] for k in mine if runs[rel][k]["verdict"] in numeric]
            passed = [c["id"] for c in judged if c["verdict"] in PASSED]
            failed = [c["id"] for c in judged if c["verdict"] not in PASSED]
            fewer = min((passed, "passing"), (failed, "failing"), key=lambda p: len(p[0]))
            parts.append(f"rel={rel:g}: {len(passed)}/{len(judged)} pass"
                         + (f" ({fewer[1]}: {', '.join(fewer[0])})" if fewer[0] else ""))
        others = sum(runs[rels[0]][k]["verdict"] not in numeric for k in mine)
        print(f"- {suite} ({len(mine)} cases, {others} not judged on numbers): " + "; ".join(parts))
    print(f"\n(results in {root})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
