"""A board's serial console (UART), read in the background with pyserial.

`SerialConsole(url)` opens anything `serial.serial_for_url` knows: a device path
(`/dev/ttyUSB0`, a pty), `socket://host:port` (ser2net, a console server) or
`rfc2217://host:port`. A thread reads it for the whole run, appends every line to the
run's console log and keeps the recent lines in memory, numbered, so a case can ask for
exactly the lines written while it ran (`mark()` then `excerpt(mark)`), and whether one of
them shows the board crashing (`crash_line(mark)`): a kernel panic, an oops, a watchdog
bite, an SError, an NPU/ENN fault. A lost port (unplugged adapter, closed socket) is
reopened every second until `close()`.

A local port (pyserial's posix `Serial`: a tty, a pty) is read from its file descriptor, as
pyserial's own `read` does (`serial/serialposix.py`: `select`, then `os.read` of the fd it
opened non-blocking): the reader sleeps until bytes arrive, and a case's look at the console
reads what the port holds in the case's own thread, under the lock the reader reads under,
so nothing written before it is left uncounted and no thread has to be woken for it. Other
transports are read with pyserial's `read`, and a look waits for the reader.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import re
import select
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Protocol

import serial
import serial.serialposix

from hil.board.limits import CONSOLE_LINE_MAX
from hil.errors import InfraError

log = logging.getLogger(__name__)

CRASH_PATTERNS: tuple[str, ...] = (
    r"Kernel panic",
    r"Unable to handle kernel",
    r"Internal error: Oops",
    r"watchdog.{0,40}\b(bite|bark|expired|reset)\b",
    r"\bSError\b",
    r"\b(npu|enn)\b.{0,60}\b(fault|panic|hang|timed? ?out|abort)",
)
"""Console lines that mean the board (not the model) failed; matched case-insensitively."""

CUT_MARK = b" [... cut: the line went on]"
OVERLONG_LINE = (f"a line of more than {CONSOLE_LINE_MAX // 1024} KiB without a newline: cut "
                 "(the board's UART floods; hil keeps at most that of a line)")
"""What a case ending in ERROR_INFRA is told of such a line (`crash_line`)."""

KEEP_LINES = 2000
"""Console lines kept in memory for excerpts (older ones are only in the log file): ten
times EXCERPT_LINES. Crash lines are found as they arrive, whatever was kept."""
KEEP_CRASHES = 1000
"""Crash lines kept in memory (with their line numbers) for `crash_line`."""
EXCERPT_LINES = 200
"""Lines attached to a result at most."""
REOPEN_S = 1.0
"""Seconds between attempts to reopen a lost port."""
_READ_TIMEOUT_S = 0.02
"""The read timeout of a port read through pyserial (`socket://`, `rfc2217://`)."""
_LOOK_BYTES = 1 << 20
"""The most one look at a local port reads (a board flooding its console must not hold a
case there): far more than a tty or pty buffers."""


class Console(Protocol):
    """What a run needs of a board's console (a pty and a `socket://` port are two of it)."""

    @property
    def ok(self) -> bool:
        """The port is open and being read."""
        ...

    def mark(self) -> int:
        """A position: the number of lines seen so far (after draining what is waiting)."""
        ...

    def excerpt(self, since: int, limit: int = EXCERPT_LINES) -> str:
        """The lines seen after `mark` `since`, at most the last `limit`."""
        ...

    def crash_line(self, since: int) -> str | None:
        """The first line after `since` that shows the board crashing, if any."""
        ...

    def close(self) -> None:
        """Stop reading and close the port."""
        ...


def _local_fd(port: serial.SerialBase) -> int | None:
    """The file descriptor of a local port (pyserial's posix `Serial`, opened non-blocking),
    which the console reads itself; None for a URL transport, or a port closed meanwhile."""
    if isinstance(port, serial.serialposix.Serial):
        fd = port.fd
        return fd if isinstance(fd, int) and fd >= 0 else None
    return None


class ConsoleCrash(InfraError):
    """The board's console showed a crash while a case ran (verdict ERROR_INFRA)."""

    def __init__(self, board: str, line: str) -> None:
        super().__init__(f"{board}: console: {line}")
        self.line = line


