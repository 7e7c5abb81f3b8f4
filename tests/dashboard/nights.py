"""Twenty generated nights for the dashboard's tests and demos: 3 chipsets × 2 precisions,
each night one run per chipset (both precisions, flow enn), written by hil's own
`ResultsWriter`, so they are real results.json files. What is injected is known
(`INJECTED_FAILURES`, `INJECTED_REGRESSIONS`): the tests check that the page shows exactly it.

The numbers are synthetic (seeded noise around a per-case latency; no board ran anything):
the runs say so in `run.command`. E9945 is a third chipset name hil run does not target; the
dashboard takes whatever `run.chipset` says.

    python -m tests.dashboard.nights OUT     # OUT/NIGHT/CHIPSET/results.json
"""

from __future__ import annotations

import random
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from hil.latency import latency_stats, stability
from hil.report.writer import ResultsWriter

CHIPSETS = ("E9955", "E9965", "E9945")
PRECISIONS = ("fp32", "a8w8")
FLOW = "enn"
NIGHTS = 20
FIRST_NIGHT = date(2026, 11, 12)
SAMPLES = 30
CASES = {
    "smoke": {"add": 0.30, "conv2d": 0.80, "linear": 0.45},
    "ops": {"relu": 0.25, "softmax": 0.60, "matmul": 1.10, "avg_pool2d": 0.50, "layer_norm": 0.70},
    "models": {"mobilenet_v2": 6.0, "resnet18": 11.0},
}
"""suite -> case -> its fp32 p50 on E9955 (ms); other chipsets and A8W8 scale it."""
SPEED = {"E9955": 1.0, "E9965": 0.8, "E9945": 1.3}
A8W8_SPEED = 0.6
NOISE_CV = 0.02


def night(number: int) -> str:
    """The date of night `number` (0 = the first)."""
    return (FIRST_NIGHT + timedelta(days=number)).isoformat()


INJECTED_FAILURES = {
    (night(3), "E9965", "ops", "a8w8", "softmax"): "FAIL_MISMATCH",
    (night(9), "E9955", "models", "fp32", "mobilenet_v2"): "FAIL_RUN",
    (night(14), "E9945", "smoke", "fp32", "linear"): "FAIL_LOWER",
    (night(19), "E9955", "ops", "a8w8", "layer_norm"): "FAIL_MISMATCH",  # localized
}
"""(night, chipset, suite, precision, case) -> the failing verdict that night."""
INJECTED_ERRORS = {(night(16), "E9965", "smoke", "a8w8", "add"): "ERROR_INFRA"}
"""An infrastructure error: an `error` cell, not a failure."""
KNOWN_FAILURE = ("E9945", "ops", "a8w8", "avg_pool2d")
"""XFAIL every night: a known failure never shows as a failed cell."""
INJECTED_REGRESSIONS = {
    (night(5), "E9955", "fp32", "ops.fp32.softmax"): (1.6, True),
    (night(12), "E9965", "a8w8", "models.a8w8.mobilenet_v2"): (1.3, True),
    (night(17), "E9945", "fp32", "smoke.fp32.conv2d"): (2.0, False),
    (night(19), "E9955", "a8w8", "ops.a8w8.matmul"): (1.25, True),
}
"""(night, chipset, precision, case key) -> (latency factor from that night, persistent). A
spike (not persistent) comes back the next night: that is `faster`, not a regression."""
NOT_REGRESSIONS = {
    (night(8), "E9965", "fp32", "smoke.fp32.add"): (1.05, True),  # below the 10% threshold
    (night(10), "E9955", "fp32", "models.fp32.resnet18"): (1.6, True),  # that night 1 sample
}
"""Moves `hil compare` must not call regressions (and so the dashboard must not flag)."""
ONE_SAMPLE = {(night(10), "E9955", "fp32", "models.fp32.resnet18")}
"""Runs of a case measured with one sample (`--latency quick`): too few to test."""
SQNR_DROP = (night(7), "E9945", "a8w8", "models.a8w8.resnet18", 9.0)
"""A passing case whose SQNR drops by 9 dB from that night on: a top SQNR mover."""
QUARANTINES = {(night(13), "E9965"): "e9965-a"}
"""A board quarantined for good that night (recovery failed): capacity lost."""
RECOVERIES = {(night(6), "E9955"): "e9955-b", (night(13), "E9965"): "e9965-a"}
CAPACITY_FROM = 10
"""Runs from this night on record `run.capacity_lost` (older hil did not)."""


