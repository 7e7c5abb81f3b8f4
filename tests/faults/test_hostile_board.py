"""A hostile board (hil/virtual/hostile.py) against whole `hil` runs under GITHUB_ACTIONS:
a `::warning` line in its answers forges no workflow command; a 1 GiB output and an endless
console line cost their case (ERROR_INFRA, a clear message), not hil's memory: the flooding
run's peak RSS is measured against the same run on a sane board."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from hil.board.limits import CONSOLE_LINE_MAX, SHELL_OUTPUT_MAX
from hil.virtual.launcher import start_virtual_board
from tests.faults import TINY, board_entry, write_inventory

REPO = Path(__file__).resolve().parents[2]
RSS_SLACK_MIB = 64
"""What a flooded run's peak RSS may exceed the sane run's by (the output cap is 16 MiB; the
1 GiB the board offers, buffered, would be 1024 MiB and more)."""
MEASURE = ("import resource, sys; from hil.cli import main; code = main(sys.argv[1:]); "
           "sys.stderr.write(f'hil-peak-rss-kib {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n'); "
           "sys.exit(code)")
"""`hil ARGS` with the peak RSS of hil's own process written last on stderr."""


def _commands(output: str) -> list[str]:
    """The lines GitHub's runner would take as workflow commands: split at CR and LF, blanks
    trimmed, starting with `::` (actions/runner ActionCommand.TryParseV2)."""
    return [line for line in re.split(r"\r\n|\r|\n", output) if line.lstrip().startswith("::")]


def _hil(args: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    env = {**os.environ, "GITHUB_ACTIONS": "true", "CI": "true"}
    env.pop("GITHUB_STEP_SUMMARY", None)
    done = subprocess.run([sys.executable, "-c", MEASURE, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=900, env=env)
    peak = int(done.stderr.rsplit("hil-peak-rss-kib ", 1)[1].split()[0])
    return done, peak


def _run_one(board_address: str, tmp_path: Path, name: str, inventory: Path | None = None) -> tuple[Any, int, str]:
    out = tmp_path / name
    where = ["--inventory", str(inventory)] if inventory else ["--board", board_address]
    done, peak = _hil(["run", *where, "--suite", str(TINY), "--flow", "portable", "--filter", "mlp_a",
                       "--retries", "0", "--out", str(out)], tmp_path)
    (case,) = json.loads((out / "results.json").read_text())["cases"]
    return case, peak, done.stdout + done.stderr


def test_a_forged_command_line_never_reaches_the_job_log(tmp_path: Path) -> None:
    with start_virtual_board(tmp_path / "board", "E9955", "forger", ["--fault", "forge-command"]) as board:
        boards, _ = _hil(["boards", "--board", board.address, "--check"], tmp_path)
        case, _, run_output = _run_one(board.address, tmp_path, "run")
    output = boards.stdout + boards.stderr + run_output
    assert "::warning title=forged::a board wrote this line" in output  # the board's text is shown
    forged = [line for line in _commands(output) if "forged" in line and not line.startswith("::error ")]
    assert forged == []  # ...but never as a command of its own (an annotation may quote it)
    assert case["verdict"] == "ERROR_INFRA"


def test_a_flooding_runner_is_error_infra_and_hils_memory_stays_bounded(tmp_path: Path) -> None:
    with start_virtual_board(tmp_path / "sane", "E9955", "sane") as sane:
        _run_one(sane.address, tmp_path, "warm")  # the case lowered: both runs below take it from the cache
        control, control_peak, _ = _run_one(sane.address, tmp_path, "control")
    assert control["verdict"] == "PASS", control
    with start_virtual_board(tmp_path / "flood", "E9955", "flooder", ["--fault", "flood,bytes=1G,times=0"]) as board:
        case, peak, output = _run_one(board.address, tmp_path, "flood")
        board_log = board.log_path.read_text()
    assert case["verdict"] == "ERROR_INFRA", case
    assert f"more than {SHELL_OUTPUT_MAX // (1 << 20)} MiB of output for one command" in case["message"]
    sent = [int(n) for n in re.findall(r"flood of (\d+) bytes", board_log)]
    assert sent and max(sent) < (1 << 30) // 4, sent  # the board was cut off, far from its 1 GiB
    grown_mib = (peak - control_peak) / 1024
    print(f"peak RSS: sane run {control_peak / 1024:.0f} MiB, flooded run {peak / 1024:.0f} MiB "
          f"(+{grown_mib:.0f} MiB); the board wrote {max(sent) / (1 << 20):.0f} MiB of its 1024 MiB")
    assert grown_mib < RSS_SLACK_MIB, output[-2000:]


def test_an_endless_console_line_is_error_infra_and_bounded(tmp_path: Path) -> None:
    with start_virtual_board(tmp_path / "board", "E9955", "chatty",
                             ["--fault", "endless-line,bytes=1G,times=0"]) as board:
        assert board.console is not None
        inventory = write_inventory(tmp_path / "inventory.yaml",
                                    [board_entry("chatty", board, console=Path(board.console))])
        case, _, _ = _run_one(board.address, tmp_path, "run", inventory)
    assert case["verdict"] == "ERROR_INFRA", case
    assert f"a line of more than {CONSOLE_LINE_MAX // 1024} KiB without a newline: cut" in case["message"]
    uart = case["logs"]["uart"]
    assert max(len(line) for line in uart.splitlines()) <= CONSOLE_LINE_MAX + 100  # what hil kept of it