class SerialConsole:
    """Background reader of one serial console; see the module docstring."""

    def __init__(
        self,
        url: str,
        log_path: Path | None = None,
        baudrate: int = 115200,
        patterns: Sequence[str] = CRASH_PATTERNS,
    ) -> None:
        self.url = url
        self.baudrate = baudrate
        self.log_path = log_path
        self._crash = re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)
        self._lines: collections.deque[str] = collections.deque(maxlen=KEEP_LINES)
        self._crashes: collections.deque[tuple[int, str]] = collections.deque(maxlen=KEEP_CRASHES)
        """(line number, line) of each crash line seen, matched once, by the reader."""
        self._count = 0
        self._partial = b""
        self._cutting = False
        """Dropping the rest of a line cut at CONSOLE_LINE_MAX, up to its newline."""
        self._cycles = 0
        self._cond = threading.Condition()
        self._read_lock = threading.Lock()
        """Held from a local port's read until its lines are taken."""
        self._wake_r = self._wake_w = -1
        """A pipe (from `open()`) through which `close()` wakes the reader's `select`."""
        self._stop = threading.Event()
        self._port: serial.SerialBase | None = None
        self._log: IO[str] | None = None
        self._thread: threading.Thread | None = None

    def open(self) -> SerialConsole:
        """Open the port (InfraError naming the URL when it cannot be) and start reading."""
        self._port = self._connect()
        self._wake_r, self._wake_w = os.pipe()
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = self.log_path.open("a", encoding="utf-8", errors="replace")
        self._thread = threading.Thread(target=self._read_loop, name=f"console {self.url}",
                                         daemon=True)
        self._thread.start()
        return self

    def _connect(self, reopen: bool = False) -> serial.SerialBase:
        """Open the port. At the first open what waited in its buffer predates this run and
        is dropped; at a reopen it is what the board wrote since (possibly a crash line) and
        is kept. (pyserial's `socket://` open itself discards what arrives before it
        returns: a console server's replay at a reconnect is lost there.)"""
        try:
            port = serial.serial_for_url(self.url, baudrate=self.baudrate,
                                         timeout=_READ_TIMEOUT_S)
            if not reopen:
                port.reset_input_buffer()
        except (serial.SerialException, OSError, ValueError) as exc:
            raise InfraError(f"console {self.url}: cannot open: {exc}") from exc
        return port

    @property
    def ok(self) -> bool:
        return self._port is not None and self._thread is not None and self._thread.is_alive()

    def _read_loop(self) -> None:
        while not self._stop.is_set():
            port = self._port
            if port is None:
                if self._stop.wait(REOPEN_S):
                    break
                try:
                    self._port = self._connect(reopen=True)
                    log.info("console %s: reopened", self.url)
                except InfraError as exc:
                    log.debug("%s", exc)
                self._cycle()
                continue
            try:
                fd = _local_fd(port)
                if fd is None:
                    data = port.read(4096)
                    if data:
                        self._take(data)
                else:
                    readable, _, _ = select.select([fd, self._wake_r], [], [])
                    if fd in readable:
                        self._read_local()
            except (serial.SerialException, OSError, TypeError, AttributeError, ValueError) as exc:
                # TypeError/AttributeError: pyserial's socket:// read after a close;
                # ValueError: a select on a port closed meanwhile
                if self._stop.is_set():
                    break
                log.warning("console %s: lost (%s); reopening every %.0f s", self.url, exc, REOPEN_S)
                self._close_port()
            self._cycle()

    def _read_local(self) -> None:
        """Take every byte the local port holds now (SerialException when it reports its
        end or an error: the port is gone). Read and taken under the read lock, which a
        close takes too: when a caller returns, nothing it could have read is left read but
        not counted, and no caller reads a descriptor closed (and perhaps reused) meanwhile."""
        with self._read_lock:
            fd = _local_fd(self._port) if self._port is not None else None
            if fd is None:
                return
            total = 0
            while total < _LOOK_BYTES:
                try:  # pyserial's termios (VMIN 0) make an empty port read as b"": ask first
                    if not select.select([fd], [], [], 0)[0]:
                        return
                    data = os.read(fd, 4096)
                except BlockingIOError:
                    return
                except OSError as exc:
                    raise serial.SerialException(f"read failed: {exc}") from exc
                if not data:  # as pyserial: a disconnected device reads as ready but empty
                    raise serial.SerialException("device reports readiness to read but returned no data")
                self._take(data)
                total += len(data)

    def _cycle(self) -> None:
        with self._cond:
            self._cycles += 1
            self._cond.notify_all()

    def _take(self, data: bytes) -> None:
        *complete, partial = (self._partial + data).split(b"\n")
        if self._cutting and complete:  # the rest of a line cut at CONSOLE_LINE_MAX: dropped
            complete.pop(0)
            self._cutting = False
        cut = not self._cutting and len(partial) > CONSOLE_LINE_MAX
        if cut:  # a line without its end in sight: what hil keeps of it is bounded
            complete.append(partial[:CONSOLE_LINE_MAX] + CUT_MARK)
            self._cutting = True
        self._partial = b"" if self._cutting else partial
        lines = [raw.rstrip(b"\r").decode("utf-8", "replace") for raw in complete]
        crashes = [(index, line) for index, line in enumerate(lines) if self._crash.search(line)]
        if cut:
            crashes.append((len(lines) - 1, OVERLONG_LINE))
        with self._cond:
            self._crashes.extend((self._count + index, line) for index, line in crashes)
            self._lines.extend(lines)
            self._count += len(lines)
        if self._log is not None and lines:
            self._log.write("".join(f"{line}\n" for line in lines))
            self._log.flush()

    def _drain(self, timeout: float = 1.0) -> None:
        """Make sure whatever the board wrote before now is counted. A local port: read
        what it holds, here (`_read_local`; a port found gone is left to the reader). Other
        transports: wait until the reader has finished a full read started after this call
        (at most `timeout`)."""
        port = self._port
        if port is not None and _local_fd(port) is not None:
            try:
                self._read_local()
            except (serial.SerialException, OSError):
                pass  # the reader finds the port lost and reopens it
            return
        with self._cond:
            target = self._cycles + 2
            self._cond.wait_for(lambda: self._cycles >= target or not self.ok, timeout)

    def mark(self) -> int:
        if self.ok:
            self._drain()
        with self._cond:
            return self._count

    def _since(self, since: int, limit: int) -> list[str]:
        """The last `limit` of the lines kept after mark `since` (from the deque's end: a
        copy of all KEEP_LINES per case cost more than the case on a long run)."""
        with self._cond:
            new = min(self._count - since, len(self._lines), limit)
            return list(itertools.islice(reversed(self._lines), max(new, 0)))[::-1]

    def excerpt(self, since: int, limit: int = EXCERPT_LINES) -> str:
        if self.ok:
            self._drain()
        lines = self._since(since, limit)
        partial = self._partial.decode("utf-8", "replace").rstrip("\r")
        if partial:
            lines.append(partial)
        return "\n".join(lines[-limit:])

    def crash_line(self, since: int) -> str | None:
        if self.ok:
            self._drain()
        with self._cond:
            for index, line in self._crashes:
                if index >= since:
                    return line.strip()[:300]
        return None

    def _close_port(self) -> None:
        with self._read_lock:
            port, self._port = self._port, None
        if port is not None:
            try:
                port.close()
            except (serial.SerialException, OSError) as exc:
                log.debug("console %s: close: %s", self.url, exc)

    def close(self) -> None:
        self._stop.set()
        if self._wake_w >= 0:
            os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._close_port()
        with self._read_lock:  # a case's look may be taking lines into the log
            if self._log is not None:
                self._log.close()
                self._log = None
        if self._wake_w >= 0:
            os.close(self._wake_r)
            os.close(self._wake_w)
            self._wake_r = self._wake_w = -1

    def __enter__(self) -> SerialConsole:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def probe_console(url: str, baudrate: int = 115200, listen_s: float = 0.3) -> str:
    """Open a console briefly for a preflight: "ok" or "ok (N lines)", else InfraError."""
    with SerialConsole(url, baudrate=baudrate) as console:
        time.sleep(listen_s)
        lines = console.mark()
        if not console.ok:
            raise InfraError(f"console {url}: lost while probing")
    return f"ok ({lines} lines)" if lines else "ok"
