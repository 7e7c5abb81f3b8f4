#!/usr/bin/env python3
"""Which A8W8 gates catch how much error: the same cases run on one virtual board with the
`noise,rel=R` fault at several R (Gaussian noise of R x each output's standard deviation on
every runner output), one `hil run` per R, and a table of verdicts and the gate that fired.

    scripts/noise-gates.py --suite models --precision a8w8 --rel 0,0.003,0.01,0.03,0.1,0.3
    scripts/noise-gates.py --suite ops --precision a8w8 --filter 'conv2d*' --filter 'add_*'

Lowered artifacts come from the cache (`--cache-dir`), so only the first R lowers anything.
A measurement, not a test: it prints what it saw and exits 0.
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

from hil.virtual.launcher import start_virtual_board  # noqa: E402


def _gate(case: dict) -> str:
    """Which gate failed the case: bound (elementwise atol), sqnr, checker, or the verdict."""
    message = case.get("message") or ""
    if case["verdict"] in ("PASS", "PASS_UNDELEGATED"):
        return "pass"
    if case["verdict"] != "FAIL_MISMATCH":
        return case["verdict"]
    if message.startswith("checker"):
        return "checker"
    if "SQNR" in message.split(";")[0]:
        return "sqnr"
    return "bound"


def _run(args: argparse.Namespace, board: str, out: Path) -> list[dict]:
    command = [sys.executable, "-m", "hil", "run", "--board", board, "--out", str(out),
               "--precision", args.precision, "--cache-dir", args.cache_dir, "--timeout", "600"]
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
    parser.add_argument("--precision", default="a8w8")
    parser.add_argument("--rel", default="0,0.003,0.01,0.03,0.1,0.3")
    parser.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "exynos-hil" / "artifacts"))
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    args.suite = args.suite or ["models"]
    rels = [float(r) for r in args.rel.split(",")]
    root = Path(args.out or tempfile.mkdtemp(prefix="hil-noise-"))
    table: dict[str, dict[float, str]] = {}
    details: dict[str, dict] = {}
    with start_virtual_board(root / "board", "E9955", "hil-noise") as board:
        for rel in rels:
            board.control("fault clear")
            if rel > 0:
                board.control(f"fault noise,rel={rel:g},times=0")
            for case in _run(args, board.address, root / f"rel-{rel:g}"):
                key = f"{case['suite']}.{case['precision']}.{case['id']}"
                output = (case.get("outputs") or [{}])[0]
                checker = case.get("checker") or {}
                metrics = checker.get("metrics") or {}
                judged = {k: metrics[k] for k in ("top1_agreement", "miou", "psnr_db", "cer") if k in metrics}
                table.setdefault(key, {})[rel] = (
                    f"{_gate(case)} ({output.get('sqnr_db') or 0:.0f} dB"
                    + "".join(f", {k} {v:.2f}" for k, v in judged.items()) + ")")
                if rel == 0:
                    details[key] = {"atol_rule": output.get("atol_rule"),
                                    "min_sqnr_db": output.get("min_sqnr_db")}
    print("| case | rule | " + " | ".join(f"rel={r:g}" for r in rels) + " |")
    print("|---|---|" + "---|" * len(rels))
    for key, row in table.items():
        rule = details.get(key, {})
        text = f"{rule.get('atol_rule')}, SQNR >= {rule.get('min_sqnr_db')}"
        print(f"| {key} | {text} | " + " | ".join(row.get(r, "-") for r in rels) + " |")
    print(f"\n(results in {root})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
