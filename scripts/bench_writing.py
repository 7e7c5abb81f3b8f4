#!/usr/bin/env python3
"""What writing the results costs as a run grows (figures, not pass/fail).

Feeds N finished case records, each like a passing case of the soak (runner log, latency,
outputs: about 2 KB), through the run's own recording path (`Run._record`: the results
journal, results.json and JUnit rewritten at checkpoints) and then ends the run
(`Run._close`: the final results.json and JUnit), with no board. Prints and writes as JSON
the total seconds, the mean recording time per case over the first and the last 10 %, the
final write, how often results.json was rewritten and the files' sizes.

Usage: PYTHONPATH=. .venv/bin/python scripts/bench_writing.py [--cases 5000] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hil.run import Run, RunOptions  # noqa: E402

RUNNER_LOG = "".join(
    f"I 00:00:00.{i:06d} executorch:enn_executor_runner.cpp:{175 + i}] a runner log line of a passing case\n"
    for i in range(12)
)


def record(index: int) -> dict:
    """A passing case record the size of the soak's."""
    return {
        "suite": "soak", "precision": "fp32", "id": f"mlp4_{index:05d}", "classname": "soak.fp32",
        "file": "soak.yaml", "line": 4 + 6 * index, "board": f"soak-{index % 4}", "verdict": "PASS",
        "message": "", "detail": "", "attempts": 1,
        "timings_s": {"lower": 0.0, "push": 0.0315, "exec": 0.5085, "pull": 0.0528},
        "latency_ms": {"init": 0.013, "load": 0.29, "first": 0.749, "runner_avg": [0.4185],
                       "warmup": 0, "avg": 0.088, "trimmed": 0.088, "p50": 0.088, "p90": 0.088,
                       "min": 0.088, "max": 0.088, "n": 1, "samples": [0.088]},
        "pte_bytes": 2400,
        "delegation": {"delegated_calls": 0, "delegated_ops": [],
                       "undelegated_ops": ["aten.addmm.default", "aten.relu.default"],
                       "delegated_op_count": 0, "undelegated_op_count": 2},
        "outputs": [{"index": 0, "shape": [1, 4], "dtype": "float32", "max_abs": 2.98e-08,
                     "max_rel": 1.35e-07, "mae": 1.1e-08, "sqnr_db": 141.9, "cosine": 1.0,
                     "atol": 0.0001, "rtol": 0.0001, "min_sqnr_db": None, "atol_rule": "case atol",
                     "ok": True}],
        "checker": None, "logs": {"runner": RUNNER_LOG}, "tags": [],
        "started": "2026-11-30T19:19:20.915Z", "finished": "2026-11-30T19:19:21.625Z",
        "cache_hit": True, "earlier_attempts": [],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hil-bench-writing-") as tmp:
        out = Path(tmp)
        options = RunOptions(cases=(), boards=(), flow="portable", chipset="E9955", out_dir=out,
                             results_path=out / "results.json", junit_path=out / "junit.xml")
        run = Run(options)
        per_case = []
        start = time.perf_counter()
        for index in range(args.cases):
            began = time.perf_counter()
            run.recorder.add(record(index))  # the run's recording path, as a board thread calls it
            per_case.append(time.perf_counter() - began)
        began = time.perf_counter()
        run.recorder.close("complete")
        final_s = time.perf_counter() - began
        total_s = time.perf_counter() - start
        tenth = max(1, args.cases // 10)
        figures = {
            "cases": args.cases,
            "total_s": round(total_s, 2),
            "first_10pct_ms_per_case": round(sum(per_case[:tenth]) / tenth * 1e3, 2),
            "last_10pct_ms_per_case": round(sum(per_case[-tenth:]) / tenth * 1e3, 2),
            "slowest_case_ms": round(max(per_case) * 1e3, 1),
            "final_write_s": round(final_s, 2),
            "results_rewrites": run.recorder.writer.checkpoints,
            "results_mb": round((out / "results.json").stat().st_size / 1e6, 2),
            "junit_mb": round((out / "junit.xml").stat().st_size / 1e6, 2),
        }
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
