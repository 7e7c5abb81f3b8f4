"""A labgrid lab on loopback for the tests: a real `labgrid-coordinator` and a real
`labgrid-exporter` (labgrid 26.0.1, as a lab runs them), virtual boards exported as a lab
exports real ones, every process started here and stopped by its PID.

Each board is one exporter group, one place (tagged `soc=e9955`):

```
board-a:
  NetworkADBDevice: {host: 127.0.0.1, port: PORT}      # adb connect 127.0.0.1:PORT
  RawSerialPort: {port: /dev/pts/N, speed: 115200}     # the UART's pty: ser2net on acquire
  NetworkPowerPort: {model: simplerest, host: "http://127.0.0.1:P/power/{value}", index: 0}
```

ser2net is Debian's, started by the exporter itself when a place is acquired (its
`SerialPortExport`); the only change is a `ser2net` shim first on the exporter's PATH that
binds its accepter to 127.0.0.1 (the exporter asks for every address).

`start_coordinator` and `start_exporter` start a coordinator and an exporter of any
configuration (other labs of the tests: tests/pool/test_labgrid_shapes.py, test_labgrid_ssh.py).
An exporter publishes a class labgrid 26.0.1 has no export for (every ADB class: they exist only
in labgrid's open pull requests) as it is written, params and all, as a plain resource entry
(remote/exporter.py `add_resource`: `exports.get(cls, ResourceEntry)`): so the tests publish an
ADB resource in the shape that pull request's exporter publishes it.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from hil.pool.labgrid import Coordinator
from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board
from hil.virtual.power_http import READY_PREFIX
from tests.processes import stop_process

BIN = Path(sys.executable).parent
SER2NET_SHIM = """#!/bin/sh
# labgrid's exporter starts `ser2net ... accepter: telnet(rfc2217,mode=server),tcp,PORT`:
# every address. The tests stay on loopback: the same accepter on 127.0.0.1 only.
real=/usr/sbin/ser2net
[ -x "$real" ] || real=/usr/bin/ser2net
for a in "$@"; do
  case "$a" in
    *",tcp,"[0-9]*) set -- "$@" "$(printf %s "$a" | sed 's/,tcp,\\([0-9]\\)/,tcp,127.0.0.1,\\1/')";;
    *) set -- "$@" "$a";;
  esac
  shift
done
exec "$real" "$@"
"""


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Processes:
    """Processes a lab started (each in a session of its own), stopped by PID."""

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen[bytes]] = []

    def spawn(self, argv: list[str], log: Path, cwd: Path | None = None,
              env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                       cwd=cwd, env=env, start_new_session=True)
        self.processes.append(process)
        return process

    def stop(self) -> None:
        """SIGTERM to every process at once, then each is waited for (SIGKILL past 10 s)."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in reversed(self.processes):
            stop_process(process)


def start_coordinator(processes: Processes, root: Path,
                      places: dict[str, tuple[str, str, dict[str, str]]]) -> str:
    """A coordinator on a free loopback port with `places` (name -> exporter, group, tags), each
    matching every resource of that exporter's group; its address."""
    folder = root / "coordinator"
    folder.mkdir()
    (folder / "places.yaml").write_text(yaml.safe_dump({
        place: {"matches": [{"exporter": exporter, "group": group, "cls": "*"}], "tags": dict(tags)}
        for place, (exporter, group, tags) in places.items()}))
    port = free_port()
    address = f"127.0.0.1:{port}"
    log = root / "coordinator.log"
    coordinator = processes.spawn([str(BIN / "labgrid-coordinator"), "--listen", address], log, cwd=folder)
    _wait_port(port, coordinator, log)
    return address


