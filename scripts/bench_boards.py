#!/usr/bin/env python3
"""Cases per second and hil's own CPU per case on N virtual boards (figures, not pass/fail).

Runs the board phase of a real `Run` (lowering cached) in this process on N virtual boards,
and measures in the steady state — from the moment every board has finished a case to the
moment the queue runs dry (the last N-1 cases are the tail, when boards go idle):
  - cases/s;
  - hil's CPU per case: this process (the `hil run`) plus its private adb server (the
    `adb nodaemon server` it started), CPU time, not wall, so that other load on the machine
    does not count;
  - the boards' CPU per case (for information);
  - the load average before and after, and the share of the machine's CPU time the
    hypervisor stole during the window (`steal_share`: on a virtual machine the pace moves
    with its host's load).

With `--device-time` the boards run in the off-host measuring mode (hil/virtual/offhost.py):
outputs replayed, the device time slept, so N boards cost hil's work only and the scaling
ratios measure hil. `scripts/bench.py` uses this module for its scaling figures.

Usage: PYTHONPATH=. .venv/bin/python scripts/bench_boards.py [--suite ops] [--boards 1,4,16]
       [--per-board 8] [--device-time 1000] [--json FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from hil.board.spec import BoardSpec  # noqa: E402
from hil.cases import load_suite  # noqa: E402
from hil.cases.case import Case  # noqa: E402
from hil.lower.cache import ArtifactCache, cache_key  # noqa: E402
from hil.lower.pool import lower_cases  # noqa: E402
from hil.run import Run, RunOptions  # noqa: E402


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and of its children it has reaped (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _children_cpu() -> dict[str, float]:
    """CPU of this process's children: the virtual boards and the private adb server."""
    total = {"boards": 0.0, "adb": 0.0}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) != os.getpid():
                continue
            command = _cmdline(stat.parent)
            kind = ("boards" if "hil.virtual.main" in command
                    else "adb" if "nodaemon server" in command else None)
            if kind is not None:
                total[kind] += _cpu_seconds(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return total


def _machine_ticks() -> tuple[int, int]:
    """The machine's CPU ticks so far (/proc/stat's first line): all, and those stolen by the
    hypervisor (a virtual machine's CPUs running someone else's work)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields[:8]), fields[7] if len(fields) > 7 else 0


def _cpu(hil_first: bool) -> dict[str, float]:
    """CPU seconds of this process ("hil") and of the adb server and boards. Scanning /proc
    for those costs this process tens of ms: at the window's start its own times are read
    after the scan, at the end before it, so no scan is counted as hil's."""
    if hil_first:
        times = os.times()
        children = _children_cpu()
    else:
        children = _children_cpu()
        times = os.times()
    return {"hil": times.user + times.system, **children}


def board_throughput(cases: list[Case], boards: int, work: Path, cache: Path, link: str = "none",
                     device_time: str | None = None) -> dict[str, Any]:
    """Steady-state cases/s and CPU per case (ms) of a `Run` of `cases` on `boards` virtual
    boards (see the module docstring)."""
    load_before = os.getloadavg()
    seen_boards: set[str] = set()
    window: dict[str, Any] = {}
    finished = 0
    end_at = max(len(cases) - boards + 1, 2)
    options = RunOptions(
        cases=tuple(cases), boards=tuple(BoardSpec(virtual=True) for _ in range(boards)),
        flow="xnnpack", chipset="E9955", out_dir=work,
        results_path=work / "results.json", junit_path=work / "junit.xml",
        cache_dir=cache, jobs=1, virtual_link=link, virtual_device_time=device_time,
    )

    def on_record(record: dict[str, Any]) -> None:
        nonlocal finished
        finished += 1
        seen_boards.add(record.get("board") or "")
        if "start" not in window and len(seen_boards) >= boards:
            window.update(start=time.perf_counter(), at=finished, cpu=_cpu(hil_first=False),
                          ticks=_machine_ticks())
        elif "start" in window and "end" not in window and finished >= end_at:
            window.update(end=time.perf_counter(), cases=finished - window["at"],
                          cpu_end=_cpu(hil_first=True), ticks_end=_machine_ticks())

    records = Run(options, on_record=on_record).execute()
    bad = [r for r in records if r["verdict"] not in ("PASS", "PASS_UNDELEGATED")]
    if bad:
        raise RuntimeError(f"{len(bad)} cases did not pass, e.g. {bad[0]['id']}: {bad[0]['message']}")
    if "end" not in window or not window["cases"]:
        raise RuntimeError(f"{len(cases)} cases are too few to measure {boards} boards' steady state")
    count = window["cases"]
    cpu = {key: (window["cpu_end"][key] - window["cpu"][key]) / count * 1000 for key in window["cpu"]}
    ticks = window["ticks_end"][0] - window["ticks"][0]
    stolen = window["ticks_end"][1] - window["ticks"][1]
    return {
        "boards": boards, "cases": len(cases), "measured_cases": count,
        "cases_per_s": round(count / (window["end"] - window["start"]), 3),
        "hil_cpu_ms": round(cpu["hil"] + cpu["adb"], 2), "hil_process_cpu_ms": round(cpu["hil"], 2),
        "adb_server_cpu_ms": round(cpu["adb"], 2), "board_cpu_ms": round(cpu["boards"], 2),
        "device_time": device_time,
        "steal_share": round(stolen / ticks, 3) if ticks > 0 else None,
        "load_average": {"before": [round(v, 2) for v in load_before],
                         "after": [round(v, 2) for v in os.getloadavg()]},
    }


COPY_MARK = "__copy"
MIN_MEASURED_CASES = 24
"""Cases measured at the least (1 board): results.json and JUnit are rewritten at geometric
checkpoints, so a short run pays more of them per case."""


def copies(cases: list[Case], count: int) -> list[Case]:
    """`count` cases cycling through `cases`, copies under new ids (`lower_all` gives them
    their original's artifact)."""
    many = (cases * (count // max(len(cases), 1) + 1))[:count]
    return [dataclasses.replace(c, id=f"{c.id}{COPY_MARK}{i}") for i, c in enumerate(many)]


def lower_all(cases: list[Case], cache: Path, jobs: int = 2) -> None:
    """Fill the artifact cache for `cases`: each original lowered once (the case id is part
    of the cache key), its copies' entries links to its own."""
    originals = {c.id.partition(COPY_MARK)[0]: dataclasses.replace(c, id=c.id.partition(COPY_MARK)[0])
                 for c in cases}
    unique = list(originals.values())
    with tempfile.TemporaryDirectory() as scratch:
        for result in lower_cases(unique, "xnnpack", "E9955", Path(scratch), ArtifactCache(cache), jobs):
            if result.artifact is None:
                raise RuntimeError(f"case {unique[result.index].id} does not lower")
    for case in cases:
        source = _entry(cache, originals[case.id.partition(COPY_MARK)[0]])
        target = _entry(cache, case)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source, target_is_directory=True)


def _entry(cache: Path, case: Case) -> Path:
    key = cache_key(case, "xnnpack", "E9955")
    return cache / key[:2] / key


def offhost_scaling(cases: list[Case], board_counts: list[int], per_board: int, device_time: str,
                    work: Path, cache: Path) -> dict[str, Any]:
    """Each board count on `per_board` x N cases (`MIN_MEASURED_CASES` at the least) in the
    off-host mode; the scaling ratios
    against 1 board (the first count must be 1), hil's CPU per case (the largest count's)
    and the ceiling it implies."""
    runs = {}
    for count in board_counts:
        measured = max(per_board * count, MIN_MEASURED_CASES)
        many = copies(cases, measured + count)  # + the first case of each board
        lower_all(many, cache)
        runs[count] = board_throughput(many, count, work / f"b{count}", cache, device_time=device_time)
        print(f"  {count:>2} boards: {json.dumps(runs[count])}", flush=True)
    base = runs[board_counts[0]]["cases_per_s"]
    top = runs[max(board_counts)]
    hil_ms = top["hil_cpu_ms"]
    ceiling = 1000.0 / hil_ms if hil_ms > 0 else float("inf")
    figures: dict[str, Any] = {
        "hil_cpu_ms_per_case": hil_ms,
        "offhost_device_time_ms": device_time,
        "offhost": {str(count): run for count, run in runs.items()},
        "hil_cpu_ceiling_cases_per_s": round(ceiling, 1),
        "hil_cpu_ceiling_boards_per_core": round(ceiling / base, 1),
    }
    for count, run in runs.items():
        figures[f"cases_per_s_{count}_boards"] = run["cases_per_s"]
        if count != board_counts[0]:
            figures[f"scaling_{count}_boards"] = round(run["cases_per_s"] / base, 3)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="ops")
    parser.add_argument("--boards", default="1,4,16", help="board counts, the first 1 (default: 1,4,16)")
    parser.add_argument("--per-board", type=int, default=8, help="measured cases per board (default: 8)")
    parser.add_argument("--device-time", default="1000",
                        help="the off-host mode's ms per execution, or measured (default: 1000)")
    parser.add_argument("--cache", type=Path, help="artifact cache (default: a temporary one)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    counts = [int(n) for n in args.boards.split(",")]
    if counts[0] != 1:
        parser.error("--boards: the first count must be 1 (the baseline of the ratios)")
    cases = [c for c in load_suite(args.suite) if c.precision == "fp32"]
    with tempfile.TemporaryDirectory(prefix="hil-bench-boards-") as tmp:
        cache = args.cache or Path(tmp) / "cache"
        figures = offhost_scaling(cases, counts, args.per_board, args.device_time, Path(tmp), cache)
    print(json.dumps(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
