#!/usr/bin/env python3
"""Soak under chaos: thousands of cases on several virtual boards while random faults hit
them, and what came of it: cases lost, faults unhandled, resources leaked, speed kept.

A benchmark, not a test (figures; it exits 1 when an invariant does not hold). One way
through `soaklib/`, each module one step, none importing a later one:

1. `cases.py`: N copies of three tiny MLP cases, lowered once (flow portable), so `hil run`
   lowers nothing.
2. `boards.py`: B virtual boards (`--link usb2`, a console pty, a power switch on their
   control FIFO), reached by `hil run` as network boards through its private adb server.
3. `hilrun.py`: `hil -v run` as its own process, watched through its output and /proc
   (`procs.py`).
4. `deck.py` decides which fault comes when and to which board (`--chaos-rate` faults per
   finished case, every kind before any repeats, some on two boards, some during recovery);
   `driver.py` carries it out and forwards SIGTERM.
5. `analysis.py` (and `pace.py`): every case reported exactly once, each fault's fate,
   leaks, speed; the JSON report and its invariants.

SIGTERM (or SIGINT) stops the soak the way CI stops a job: it is forwarded to `hil run`,
which must exit 130 within 10 s leaving a valid results.json and JUnit with every case it
reported; the soak then checks that, stops the boards and exits 130.

Usage: PYTHONPATH=. .venv/bin/python scripts/soak.py --cases 3000 --boards 4 \\
           --chaos-rate 0.02 --json soak.json
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from soaklib import analysis, driver  # noqa: E402
from soaklib.deck import Dealer  # noqa: E402

log = logging.getLogger("soaklib")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--boards", type=int, default=4)
    parser.add_argument("--chaos-rate", type=float, default=0.02,
                        help="faults per finished case (a probability, default 0.02)")
    parser.add_argument("--link", default="usb2")
    parser.add_argument("--max-minutes", type=float, default=60.0, help="bound of the run")
    parser.add_argument("--timeout", type=float, default=10.0, help="hil run --timeout")
    parser.add_argument("--idle-timeout", type=float, default=10.0, help="hil run --idle-timeout")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--work", type=Path, help="keep everything here (default: a temporary folder)")
    parser.add_argument("--cache-dir", type=Path, help="artifact cache (default: hil's)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("soak %(asctime)s: %(message)s", "%H:%M:%S"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False

    from hil.lower.cache import default_cache_dir

    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    work = args.work or Path(tempfile.mkdtemp(prefix="hil-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    settings = driver.Settings(
        cases=args.cases, boards=args.boards, chaos_rate=args.chaos_rate, link=args.link,
        max_minutes=args.max_minutes, timeout=args.timeout, idle_timeout=args.idle_timeout,
        work=work, cache=args.cache_dir or default_cache_dir())
    seen = driver.run(settings, Dealer(args.chaos_rate, seed), seed)
    report = analysis.figures(seen)
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    for failure in report["invariants_failed"]:
        log.info("INVARIANT FAILED: %s", failure)
    log.info("capacity (a): worst decile of boards in the run or held by a dealt fault %s of %d "
             "(goal >= %s): %s", report["capacity_worst_decile_in_run_or_held"], args.boards,
             report["capacity_goal_boards"], _met(report["capacity_goal_met"]))
    share = report["kept_out_not_held_share"]
    log.info("capacity (b): board-seconds kept out while no fault held the board %s of all "
             "(goal <= %g%%): %s", "-" if share is None else f"{share * 100:.1f}%",
             report["kept_out_goal_share"] * 100, _met(report["kept_out_goal_met"]))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    if seen.signalled:
        return 130
    return 1 if report["invariants_failed"] else 0


def _met(met: bool | None) -> str:
    return "too short a run to say" if met is None else "met" if met else "NOT MET"


if __name__ == "__main__":
    sys.exit(main())
