"""Tests of hil.report. `sample_results` builds the hand-made results document they share."""

from __future__ import annotations

import copy
from typing import Any

RUN: dict[str, Any] = {
    "id": "20261130-033500-ab12cd",
    "status": "complete",
    "started": "2026-11-30T03:35:00Z",
    "finished": "2026-11-30T03:36:10Z",
    "command": ["hil", "run", "--suite", "smoke"],
    "hil": "0.1.0",
    "torch": "2.14.1",
    "executorch": "1.5.1",
    "sdk": None,
    "flow": "xnnpack",
    "flow_reason": "auto: LITECORE SDK not found -> xnnpack",
    "chipset": "E9955",
    "virtual": True,
    "git_sha": "0123abcd",
    "shard": "1/1",
    "boards": [
        {
            "name": "virtual-0",
            "adb": "127.0.0.1:40123",
            "chipset": "E9955",
            "virtual": True,
            "properties": {},
            "runner_profile": {"name": "hil", "source": "virtual board", "description": "..."},
        }
    ],
}


def case(suite: str, precision: str, case_id: str, verdict: str, **fields: Any) -> dict[str, Any]:
    """A finished case record with plausible defaults; `fields` override them."""
    record: dict[str, Any] = {
        "suite": suite,
        "precision": precision,
        "id": case_id,
        "classname": f"{suite}.{precision}",
        "file": f"hil/cases/{suite}.py",
        "line": 10,
        "board": "virtual-0",
        "verdict": verdict,
        "message": "",
        "detail": "",
        "attempts": 1,
        "timings_s": {"lower": 1.25, "push": 0.01, "exec": 0.02, "pull": 0.01},
        "latency_ms": {"init": 0.1, "load": 2.0, "first": 0.5, "avg": 0.4},
        "pte_bytes": 12345,
        "delegation": {"delegated_calls": 1, "delegated_ops": [], "undelegated_ops": []},
        "outputs": [
            {
                "index": 0,
                "shape": [1, 8],
                "dtype": "float32",
                "max_abs": 1e-6,
                "max_rel": 1e-5,
                "mae": 1e-7,
                "sqnr_db": 120.0,
                "atol": 1e-4,
                "rtol": 1e-4,
                "ok": True,
            }
        ],
        "logs": {"runner": "loading model.pte\nrun ok\n"},
    }
    record.update(fields)
    return record


CASES = [
    case("smoke", "fp32", "conv2d", "PASS"),
    case(
        "smoke",
        "fp32",
        "linear",
        "PASS_UNDELEGATED",
        message="aten.linear.default ran on the CPU",
        delegation={
            "delegated_calls": 0,
            "delegated_ops": [],
            "undelegated_ops": ["aten.linear.default"],
        },
    ),
    case(
        "smoke",
        "fp32",
        "add",
        "FAIL_MISMATCH",
        message="output 0: max abs error 0.5 exceeds tolerance (atol 0.0001, rtol 0.0001)",
        detail="worst at [0, 3]\nexpected 1.0 got 1.5",
    ),
    case(
        "smoke",
        "fp32",
        "relu6",
        "SKIP",
        message="flow xnnpack cannot express relu6",
        board=None,
        timings_s={},
        latency_ms=None,
        outputs=[],
        logs={},
    ),
    case(
        "models",
        "a8w8",
        "mobilenet_v2",
        "FAIL_RUN",
        message="runner died by SIGSEGV",
        logs={"runner": "\x1b[31mloading\x1b[0m model\x00\r\nSegmentation\x07 fault\n"},
    ),
    case(
        "models",
        "a8w8",
        "resnet18",
        "ERROR_INFRA",
        message="board lost: adb offline",
        board=None,
        attempts=2,
    ),
    case(
        "models",
        "a8w8",
        "vit_tiny",
        "ERROR_INTERNAL",
        message="KeyError: 'x'",
        detail="Traceback (most recent call last):\n  ...\nKeyError: 'x'",
    ),
]


def sample_results() -> dict[str, Any]:
    """A complete document covering every kind of JUnit element over two suite.precisions:
    smoke.fp32 (4 tests, 1 failure, 1 skipped), models.a8w8 (3 tests, 1 failure, 2 errors)."""
    return {
        "schema": "exynos-hil/results",
        "version": 1,
        "run": copy.deepcopy(RUN),
        "cases": copy.deepcopy(CASES),
        "totals": {
            "PASS": 1,
            "PASS_UNDELEGATED": 1,
            "SKIP": 1,
            "FAIL_RUN": 1,
            "FAIL_MISMATCH": 1,
            "ERROR_INFRA": 1,
            "ERROR_INTERNAL": 1,
        },
    }