def _factor(day: int, chipset: str, precision: str, key: str) -> float:
    factor = 1.0
    for (when, chip, prec, case), (scale, persistent) in {**INJECTED_REGRESSIONS, **NOT_REGRESSIONS}.items():
        if (chip, prec, case) != (chipset, precision, key):
            continue
        start = date.fromisoformat(when)
        today = FIRST_NIGHT + timedelta(days=day)
        if today == start or (persistent and today > start):
            factor *= scale
    return factor


def _latency(rng: random.Random, p50: float, samples: int) -> dict[str, Any]:
    values = [p50 * max(0.5, rng.gauss(1.0, NOISE_CV)) for _ in range(samples)]
    stats = latency_stats(values)
    return {"init": 0.1, "load": 2.0, "first": p50 * 1.2, **stats,
            **stability(stats, cv_limit=0.1), "warmup": 3 if samples > 1 else 0}


def _sqnr(day: int, chipset: str, precision: str, key: str, rng: random.Random) -> float:
    base = 120.0 if precision == "fp32" else 38.0 + (sum(map(ord, key)) % 7)
    when, chip, prec, case, drop = SQNR_DROP
    if (chip, prec, case) == (chipset, precision, key) and night(day) >= when:
        base -= drop
    return round(base + rng.gauss(0, 0.2), 2)


def _case(day: int, chipset: str, suite: str, precision: str, case_id: str, p50: float,
          rng: random.Random) -> dict[str, Any]:
    key = f"{suite}.{precision}.{case_id}"
    when = night(day)
    verdict = (INJECTED_FAILURES.get((when, chipset, suite, precision, case_id))
               or INJECTED_ERRORS.get((when, chipset, suite, precision, case_id)) or "PASS")
    board = f"{chipset.lower()}-{'ab'[sum(map(ord, key)) % 2]}"
    record: dict[str, Any] = {
        "suite": suite, "precision": precision, "id": case_id, "classname": f"{suite}.{precision}",
        "file": f"hil/cases/{suite}.py", "line": 10, "board": board, "verdict": verdict,
        "message": "", "detail": "", "attempts": 1,
    }
    if (chipset, suite, precision, case_id) == KNOWN_FAILURE:
        record.update(verdict="XFAIL", actual_verdict="FAIL_MISMATCH",
                      expected={"verdict": "FAIL_MISMATCH", "reason": "ENN avg_pool2d rounding",
                                "link": ""})
    if verdict in ("FAIL_LOWER", "ERROR_INFRA"):
        record.update(board=None if verdict == "FAIL_LOWER" else board, latency_ms=None, outputs=[],
                      message="lowering failed" if verdict == "FAIL_LOWER" else "board lost")
        return record
    scale = SPEED[chipset] * (A8W8_SPEED if precision == "a8w8" else 1.0)
    samples = 1 if (when, chipset, precision, key) in ONE_SAMPLE else SAMPLES
    record["latency_ms"] = _latency(rng, p50 * scale * _factor(day, chipset, precision, key), samples)
    sqnr = _sqnr(day, chipset, precision, key, rng)
    ok = verdict not in ("FAIL_MISMATCH",)
    if not ok:
        sqnr = 6.0
        record["message"] = "output 0: max abs error 0.61 above atol 0.07"
    record["outputs"] = [{"index": 0, "shape": [1, 16], "dtype": "float32",
                          "max_abs": 10 ** (-sqnr / 20), "sqnr_db": sqnr, "atol": 0.07,
                          "rtol": 0.0, "ok": ok}]
    if (when, chipset, suite, precision, case_id) == (night(19), "E9955", "ops", "a8w8", "layer_norm"):
        record["localization"] = _localization(board)
    return record


