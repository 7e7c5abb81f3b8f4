#!/usr/bin/env python3
"""hil's memory over a long run (figures, not pass/fail): RSS at the Kth and at the last case.

Runs `--cases` cases (the suite's cases cycled, copies under new ids sharing their original's
artifact) through a real `Run` in this process on `--boards` virtual boards in the off-host
measuring mode (hil/virtual/offhost.py), so that the boards cost little and the run is hil's
own work. Prints hil's RSS (this process, VmRSS) at the `--rss-at`th finished case and at the
last one, the growth between them, the wall time and CPU per case, and whether results.json
(`hil.report.results.load_results`) and JUnit (parsed) are valid at the end.

Usage: PYTHONPATH=. .venv/bin/python scripts/scale.py [--cases 50000] [--boards 16]
       [--device-time 1] [--rss-at 1000] [--out DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_boards import REPO, copies, lower_all  # noqa: E402

sys.path.insert(0, str(REPO))
from hil.board.spec import BoardSpec  # noqa: E402
from hil.cases import load_suite  # noqa: E402
from hil.report.results import load_results  # noqa: E402
from hil.run import Run, RunOptions  # noqa: E402


def rss_mib() -> float:
    """This process's resident set (VmRSS) in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(cases: int, boards: int, device_time: str, rss_at: int, out: Path, suite: str) -> dict[str, Any]:
    """Run `cases` cases and return the figures (see the module docstring)."""
    originals = [c for c in load_suite(suite) if c.precision == "fp32"]
    many = copies(originals, cases)
    cache = out / "cache"
    lower_all(many, cache)
    marks: dict[str, Any] = {}
    finished = 0

    def on_record(record: dict[str, Any]) -> None:
        nonlocal finished
        finished += 1
        if finished == 1:
            marks["start"], marks["cpu_start"] = time.perf_counter(), sum(os.times()[:2])
        if finished == rss_at:
            marks["rss_at"] = rss_mib()
        if finished % 1000 == 0:
            print(f"  {finished} cases: RSS {rss_mib():.0f} MiB, load {os.getloadavg()[0]:.1f}", flush=True)

    options = RunOptions(
        cases=tuple(many), boards=tuple(BoardSpec(virtual=True) for _ in range(boards)),
        flow="xnnpack", chipset="E9955", out_dir=out / "run", results_path=out / "results.json",
        junit_path=out / "junit.xml", cache_dir=cache, jobs=1, virtual_device_time=device_time,
    )
    load_before = os.getloadavg()
    records = Run(options, on_record=on_record).execute()
    rss_end = rss_mib()  # after the final results.json and JUnit
    wall = time.perf_counter() - marks["start"]
    cpu = sum(os.times()[:2]) - marks["cpu_start"]
    document = load_results(out / "results.json")
    from junitparser import JUnitXml  # the tests' JUnit reader (a test dependency)

    junit_cases = sum(1 for suite in JUnitXml.fromfile(str(out / "junit.xml")) for _case in suite)
    return {
        "cases": cases, "boards": boards, "device_time": device_time, "finished": finished,
        "passed": sum(r["verdict"] in ("PASS", "PASS_UNDELEGATED") for r in records),
        f"rss_mib_at_{rss_at}": round(marks.get("rss_at", float("nan")), 1),
        "rss_mib_at_end": round(rss_end, 1),
        "rss_growth_mib": round(rss_end - marks.get("rss_at", float("nan")), 1),
        "wall_s": round(wall, 1), "hil_process_cpu_ms_per_case": round(cpu / max(finished - 1, 1) * 1000, 2),
        "results_json_cases": len(document["cases"]), "results_json_status": document["run"]["status"],
        "junit_testcases": junit_cases,
        "load_average": {"before": [round(v, 2) for v in load_before],
                         "after": [round(v, 2) for v in os.getloadavg()]},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=50000)
    parser.add_argument("--boards", type=int, default=16)
    parser.add_argument("--device-time", default="1", help="the off-host mode's ms per execution")
    parser.add_argument("--rss-at", type=int, default=1000, help="the case whose RSS is the baseline")
    parser.add_argument("--suite", default="ops")
    parser.add_argument("--out", type=Path, help="keep the run's files here (default: a temporary folder)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    if not 0 < args.rss_at < args.cases:
        parser.error("--rss-at: must be between 0 and --cases")
    with tempfile.TemporaryDirectory(prefix="hil-scale-") as tmp:
        out = args.out or Path(tmp)
        figures = measure(args.cases, args.boards, args.device_time, args.rss_at, out, args.suite)
    print(json.dumps(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
