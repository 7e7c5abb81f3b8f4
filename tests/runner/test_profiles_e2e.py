"""Runner profiles in whole runs: hil refuses a flow a board's runner cannot execute before
lowering anything, and a board whose runner is upstream's refuses what upstream's refuses even
when hil is told otherwise (real adb server, virtual boards, ExecuTorch's runtime)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hil.virtual.launcher import start_virtual_board

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def hil(*args: str, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hil", "run", "--suite", "smoke", "--out", str(out), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=900)


def test_a_flow_the_runner_cannot_execute_stops_before_lowering(tmp_path: Path) -> None:
    done = hil("--board", "virtual", "--runner-profile", "upstream", "--flow", "xnnpack", out=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    *status, line = done.stderr.splitlines()  # hil's status lines first, then one error line
    assert all(text.startswith(("hil: ", "hil run ")) and "error" not in text for text in status), status
    assert line.startswith("hil: error: --flow xnnpack: virtual-0 (runner profile upstream: ENN + portable "
                           "kernels")
    assert "cannot run xnnpack fp32: its runner has no XnnpackBackend delegate" in line
    assert "ways out" in line
    assert not (tmp_path / "artifacts").exists()  # nothing was lowered
    doc = json.loads((tmp_path / "results.json").read_text())
    assert (doc["run"]["status"], doc["cases"]) == ("refused", [])
    assert (tmp_path / "junit.xml").is_file()


def test_upstream_runner_runs_portable_fp32_smoke_green(tmp_path: Path) -> None:
    done = hil("--board", "virtual", "--runner-profile", "upstream", "--flow", "portable",
               "--iterations", "2", out=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["run"]["flow"] == "portable"
    assert doc["run"]["boards"][0]["runner_profile"]["name"] == "upstream"
    assert len(doc["cases"]) == 7 and {c["verdict"] for c in doc["cases"]} == {"PASS"}
    for case in doc["cases"]:  # the same latency record as on the hil profile (test_run_e2e)
        assert case["latency_ms"]["n"] == 2 and case["latency_ms"]["first"] > 0


def test_the_board_refuses_what_its_runner_cannot_load(tmp_path: Path) -> None:
    """hil is told the runner is the full one; the board's runner is upstream's: every
    XNNPACK program fails in load_method, and the message names the backend."""
    with start_virtual_board(tmp_path / "board", "E9955", "upstream-runner",
                             ["--runner-profile", "upstream"]) as board:
        done = hil("--board", board.address, "--runner-profile", "hil", "--flow", "xnnpack", out=tmp_path / "out")
    assert done.returncode == 1, done.stdout + done.stderr
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert len(doc["cases"]) == 7
    for case in doc["cases"]:
        assert case["verdict"] == "FAIL_LOAD"
        assert case["message"] == (
            "runner could not load the program (SIGABRT, exit 134): Loading of method forward failed with "
            "status 0x20 (NotFound): Backend XnnpackBackend is not registered.")
        assert "executorch:method.cpp:85] Backend XnnpackBackend is not registered." in case["logs"]["runner"]
