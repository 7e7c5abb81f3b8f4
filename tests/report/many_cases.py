"""A run of a few hundred varied cases, made the same way each time (for the fixtures of
tests/report/test_streaming.py, written by the in-memory renderings)."""

from __future__ import annotations

from typing import Any

from . import case

VERDICTS = ("PASS", "PASS", "PASS_UNDELEGATED", "FAIL_MISMATCH", "PASS", "ERROR_INFRA", "XFAIL",
            "FAIL_RUN", "PASS", "SKIP", "XPASS", "PASS_UNDELEGATED", "FAIL_LOWER")


def many_cases(count: int = 300) -> list[dict[str, Any]]:
    """`count` cases over 3 suites, 2 precisions and 4 boards, every verdict, varied errors,
    timings and latencies (ties included)."""
    cases = []
    for index in range(count):
        verdict = VERDICTS[index * 7 % len(VERDICTS)]
        suite = ("ops", "models", "smoke")[index % 3]
        precision = ("fp32", "a8w8")[index // 3 % 2]
        board = None if verdict in ("SKIP", "FAIL_LOWER") or index % 17 == 0 else f"b{index % 4}"
        cases.append(case(
            suite, precision, f"c{index:04d}_{'x' * (index % 5)}", verdict, board=board,
            message=f"message {index}" + (" with a longer tail" * (index % 3)),
            detail="detail line\n" * (index % 4) if verdict.startswith(("FAIL", "ERROR")) else "",
            outputs=[{"index": 0, "max_abs": (index % 11) / 10, "sqnr_db": 20.0 + index % 9,
                      "atol": 1e-3, "rtol": 1e-3, "ok": verdict != "FAIL_MISMATCH"}],
            timings_s={"lower": 0.5, "push": 0.01, "exec": (index % 23) / 10, "pull": 0.01},
            latency_ms={"p50": 0.4 + index % 5, "mean": 0.5, "n": 5} if index % 4 else None,
            expected={"verdict": "FAIL_RUN", "reason": f"known {index}"} if verdict == "XFAIL" else None,
        ))
    return cases
