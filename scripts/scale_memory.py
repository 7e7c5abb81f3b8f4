#!/usr/bin/env python3
"""hil's memory as a run grows (figures, not pass/fail): RSS at the 1,000th and the Nth
finished case, after the final results.json and JUnit, and after the end-of-run renderings
(table, GitHub groups, annotations, step summary); then the final files checked (results.json
loads a case at a time with N cases and the totals; JUnit parses with N testcases and its
suites' counts; against Jenkins' schema up to --xsd-cases).

Two modes:

- `record` (default, minutes): N synthetic case records (a soak case's size, 2 % failures
  with detail and logs, 16 boards) through the run's own recording path (`Run.recorder`,
  as the board threads call it, with the plain progress lines) and then what `hil run`
  does at its end, in this process, with no board.
- `run`: a real `hil run` of N tiny cases (scripts/soaklib/cases.py: lowered once) on
  `--boards` virtual boards, as its own process; its RSS read from /proc when its progress
  lines say the 1,000th and the Nth case finished. `--hil-arg` passes options to `hil run`
  (e.g. the virtual boards' off-host mode: docs/explanation/virtual-board.md); without it each
  case costs real host CPU, so N is bounded by the time you give it.

Usage: PYTHONPATH=. .venv/bin/python scripts/scale_memory.py --cases 50000 [--mode run --boards 16]
       [--json FILE]
The goal: RSS grows by at most 50 MB from the 1,000th to the 50,000th case.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

MB = 1024 * 1024
FIRST = 1000
"""The case after which growth is measured (imports, boards and caches have settled)."""
RUNNER_LOG = "".join(
    f"I 00:00:00.{i:06d} executorch:enn_executor_runner.cpp:{175 + i}] a runner log line of a passing case\n"
    for i in range(12)
)


def rss_bytes(pid: int | str = "self") -> int:
    """Resident set size of process `pid` (/proc/PID/status VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def record(index: int) -> dict[str, Any]:
    """A case record the size of the soak's; every 50th a FAIL_MISMATCH with detail and logs."""
    failed = index % 50 == 7
    return {
        "suite": "scale", "precision": "fp32" if index % 2 else "a8w8", "id": f"mlp_{index:06d}",
        "classname": "scale.fp32" if index % 2 else "scale.a8w8", "file": "scale.yaml",
        "line": 4 + index, "board": f"virtual-{index % 16}",
        "verdict": "FAIL_MISMATCH" if failed else "PASS",
        "message": f"output 0: max abs error {index % 7 + 1}e-2 exceeds tolerance" if failed else "",
        "detail": ("worst at [0, 3]\n" * 20) if failed else "", "attempts": 1,
        "timings_s": {"lower": 0.0, "push": 0.0315, "exec": 0.5085 + index % 13 / 100, "pull": 0.0528},
        "latency_ms": {"init": 0.013, "load": 0.29, "first": 0.749, "warmup": 0, "p50": 0.088,
                       "p90": 0.09, "p99": 0.1, "mean": 0.088, "trimmed": 0.088, "std": 0.001,
                       "cv": 0.01, "min": 0.087, "max": 0.1, "n": 5, "unstable": False,
                       "samples": [0.088, 0.087, 0.09, 0.1, 0.088]},
        "pte_bytes": 2400,
        "delegation": {"delegated_calls": 0, "delegated_ops": [],
                       "undelegated_ops": ["aten.addmm.default", "aten.relu.default"]},
        "outputs": [{"index": 0, "shape": [1, 4], "dtype": "float32",
                     "max_abs": (index % 7 + 1) / 100 if failed else 2.98e-08, "max_rel": 1.35e-07,
                     "mae": 1.1e-08, "sqnr_db": 141.9, "cosine": 1.0, "atol": 0.0001, "rtol": 0.0001,
                     "ok": not failed}],
        "logs": {"runner": RUNNER_LOG, **({"logcat": RUNNER_LOG * 4} if failed else {})},
        "tags": [], "started": "2026-11-30T19:19:20.915Z", "finished": "2026-11-30T19:19:21.625Z",
        "cache_hit": True, "earlier_attempts": [],
    }


def record_mode(cases: int, out: Path) -> dict[str, Any]:
    """N records through `Run.recorder`, then `hil run`'s end in this process."""
    from hil.commands.common import emit_github
    from hil.report.console import make_console, render_table
    from hil.report.progress import PlainProgress
    from hil.run import Run, RunOptions

    figures: dict[str, Any] = {}
    progress = PlainProgress(cases, io.StringIO())
    options = RunOptions(cases=(), boards=(), flow="portable", chipset="E9955", out_dir=out,
                         results_path=out / "results.json", junit_path=out / "junit.xml")
    run = Run(options, on_record=progress.on_record)
    start = time.perf_counter()
    for index in range(cases):
        run.recorder.add(record(index))  # the run's recording path, as a board thread calls it
        progress.stream.seek(0)
        progress.stream.truncate()  # the progress lines go to the log, not to memory
        if index + 1 in (FIRST, cases):
            figures[f"rss_mb_at_case_{index + 1}"] = round(rss_bytes() / MB, 1)
    figures["record_s"] = round(time.perf_counter() - start, 1)
    began = time.perf_counter()
    run.recorder.close("complete")
    figures["final_files_s"] = round(time.perf_counter() - began, 1)
    figures["rss_mb_after_final_files"] = round(rss_bytes() / MB, 1)
    results = run.recorder.results()
    with open(os.devnull, "w") as devnull:  # noqa: PTH123 - a text stream for the console
        render_table(results, make_console(devnull))
        os.environ["GITHUB_STEP_SUMMARY"] = str(out / "summary.md")
        stdout, sys.stdout = sys.stdout, devnull
        try:
            emit_github(results)
        finally:
            sys.stdout = stdout
    figures["rss_mb_after_renderings"] = round(rss_bytes() / MB, 1)
    figures["peak_rss_mb"] = round(_peak_rss() / MB, 1)
    return figures


def run_mode(cases: int, boards: int, out: Path, hil_args: list[str]) -> dict[str, Any]:
    """`hil run` of N tiny cases on `boards` virtual boards, its RSS sampled from /proc."""
    from soaklib.cases import FLOW, prepare_cases

    cache = out / "cache"  # its own: the copies' entries are not for anyone else
    manifest, _ = prepare_cases(out, cases, cache, "E9955")
    argv = [sys.executable, "-m", "hil", "run", "--suite", str(manifest), "--flow", FLOW,
            "--board", f"virtual:{boards}", "--out", str(out / "out"), "--cache-dir", str(cache),
            *hil_args]
    env = {**os.environ, "CI": "1", "PYTHONPATH": str(REPO)}
    figures: dict[str, Any] = {"boards": boards, "hil_args": hil_args}
    peak = [0, 0]  # bytes, and the cases finished when it was reached
    finished = [0]
    process = subprocess.Popen(argv, cwd=out, env=env, stdout=subprocess.PIPE, text=True)
    done = threading.Event()

    def sample() -> None:  # the peak, between the progress lines too
        while not done.wait(0.5):
            try:
                rss = rss_bytes(process.pid)
            except (OSError, RuntimeError):
                return
            if rss > peak[0]:
                peak[:] = [rss, finished[0]]

    threading.Thread(target=sample, daemon=True).start()
    start = time.perf_counter()
    line_of = re.compile(r"^\[\s*(\d+)/(\d+)\]")
    assert process.stdout is not None
    for line in process.stdout:
        match = line_of.match(line)
        if match:
            finished[0] = int(match.group(1))
        if match and int(match.group(1)) in (FIRST, cases):
            figures[f"rss_mb_at_case_{match.group(1)}"] = round(rss_bytes(process.pid) / MB, 1)
            figures[f"s_at_case_{match.group(1)}"] = round(time.perf_counter() - start, 1)
    figures["exit_code"] = process.wait()
    done.set()
    figures["peak_rss_mb"] = round(peak[0] / MB, 1)
    figures["peak_rss_after_case"] = peak[1]  # 0: before the first case (start-up, lowering)
    figures["run_s"] = round(time.perf_counter() - start, 1)
    (out / "results.json").symlink_to(out / "out" / "results.json")
    (out / "junit.xml").symlink_to(out / "out" / "junit.xml")
    return figures


def _peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def check_files(out: Path, cases: int, xsd_cases: int) -> dict[str, Any]:
    """results.json read a case at a time, JUnit parsed incrementally; what they hold."""
    from hil.report.results import case_texts, ordered_totals

    counts: Counter[str] = Counter()
    for text in case_texts(out / "results.json"):
        counts[json.loads(text)["verdict"]] += 1
    with (out / "results.json").open(encoding="utf-8") as stream:
        head = "".join(stream.readline() for _ in range(4))
    tail = (out / "results.json").read_bytes()[-4096:].decode("utf-8", "ignore")
    totals = json.loads("{" + tail[tail.rindex('"totals"'):])["totals"]
    testcases = 0
    suite_tests = 0
    for _, element in ET.iterparse(out / "junit.xml"):  # noqa: S314 - the file this run wrote
        if element.tag == "testcase":
            testcases += 1
            element.clear()
        elif element.tag == "testsuite":
            suite_tests += int(element.get("tests", "0"))
            element.clear()
    checks = {
        "results_cases": sum(counts.values()),
        "results_totals_match": totals == ordered_totals(counts),
        "results_version_4": '"version": 4' in head,
        "junit_testcases": testcases,
        "junit_suite_counts_match": suite_tests == testcases,
        "results_mb": round((out / "results.json").stat().st_size / MB, 1),
        "junit_mb": round((out / "junit.xml").stat().st_size / MB, 1),
    }
    if cases <= xsd_cases:
        from tests.junit_schema import assert_valid_junit

        assert_valid_junit(out / "junit.xml")
        checks["junit_schema_valid"] = True
    checks["valid"] = (checks["results_cases"] == cases == testcases and checks["results_totals_match"]
                       and checks["junit_suite_counts_match"])
    return checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20000)
    parser.add_argument("--mode", choices=("record", "run"), default="record")
    parser.add_argument("--boards", type=int, default=16, help="run mode: virtual boards")
    parser.add_argument("--hil-arg", action="append", default=[], help="run mode: an option of hil run")
    parser.add_argument("--xsd-cases", type=int, default=5000,
                        help="validate JUnit against the schema up to this many cases (it loads the file)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    if args.cases <= FIRST:
        parser.error(f"--cases must be above {FIRST}")
    with tempfile.TemporaryDirectory(prefix="hil-scale-") as tmp:
        out = Path(tmp)
        if args.mode == "record":
            figures = {"mode": "record", "cases": args.cases, **record_mode(args.cases, out)}
        else:
            figures = {"mode": "run", "cases": args.cases,
                       **run_mode(args.cases, args.boards, out, args.hil_arg)}
        first, last = figures.get(f"rss_mb_at_case_{FIRST}"), figures.get(f"rss_mb_at_case_{args.cases}")
        if first is not None and last is not None:
            figures["rss_growth_mb"] = round(last - first, 1)
            figures["rss_growth_kb_per_case"] = round((last - first) * 1024 / (args.cases - FIRST), 2)
        figures.update(check_files(out, args.cases, args.xsd_cases))
        text = json.dumps(figures, indent=2)  # before the folder goes: 50,000 cases' cache
        print(text, flush=True)               # entries and folders take minutes to remove
        if args.json:
            args.json.write_text(text + "\n")
    return 0 if figures["valid"] else 1


if __name__ == "__main__":
    sys.exit(main())
