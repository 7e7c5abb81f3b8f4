"""The soak's virtual boards: started (`--link`, a console pty, a power switch on their
control FIFO), written as an inventory, controlled, read back (the faults they fired, the
adb transports and processes they still hold), stopped."""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board
from hil.virtual.sandboxes import is_namespace_init

from .procs import descendants, live_lifeline, tcp_connections

log = logging.getLogger(__name__)

POWER_SCRIPT = ("import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK); "
                "os.write(fd, sys.argv[2].encode() + b'\\n')")
"""The inventory's power `cycle` command: one line to the board's control FIFO."""
BOARD_FIRES = re.compile(r"^(\S+ \S+) WARNING \S+: fault (\S+) fires on (\S+)")
WARM_S = 600
"""How long the boards' executors may take to warm up."""


class Fired(NamedTuple):
    """An event fault a board logged as fired."""

    at: float
    """Epoch seconds."""
    board: str
    kind: str
    event: str


def _board_time(stamp: str) -> float:
    """Epoch seconds of a log timestamp `2026-11-30 19:19:20,915` (local time)."""
    return dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


class Boards:
    """The virtual boards of the soak: started, reachable, controllable, stopped."""

    def __init__(self, work: Path, count: int, link: str, chipset: str) -> None:
        self.work = work
        self.names = [f"soak-{i}" for i in range(count)]
        self.processes: dict[str, VirtualBoardProcess] = {}
        self._lock = threading.Lock()
        self.link = link
        self.chipset = chipset

    def start(self) -> None:
        for name in self.names:
            self.processes[name] = start_virtual_board(
                self.work / name, self.chipset, name,
                ["--link", self.link, "--console", str(self.work / f"{name}.tty"),
                 "--reboot-seconds", "0.5"])
        deadline = time.monotonic() + WARM_S
        for board in self.processes.values():
            while "virtual executor warm in" not in board.log_path.read_text(errors="replace"):
                if time.monotonic() > deadline:
                    raise SystemExit(f"soak: {board.address}: executor not warm in {WARM_S} s")
                time.sleep(0.2)
        log.info("%d boards up: %s", len(self.names), ", ".join(b.address for b in self.processes.values()))

    def inventory(self) -> Path:
        path = self.work / "inventory.yaml"
        entries = [
            {"name": name, "adb": board.address, "chipset": self.chipset,
             "console": str(self.work / f"{name}.tty"),
             "power": {"cycle": [sys.executable, "-c", POWER_SCRIPT,
                                 str(board.root / "run" / "control"), "power cycle"]}}
            for name, board in self.processes.items()
        ]
        path.write_text(json.dumps({"boards": entries}, indent=1))
        return path

    def control(self, name: str, line: str) -> None:
        with self._lock:
            try:
                self.processes[name].control(line)
            except Exception as exc:  # noqa: BLE001 - the board may be mid-reboot: note it
                log.info("%s: control %r failed: %s", name, line, exc)

    def fired(self) -> list[Fired]:
        """Every event fault the boards logged as fired, in time order."""
        found = []
        for name, board in self.processes.items():
            for line in board.log_path.read_text(errors="replace").splitlines():
                match = BOARD_FIRES.match(line)
                if match:
                    found.append(Fired(_board_time(match.group(1)), name, match.group(2), match.group(3)))
        return sorted(found)

    def transports_open(self) -> int:
        """TCP connections an adb server still holds to the boards."""
        ports = {int(b.address.rsplit(":", 1)[1]) for b in self.processes.values()}
        return sum(1 for local, _remote, _inode in tcp_connections() if local in ports)

    def processes_inside(self) -> dict[int, str]:
        """Processes running below the board processes (shells, runners); not a board's own
        lifeline watcher (hil/lifeline.py) nor its pid namespace's init
        (hil/virtual/sandboxes.py), which live as long as their board."""
        found: dict[int, str] = {}
        for board in self.processes.values():
            found.update((pid, cmd) for pid, cmd in descendants(board.pid).items()
                         if not live_lifeline(cmd) and not is_namespace_init(cmd))
        return found

    def pids(self) -> set[int]:
        """The board processes themselves."""
        return {board.pid for board in self.processes.values()}

    def stop(self) -> None:
        """Stop every board at once: a board takes seconds to stop (its threads clean up),
        and one after the other three boards took 20 s of a CI soak."""
        with ThreadPoolExecutor(max(1, len(self.processes))) as pool:
            list(pool.map(VirtualBoardProcess.stop, self.processes.values()))