def _localization(board: str) -> dict[str, Any]:
    """A found localization over a 12-node graph: probes good up to node 6, bad from 7."""
    def probe(index: int, bad: bool) -> dict[str, Any]:
        return {"index": index, "name": f"node_{index}", "op_name": "layer_norm" if index == 7 else "add",
                "module": f"blocks.{index}", "source": "tests/dashboard/nights.py:1", "board_run": True,
                "verdict": "FAIL_MISMATCH" if bad else "PASS", "diverged": bad,
                "max_abs": 0.4 + index / 100 if bad else 1e-4 * (index + 1),
                "sqnr_db": 7.0 - index / 10 if bad else 40.0 - index, "atol": 0.07}

    probes = [probe(i, i >= 7) for i in (11, 5, 8, 6, 7)]
    first = probes[-1]
    return {"status": "found", "message": "first diverging op: layer_norm at blocks.7 "
                                          "(tests/dashboard/nights.py:1)",
            "board": board, "flow": FLOW, "precision": "a8w8", "nodes": 12, "clean_cut_points": 12,
            "board_runs": 5, "max_board_runs": 6, "first_diverging": first, "last_good": probes[3],
            "probes": probes}


def _boards(day: int, chipset: str) -> list[dict[str, Any]]:
    boards = []
    for suffix in "ab":
        name = f"{chipset.lower()}-{suffix}"
        board: dict[str, Any] = {"name": name, "adb": f"10.0.0.{len(boards) + 10}:5555",
                                 "chipset": chipset, "virtual": False}
        if RECOVERIES.get((night(day), chipset)) == name:
            board["recovery"] = [{"step": "reconnect", "recovered": True, "message": "", "seconds": 0.4}]
        if QUARANTINES.get((night(day), chipset)) == name:
            board["recovery"] += [{"step": "reboot", "recovered": False, "message": "no boot",
                                   "seconds": 120.0}]
            board["probation"] = [{"why": "recovery failed", "out_s": 600.0,
                                   "health_check": "no answer", "back": False}]
            board["quarantined"] = "recovery failed; 1 health check failed"
        boards.append(board)
    return boards


def write_run(out: Path, day: int, chipset: str) -> Path:
    """One night's run of one chipset: OUT/NIGHT/CHIPSET/results.json."""
    started = f"{night(day)}T02:{17 + CHIPSETS.index(chipset):02d}:00Z"
    run = {"id": f"{night(day).replace('-', '')}-0217-{chipset.lower()}", "started": started,
           "command": ["python", "-m", "tests.dashboard.nights", "(synthetic nights)"],
           "flow": FLOW, "chipset": chipset, "virtual": False, "shard": "1/1",
           "boards": _boards(day, chipset), "usable_boards": 2}
    if day >= CAPACITY_FROM:
        lost = 1800.0 if (night(day), chipset) in QUARANTINES else 0.0
        run["capacity_lost"] = {"board_seconds_out": lost, "board_seconds": 7200.0,
                                "fraction": lost / 7200.0}
    path = out / night(day) / chipset / "results.json"
    writer = ResultsWriter(path, run)
    rng = random.Random(f"{day}-{chipset}")  # noqa: S311 - synthetic noise
    for precision in PRECISIONS:
        for suite, cases in CASES.items():
            for case_id, p50 in cases.items():
                writer.add(_case(day, chipset, suite, precision, case_id, p50, rng))
    writer.finish("complete")
    return path


def write_nights(out: Path, nights: int = NIGHTS) -> list[Path]:
    """Write the nights under `out`; their paths, oldest first. The runs are written by 8
    threads at once: the writer's fsyncs (a run's end is durable) are most of the time."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda job: write_run(out, *job),
                             [(day, chipset) for day in range(nights) for chipset in CHIPSETS]))


if __name__ == "__main__":
    written = write_nights(Path(sys.argv[1]))
    print(f"{len(written)} results files under {sys.argv[1]}")
