"""`hil boards` and `hil run --inventory` against real virtual boards: a board that is not
what the inventory says is named and left out, and the run goes on on the healthy one."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hil.virtual.launcher import start_virtual_board

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # three boards and a smoke run


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """good (E9955, console), wrong (reports E9965), bare (no ENN vendor library); the
    inventory says E9955 for all three."""
    root = tmp_path_factory.mktemp("lab")
    with start_virtual_board(root / "good", "E9955", "good",
                             ["--console", str(root / "good.tty")]) as good, \
         start_virtual_board(root / "wrong", "E9965", "wrong") as wrong, \
         start_virtual_board(root / "bare", "E9955", "bare", ["--no-vendor-lib"]) as bare:
        inventory = root / "boards.yaml"
        inventory.write_text(yaml.safe_dump({"boards": [
            {"name": "good", "adb": good.address, "chipset": "E9955",
             "console": str(root / "good.tty")},
            {"name": "wrong", "adb": wrong.address, "chipset": "E9955"},
            {"name": "bare", "adb": bare.address, "chipset": "E9955"},
        ]}))
        yield {"inventory": inventory, "root": root}


def hil(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hil", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=900)


def test_check_names_the_chipset_mismatch_and_the_missing_vendor_library(lab) -> None:
    done = hil("boards", "--inventory", str(lab["inventory"]), "--check")
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:4] == ["name", "adb", "chipset", "state"]
    rows = {line.split()[0]: line for line in lines[1:4]}
    assert "E9965 (inventory: E9955)" in rows["wrong"]
    assert "MISSING" in rows["bare"]
    assert rows["good"].split()[-1] == "ok" or "ok (" in rows["good"]  # console
    assert ("wrong: chipset mismatch: getprop says E9965 (ro.soc.model=S5E9965), "
            "the inventory says E9955") in lines
    assert any(line.startswith("bare: ENN vendor library libenn_public_api_cpp.so missing")
               for line in lines)
    assert not any(line.startswith("good:") for line in lines)


def test_listing_without_check_still_flags_the_mismatch(lab) -> None:
    done = hil("boards", "--inventory", str(lab["inventory"]), "--board", "wrong")
    assert done.returncode == 2
    assert "chipset mismatch" in done.stdout and "good" not in done.stdout


def test_run_uses_the_healthy_board_and_passes(lab, tmp_path: Path) -> None:
    done = hil("run", "--inventory", str(lab["inventory"]), "--suite", "smoke",
               "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert {case["board"] for case in results["cases"]} == {"good"}
    assert {case["verdict"] for case in results["cases"]} == {"PASS"}
    boards = {board["name"]: board for board in results["run"]["boards"]}
    assert "chipset mismatch" in boards["wrong"]["error"]
    assert "vendor library" in boards["bare"]["error"]
    assert boards["good"]["console"] == str(lab["root"] / "good.tty")
    log = (tmp_path / "out" / "console" / "good.log").read_text()
    assert log.count("enn: runner pid") == 2 * len(results["cases"])  # started + exited
