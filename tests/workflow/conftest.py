"""`network_run`: one run on the session's virtual board reached as a network board
(`HOST:PORT`), with an inventory board of the other chipset beside it, as in GitHub Actions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "fixtures" / "tiny.yaml"
OTHER_CHIPSET = "e9965-elsewhere"
"""An inventory board of chipset E9965 nobody can reach: an E9955 run must leave it out."""


@pytest.fixture(scope="session")
def network_run(tmp_path_factory: pytest.TempPathFactory, adb_server, virtual_board,
                board_device) -> Path:
    """One `hil run` of tiny.yaml (flow portable) on the session's virtual board reached as a
    network board (HOST:PORT), as in GitHub Actions, then `hil report` of it: ~10 s. Every
    case's outputs are kept (`--keep-outputs`): folders named after the board."""
    root = tmp_path_factory.mktemp("network-run")
    inventory = root / "boards.yaml"
    inventory.write_text(f"boards:\n  - name: {OTHER_CHIPSET}\n    adb: 127.0.0.1:1\n"
                         "    chipset: E9965\n")
    env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(root / "summary.md")}
    done = subprocess.run(
        [sys.executable, "-m", "hil", "run", "--inventory", str(inventory), "--board",
         OTHER_CHIPSET, "--board", virtual_board.address, "--board-wait", "600",
         "--adb-server", adb_server.address, "--suite", str(TINY), "--flow", "portable",
         "--out", str(root / "hil-out"), "--keep-outputs"],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    (root / "stdout.txt").write_text(done.stdout)
    (root / "stderr.txt").write_text(done.stderr)
    report = subprocess.run(
        [sys.executable, "-m", "hil", "report", str(root / "hil-out" / "results.json"),
         "--junit", str(root / "hil-out" / "again.xml"), "--summary",
         str(root / "hil-out" / "summary.md")],
        cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert report.returncode == 0, report.stdout + report.stderr
    return root / "hil-out"


