"""The board-side backstop: a hung runner that the host cannot kill (its PID file is gone) is
ended on the board by `timeout` before the watchdog would call the board silent, and the
case is a TIMEOUT, not an infrastructure error."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from hil.virtual.launcher import start_virtual_board

from . import board_entry, run_in_process, wait_until_warm, write_inventory

pytestmark = pytest.mark.slow  # one short run with a 3.5 s hang


def test_hung_runner_the_host_cannot_kill_is_a_timeout(tmp_path: Path) -> None:
    with start_virtual_board(tmp_path / "board", "E9955", "backstop") as board:
        wait_until_warm(board)
        board.control("fault hang")
        workdirs = board.root / "fs" / "data" / "local" / "tmp" / "hil"
        stop = threading.Event()
        removed: list[Path] = []

        def lose_pid_files() -> None:  # the host's kill reads runner.pid: take it away
            while not stop.wait(0.01):
                for pid_file in workdirs.glob("*/c*/runner.pid"):
                    pid_file.unlink(missing_ok=True)
                    removed.append(pid_file)

        remover = threading.Thread(target=lose_pid_files, daemon=True)
        remover.start()
        try:
            inventory = write_inventory(tmp_path / "inventory.yaml", [board_entry("a", board)])
            _run, doc = run_in_process(inventory, tmp_path / "out", timeout_s=2.0, idle_timeout_s=3.0, retries=0)
        finally:
            stop.set()
            remover.join()
    assert removed
    verdicts = sorted((c["verdict"], c["message"]) for c in doc["cases"])
    assert verdicts[0] == ("FAIL_RUN", "TIMEOUT: runner killed on the device at its deadline")
    assert [v for v, _ in verdicts[1:]] == ["PASS", "PASS"]  # the board stayed usable
    assert "recovery" not in doc["run"]["boards"][0]
    hung = next(c for c in doc["cases"] if c["verdict"] == "FAIL_RUN")
    assert hung["timings_s"]["exec"] >= 2.0 + 3.0 / 2  # ended by the backstop, not the host's kill at 2 s
