#!/usr/bin/env python3
"""What the virtual board's exec guard (hil/virtual/exec_guard.py) costs per exec (figures, not
pass/fail).

One board root, one sandbox command line (`Device.sandbox_argv`), a shell in it that runs N
execs of a board program (`/usr/bin/true`) and N of a script on `/data`; run without the guard
and with it (as the board spawns its shells), alternately, ROUNDS times. Prints the median time
per exec of each and the difference. Usage: scripts/bench_exec_guard.py [--execs N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hil.virtual.device import Device  # noqa: E402


def loop(program: str, count: int) -> str:
    return f'i=0; while [ "$i" -lt {count} ]; do {program}; i=$((i + 1)); done'


def timed(argv: list[str], guard: Device | None) -> float:
    extra = {}
    if guard is not None:
        extra = {"preexec_fn": guard._exec_guard.preexec, "pass_fds": (guard._exec_guard.pass_fd,)}  # noqa: SLF001
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, **extra)  # noqa: S603, PLW1509
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--execs", type=int, default=300, help="execs per shell")
    parser.add_argument("--rounds", type=int, default=5, help="shells per variant")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hil-bench-guard-") as root:
        device = Device(Path(root), "E9955", "bench")
        device.prepare()
        script = device.fs / "data/local/tmp/bench.sh"
        script.write_text("#!/system/bin/sh\n:\n")
        script.chmod(0o755)
        load = os.getloadavg()[0]
        print(f"{args.execs} execs per shell, {args.rounds} shells per variant, load {load:.2f}")
        for name, program in (("board program /usr/bin/true", "/usr/bin/true"),
                              ("script on /data", "/data/local/tmp/bench.sh")):
            argv = device.sandbox_argv(loop(program, args.execs), {})
            plain, guarded = [], []
            for _ in range(args.rounds):
                plain.append(timed(argv, None) / args.execs)
                guarded.append(timed(argv, device) / args.execs)
            p, g = statistics.median(plain) * 1e6, statistics.median(guarded) * 1e6
            print(f"{name:30s} without guard {p:7.0f} us/exec   with guard {g:7.0f} us/exec   "
                  f"+{g - p:.0f} us/exec")
    return 0


if __name__ == "__main__":
    sys.exit(main())
