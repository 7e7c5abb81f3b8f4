"""The virtual board's UART: a pseudo-terminal the host reads like `/dev/ttyUSB0`.

The board keeps the pty's master and its own copy of the slave open (so the slave exists
whether or not a reader has it open); hil's console reader opens the slave by path with
pyserial. `--console PATH` makes PATH a symlink to the slave (`/dev/pts/N`), so an
inventory can name a stable path. Lines look like a kernel log: `[    1.234567] text`.
Nobody reading is like an unplugged UART: once the pty's buffer is full, lines are dropped.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import threading
import time
import tty
from pathlib import Path

log = logging.getLogger(__name__)

FIRST_BYTES = 128 * 1024
"""How much of an endless line is written before the runner goes on: twice what hil keeps of a
line (`hil/board/limits.py`), so the cut happens during the case that started it."""
ENDLESS_WAIT_S = 10.0
"""The longest an endless line's first bytes wait for a reader."""


class VirtualConsole:
    """A pty UART: `write_line(text)`, `path` (the slave), `close()`."""

    def __init__(self, link: Path | None = None) -> None:
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)
        os.set_blocking(self._master, False)
        self.path = os.ttyname(self._slave)
        self.link = link
        self._lock = threading.Lock()
        self._boot = time.monotonic()
        self.enabled = True
        """False while the board is powered off: nothing is written."""
        self._endless: threading.Event | None = None
        """Set to end the hostile line in progress (`endless_line`)."""
        if link is not None:
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(self.path)

    def restart_clock(self) -> None:
        """A new boot: timestamps start again from zero."""
        self._boot = time.monotonic()

    def write_line(self, text: str) -> None:
        """One kernel-log-style line; dropped when nobody drains the pty, or while an endless
        line is being written (a UART has one line at a time)."""
        if not self.enabled or self._endless is not None:
            return
        stamp = time.monotonic() - self._boot
        data = f"[{stamp:12.6f}] {text}\r\n".encode(errors="replace")
        with self._lock:
            try:
                os.write(self._master, data)
            except BlockingIOError:  # the pty is full: a UART's unread bytes are lost too
                log.info("console: line dropped, nobody reads the pty: %s", text[:120])
            except OSError as exc:
                if exc.errno not in (errno.EIO, errno.EAGAIN):
                    log.warning("console write failed: %s", exc)

    def boot_banner(self, chipset: str, serial: str) -> None:
        """What a board prints on its UART while booting."""
        self.restart_clock()
        for line in (
            "Booting Linux on physical CPU 0x0000000000 [0x410fd801]",
            "Linux version 6.6.30-android15-8-hil-virtual (hil@virtual) #1 SMP PREEMPT",
            f"Machine model: Samsung Exynos {chipset} (hil VIRTUAL board, no NPU), serial {serial}",
            "init: starting service 'adbd'...",
        ):
            self.write_line(line)

    def endless_line(self, total: int) -> None:
        """A hostile UART (fault `endless-line`, `hostile.py`): one line of `total` bytes with
        no newline. Its first FIRST_BYTES are written before this returns (a reader draining
        the pty takes them; at most ENDLESS_WAIT_S is waited for it), the rest by a thread,
        until `stop_endless_line` or `close`; then the line ends."""
        self.stop_endless_line()
        stop = self._endless = threading.Event()
        stamp = time.monotonic() - self._boot
        head = f"[{stamp:12.6f}] ".encode()
        first = head + b"E" * max(0, min(total, FIRST_BYTES) - len(head))
        self._write_all(first, stop, time.monotonic() + ENDLESS_WAIT_S)
        threading.Thread(target=self._endless_rest, args=(total - len(first), stop),
                         name="hil-console-endless", daemon=True).start()

    def stop_endless_line(self) -> None:
        """End the endless line in progress, if any."""
        if self._endless is not None:
            self._endless.set()

    def _endless_rest(self, left: int, stop: threading.Event) -> None:
        chunk = b"E" * 4096
        while left > 0 and not stop.is_set():
            piece = chunk[:left]
            self._write_all(piece, stop, None)
            left -= len(piece)
        self._write_all(b"\r\n", threading.Event(), time.monotonic() + 1.0)
        if self._endless is stop:
            self._endless = None

    def _write_all(self, data: bytes, stop: threading.Event, deadline: float | None) -> None:
        """Write `data` to the pty, waiting while it is full, until `stop`, the deadline or
        the pty's end."""
        view = memoryview(data)
        while view and not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            try:
                view = view[os.write(self._master, view[:4096]):]
            except BlockingIOError:
                select.select([], [self._master], [], 0.2)
            except OSError:
                return  # closed

    def close(self) -> None:
        """Close the pty and remove the symlink."""
        self.stop_endless_line()
        for fd in (self._master, self._slave):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.link is not None and self.link.is_symlink():
            self.link.unlink()