def start_exporter(processes: Processes, root: Path, coordinator: str, name: str,
                   groups: dict[str, dict[str, Any]], isolated: bool = False,
                   prefix: Sequence[str] = (), env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`labgrid-exporter -c COORDINATOR --hostname 127.0.0.1 -n NAME CONFIG` (`--isolated`;
    run under `prefix`, e.g. nsenter), with the ser2net shim first on its PATH; returns once the
    coordinator lists every resource of `groups`."""
    shim_dir = root / "shim"
    shim_dir.mkdir(exist_ok=True)
    shim = shim_dir / "ser2net"
    shim.write_text(SER2NET_SHIM)
    shim.chmod(0o755)
    path = root / f"exporter-{name}.yaml"
    path.write_text(yaml.safe_dump(groups, sort_keys=False))
    base = dict(os.environ if env is None else env)
    base["PATH"] = f"{shim_dir}:{BIN}:{base.get('PATH', '')}"
    log = root / f"exporter-{name}.log"
    argv = [*prefix, str(BIN / "labgrid-exporter"), "-c", coordinator, "--hostname", "127.0.0.1",
            "-n", name, *(["--isolated"] if isolated else []), str(path)]
    exporter = processes.spawn(argv, log, env=base)
    wanted = sum(len(resources) for resources in groups.values())
    deadline = time.monotonic() + 30
    while published(coordinator, name) < wanted:
        assert exporter.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.2)
    return exporter


def published(coordinator: str, exporter: str | None = None, cls: str | None = None) -> int:
    """How many resources the coordinator lists (of `exporter`, of class `cls`)."""
    session = Coordinator(coordinator, "lab", "setup")
    try:
        _, resources = session.snapshot()
    finally:
        session.close()
    return sum(1 for name, groups in resources.items() if exporter in (None, name)
               for group in groups.values() for data in group.values() if cls in (None, data.get("cls")))


def power_endpoint(processes: Processes, board: VirtualBoardProcess) -> str:
    """The board's power switch as a simplerest URL (`hil.virtual.power_http`), started here."""
    process = subprocess.Popen([sys.executable, "-m", "hil.virtual.power_http", "--root", str(board.root)],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True)
    processes.processes.append(process)
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        assert selector.select(timeout=30), "power endpoint did not start"
    line = process.stdout.readline().decode()
    process.stdout.close()
    assert line.startswith(READY_PREFIX), line
    return line[len(READY_PREFIX):].strip()


def _wait_port(port: int, process: subprocess.Popen[bytes], log: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.closing(socket.socket()) as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"not listening on {port}: {log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.1)


class LabgridLab:
    """Coordinator, exporter `lab1` and `count` virtual boards, one place each."""

    def __init__(self, root: Path, count: int = 2, tags: dict[str, str] | None = None) -> None:
        self.root = root
        self.lab = Processes()
        self.processes = self.lab.processes
        self.boards: list[VirtualBoardProcess] = []
        self.power_urls: list[str] = []
        self.places = [f"e9955-{chr(ord('a') + i)}" for i in range(count)]
        try:
            self._start(count, tags or {"soc": "e9955"})
        except BaseException:
            self.stop()
            raise

    def _start(self, count: int, tags: dict[str, str]) -> None:
        for index in range(count):
            letter = chr(ord("a") + index)
            board = start_virtual_board(self.root / f"board-{letter}", "E9955", f"lab-{letter}",
                                        ["--console", str(self.root / f"{letter}.tty"),
                                         "--reboot-seconds", "0.3"])
            self.boards.append(board)
            self.power_urls.append(self._power_endpoint(board))
        self.address = start_coordinator(self.lab, self.root, {
            place: ("lab1", f"board-{chr(ord('a') + i)}", tags) for i, place in enumerate(self.places)})
        self.coordinator = self.processes[-1]
        self.exporter = self.start_exporter()

    def _power_endpoint(self, board: VirtualBoardProcess) -> str:
        return power_endpoint(self.lab, board)

    def start_exporter(self) -> subprocess.Popen[bytes]:
        config = {}
        for index, board in enumerate(self.boards):
            assert board.console and board.console.startswith("/dev/"), board.console
            host, port = board.address.split(":")
            config[f"board-{chr(ord('a') + index)}"] = {
                "NetworkADBDevice": {"host": host, "port": int(port)},
                "RawSerialPort": {"port": board.console, "speed": 115200},
                "NetworkPowerPort": {"model": "simplerest", "host": self.power_urls[index], "index": 0},
            }
        return start_exporter(self.lab, self.root, self.address, "lab1", config)

    def published(self) -> int:
        """How many boards' power ports the coordinator knows (the last resource of each)."""
        return published(self.address, cls="NetworkPowerPort")

    def client(self, *args: str, env: dict[str, str] | None = None) -> str:
        """`labgrid-client -x COORDINATOR ARGS` (the lab's own CLI); its output."""
        done = subprocess.run([str(BIN / "labgrid-client"), "-x", self.address, *args], capture_output=True,
                              text=True, timeout=60, env=env, check=False)
        return done.stdout + done.stderr

    def stop(self) -> None:
        """SIGTERM to every process at once, then each is waited for (SIGKILL past 10 s)."""
        for board in self.boards:
            if board.process.poll() is None:
                board.process.send_signal(signal.SIGTERM)
        self.lab.stop()
        for board in self.boards:
            board.stop()


def ser2net_available() -> bool:
    return bool(shutil.which("ser2net") or Path("/usr/sbin/ser2net").exists())
