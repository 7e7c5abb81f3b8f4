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
import threading
import time
import tty
from pathlib import Path

log = logging.getLogger(__name__)


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
        if link is not None:
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(self.path)

    def restart_clock(self) -> None:
        """A new boot: timestamps start again from zero."""
        self._boot = time.monotonic()

    def write_line(self, text: str) -> None:
        """One kernel-log-style line; dropped when nobody drains the pty."""
        if not self.enabled:
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

    def close(self) -> None:
        """Close the pty and remove the symlink."""
        for fd in (self._master, self._slave):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.link is not None and self.link.is_symlink():
            self.link.unlink()
