"""Every file a run with a network board writes can be uploaded by `actions/upload-artifact`:
no `" : < > | * ?` in any path (the board's name is `HOST:PORT`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hil.paths import FORBIDDEN, safe_name

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "fixtures" / "tiny.yaml"


def test_safe_name_replaces_every_forbidden_character() -> None:
    assert safe_name("127.0.0.1:5555") == "127.0.0.1_5555"
    assert safe_name('a"b<c>d|e*f?g\\h/i\nj') == "a_b_c_d_e_f_g_h_i_j"
    assert safe_name("..") == "__" and safe_name("") == "_"


@pytest.fixture(scope="module")
def network_run(tmp_path_factory: pytest.TempPathFactory, adb_server, virtual_board,
                board_device) -> Path:
    """One `hil run` of tiny.yaml (flow portable) on the session's virtual board reached as a
    network board (HOST:PORT), as in GitHub Actions, then `hil report` of it: ~10 s."""
    root = tmp_path_factory.mktemp("network-run")
    env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(root / "summary.md")}
    done = subprocess.run(
        [sys.executable, "-m", "hil", "run", "--board", virtual_board.address,
         "--adb-server", adb_server.address, "--suite", str(TINY), "--flow", "portable",
         "--out", str(root / "hil-out")],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    report = subprocess.run(
        [sys.executable, "-m", "hil", "report", str(root / "hil-out" / "results.json"),
         "--junit", str(root / "hil-out" / "again.xml"), "--summary",
         str(root / "hil-out" / "summary.md")],
        cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert report.returncode == 0, report.stdout + report.stderr
    return root / "hil-out"


def test_no_written_path_holds_a_character_upload_artifact_refuses(network_run: Path,
                                                                   virtual_board) -> None:
    assert ":" in virtual_board.address
    written = [p.relative_to(network_run).as_posix() for p in network_run.rglob("*")]
    assert any("output-" in p for p in written)  # the board's own folders are among them
    bad = [p for p in written if any(c in p for c in FORBIDDEN)]
    assert bad == []
