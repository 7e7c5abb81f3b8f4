"""Start a virtual board as a child process and wait for its ready line.

The board runs `python -m hil.virtual.main` in its own process group; its stderr (the
board's log) goes to `ROOT/run/board.log`. It dies with the process that started it, even
when that one is killed with SIGKILL (`hil.lifeline`).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import selectors
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from hil import lifeline
from hil.errors import InfraError
from hil.virtual.main import READY_PREFIX, WARM_LINE

log = logging.getLogger(__name__)

READY_TIMEOUT = 60.0
WARM_TIMEOUT = 180.0
"""Longest wait for a board's executor to import ExecuTorch (a few seconds; minutes under
heavy load); past it the board is used anyway and its first case waits."""
_READY = re.compile(re.escape(READY_PREFIX) + r"(127\.0\.0\.1:\d+) ")
_CONSOLE = re.compile(r" console=(\S+)")
_FASTBOOT = re.compile(r" fastboot=(\S+)")


class VirtualBoardProcess:
    """A running virtual board: `address` ("127.0.0.1:PORT"), `pid`, `root`, `console`
    (its UART's pty), `fastboot` (its bootloader's endpoint, `tcp:127.0.0.1:PORT`),
    `control(line)`, `stop()`."""

    def __init__(
        self, process: subprocess.Popen[bytes], address: str, root: Path, console: str | None = None,
        fastboot: str | None = None,
    ) -> None:
        self.process = process
        self.address = address
        self.root = root
        self.console = console
        self.fastboot = fastboot

    def control(self, line: str, applied_within: float | None = None) -> None:
        """Send one request to the board's control FIFO (`fault SPEC`, `power cycle`...).
        With `applied_within` S, return only once the board has taken it: its event loop
        reads the FIFO and applies every line it read in that same callback, so whatever is
        asked of the board afterwards sees the request applied. InfraError when the board is
        not running, or has not taken the line within S seconds."""
        try:
            fd = os.open(self.root / "run" / "control", os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise InfraError(f"virtual board {self.address}: control: {exc}") from exc
        try:
            os.write(fd, line.encode() + b"\n")
            if applied_within is not None:
                deadline = time.monotonic() + applied_within
                while _unread(fd):
                    if time.monotonic() > deadline or self.process.poll() is not None:
                        raise InfraError(f"virtual board {self.address}: control {line!r} not taken "
                                         f"within {applied_within} s")
                    time.sleep(0.005)
        finally:
            os.close(fd)

    # The board's power switch (hil.board.power.PowerControl).
    def on(self) -> None:
        """Power on."""
        self.control("power on")

    def off(self) -> None:
        """Power off: the board drops off adb and its UART goes quiet."""
        self.control("power off")

    def cycle(self) -> None:
        """Power off, then on."""
        self.control("power cycle")

    enters_bootloader = True
    """`cycle_to_bootloader` works (a `hil.board.power.BootloaderPower`)."""

    def cycle_to_bootloader(self) -> None:
        """Power off, then on with the bootloader key held: the board comes up in its
        bootloader (fastboot at `fastboot`), however it was before (down, frozen, hung)."""
        self.control("power bootloader")

    @property
    def pid(self) -> int:
        """The board process's PID (also its process group)."""
        return self.process.pid

    @property
    def log_path(self) -> Path:
        """The board's log (its stderr)."""
        return self.root / "run" / "board.log"

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the board, wait, then SIGKILL its process group if it lingers."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log.warning("virtual board %s (pid %d) ignored SIGTERM; killing it",
                            self.address, self.pid)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, signal.SIGKILL)
                self.process.wait()

    def __enter__(self) -> VirtualBoardProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def _unread(fd: int) -> int:
    """Bytes written to a FIFO that its reader has not read yet (FIONREAD)."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def _tail(path: Path, size: int = 2000) -> str:
    try:
        with path.open("rb") as log_file:
            log_file.seek(0, os.SEEK_END)
            log_file.seek(max(0, log_file.tell() - size))
            return log_file.read().decode(errors="replace").strip()
    except OSError as exc:
        return f"(no log: {exc})"


def start_virtual_board(
    root: Path, chipset: str, name: str, extra_args: Sequence[str] = (), wait_warm: bool = False,
    trusted_keys: Sequence[Path] = (),
) -> VirtualBoardProcess:
    """Start a virtual board on a free port with its folder at `root` and `name` as its
    serial; return once it listens (`wait_warm`: and its executor is warm, so that the first
    runner exec does not wait for the import). It accepts hil's own adb key (that of hil's
    private adb servers) and those in `trusted_keys` (`.pub` files: a lab server's key).
    InfraError (with the board's log tail) when it exits or stays silent for READY_TIMEOUT
    seconds."""
    root = root.resolve()
    run_dir = root / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    log_path = run_dir / "board.log"
    argv = [
        sys.executable, "-m", "hil.virtual.main",
        "--port", "0", "--chipset", chipset, "--root", str(root), "--serial", name,
        *[arg for key in trusted_keys for arg in ("--trusted-key", str(key))], *extra_args,
    ]
    with log_path.open("ab") as log_file:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log_file,
            env=lifeline.child_env(),  # the board (and its shells) die with hil, even on SIGKILL
            start_new_session=True,
        )
    assert process.stdout is not None
    deadline = time.monotonic() + READY_TIMEOUT
    output = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while b"\n" not in output:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                board = VirtualBoardProcess(process, "", root)
                board.stop()
                raise InfraError(
                    f"virtual board {name} not ready after {READY_TIMEOUT:.0f} s: "
                    f"{_tail(log_path)}"
                )
            if selector.select(timeout=remaining):
                chunk = os.read(process.stdout.fileno(), 4096)
                if not chunk:
                    process.wait()
                    raise InfraError(
                        f"virtual board {name} exited with status {process.returncode} "
                        f"before it was ready: {_tail(log_path)}"
                    )
                output += chunk
    line = output.decode(errors="replace").splitlines()[0]
    match = _READY.match(line)
    if match is None:
        process.stdout.close()
        VirtualBoardProcess(process, "", root).stop()
        raise InfraError(f"virtual board {name}: unexpected first line {line!r}")
    log.info("virtual board %s: %s", name, line)
    if wait_warm and WARM_LINE not in output.decode(errors="replace"):
        _wait_for_line(process, WARM_LINE, WARM_TIMEOUT, name)
    process.stdout.close()
    console = _CONSOLE.search(line)
    fastboot = _FASTBOOT.search(line)
    return VirtualBoardProcess(process, match.group(1), root, console.group(1) if console else None,
                               fastboot.group(1) if fastboot else None)


def _wait_for_line(process: subprocess.Popen[bytes], wanted: str, timeout: float, name: str) -> None:
    """Read the board's stdout until `wanted` (a whole line), the board exits or `timeout`
    passes (then a warning: the board is usable, only slower at first)."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    output = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while wanted.encode() + b"\n" not in output:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(timeout=remaining):
                log.warning("virtual board %s: no %r line after %.0f s", name, wanted, timeout)
                return
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                return  # exited: the caller's first use reports it
            output += chunk
