"""The console reader (pyserial) over a real pty and over `socket://` to a local TCP server,
and the virtual board's UART read through it."""

from __future__ import annotations

import os
import socket
import threading
import time
import tty
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hil.board.console import KEEP_LINES, SerialConsole, probe_console
from hil.errors import InfraError
from hil.virtual.console import VirtualConsole


def _eventually(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


@pytest.fixture
def pty_pair() -> Iterator[tuple[int, str]]:
    """(master fd, slave path) of a fresh pty in raw mode, as a USB serial adapter."""
    master, slave = os.openpty()
    tty.setraw(slave)
    path = os.ttyname(slave)
    yield master, path
    for fd in (master, slave):
        try:
            os.close(fd)
        except OSError:
            pass


class LineServer:
    """A TCP server on 127.0.0.1 that a test feeds lines to (a ser2net stand-in)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.clients: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.clients.append(client)

    def send(self, data: bytes) -> None:
        _eventually(lambda: bool(self.clients))
        self.clients[-1].sendall(data)

    def drop_clients(self) -> None:
        # the list is swapped before the closes: a reader quick to reconnect lands in the new one
        dropped, self.clients = self.clients, []
        for client in dropped:
            client.close()

    def close(self) -> None:
        self.drop_clients()
        self.listener.close()


@pytest.fixture
def line_server() -> Iterator[LineServer]:
    server = LineServer()
    yield server
    server.close()


def test_pty_lines_are_logged_and_excerpted_per_case(pty_pair, tmp_path: Path) -> None:
    master, path = pty_pair
    log = tmp_path / "console.log"
    with SerialConsole(path, log) as console:
        assert console.ok
        os.write(master, b"boot line 1\r\nboot line 2\r\n")
        _eventually(lambda: console.mark() == 2)
        start = console.mark()
        os.write(master, b"case line A\r\ncase li")
        os.write(master, b"ne B\r\npartial")
        _eventually(lambda: "case line B" in console.excerpt(start))
        assert console.excerpt(start) == "case line A\ncase line B\npartial"
        assert console.crash_line(start) is None
    assert log.read_text().splitlines() == ["boot line 1", "boot line 2", "case line A", "case line B"]


def test_a_look_at_a_local_port_counts_every_line_written_before_it_at_once(pty_pair) -> None:
    """A case's look reads the port itself: a line written just before `mark()` is counted
    by that very call, every time, whatever the reader thread was doing meanwhile."""
    master, path = pty_pair
    with SerialConsole(path) as console:
        count = console.mark()
        for index in range(300):
            os.write(master, b"npu: step %d\r\n" % index)
            assert console.mark() == count + 1, index
            count += 1
        os.write(master, b"[  9.9] Kernel panic - not syncing: Fatal exception\r\n")
        assert console.crash_line(count) == "[  9.9] Kernel panic - not syncing: Fatal exception"


def test_an_idle_local_console_does_not_wake_and_close_ends_its_reader(pty_pair) -> None:
    """The reader of a local port sleeps until bytes arrive (no read timeout wakes it), and
    `close()` wakes it to end."""
    master, path = pty_pair
    console = SerialConsole(path).open()
    try:
        os.write(master, b"one line\r\n")
        _eventually(lambda: console.mark() == 1)
        time.sleep(0.6)  # at most the reader's own wake-up for that line (the look read it first)
        cycles = console._cycles
        time.sleep(0.6)
        assert console._cycles == cycles  # nothing arrived: the reader did not run
        os.write(master, b"two\r\n")
        _eventually(lambda: console._cycles > cycles)  # it wakes for bytes
    finally:
        thread = console._thread
        console.close()
    assert thread is not None and not thread.is_alive()
    assert not console.ok


@pytest.mark.parametrize("line", [
    "[  12.3] Kernel panic - not syncing: Fatal exception",
    "[  12.3] Unable to handle kernel NULL pointer dereference at virtual address 0000000000000008",
    "[  12.3] Internal error: Oops: 96000005 [#1] PREEMPT SMP",
    "[  12.3] SError Interrupt on CPU4, code 0xbe000011 -- SError",
    "[  12.3] watchdog: s3c2410-wdt: watchdog bite on cpu 3",
    "[  12.3] npu: NPU hang detected, firmware timeout",
    "[  12.3] ENN: enn driver fault while executing model 3",
])
def test_crash_lines_are_found_and_named(pty_pair, line: str) -> None:
    master, path = pty_pair
    with SerialConsole(path) as console:
        start = console.mark()
        os.write(master, b"enn: runner pid 42 started\r\n" + line.encode() + b"\r\nafter\r\n")
        _eventually(lambda: console.mark() - start == 3)
        assert console.crash_line(start) == line


def test_a_crash_line_is_named_after_more_lines_than_are_kept_and_not_for_a_later_case(
    pty_pair, tmp_path: Path
) -> None:
    # a case's crash line followed by more chatter than the reader keeps in memory is still
    # named (the reader matches each line as it arrives); the next case does not see it
    master, path = pty_pair
    crash = "[  12.3] Kernel panic - not syncing: Fatal exception"
    chatter = b"".join(b"npu: step %d\r\n" % i for i in range(KEEP_LINES + 10))
    with SerialConsole(path, log_path=tmp_path / "uart.log") as console:
        start = console.mark()
        os.write(master, crash.encode() + b"\r\n")
        for offset in range(0, len(chatter), 4096):  # the pty takes a few KB at a time
            os.write(master, chatter[offset:offset + 4096])
            console.mark()
        _eventually(lambda: console.mark() - start == KEEP_LINES + 11)
        assert console.crash_line(start) == crash
        assert console.excerpt(start).splitlines()[-1] == f"npu: step {KEEP_LINES + 9}"
        later = console.mark()
        os.write(master, b"enn: runner pid 8 exited with status 0\r\n")
        _eventually(lambda: console.mark() - later == 1)
        assert console.crash_line(later) is None
        assert console.excerpt(later) == "enn: runner pid 8 exited with status 0"


def test_ordinary_lines_are_not_crashes(pty_pair) -> None:
    master, path = pty_pair
    with SerialConsole(path) as console:
        start = console.mark()
        os.write(master, b"enn: runner pid 7 exited with status 0\r\nnpu: power on\r\n"
                         b"watchdog: enabled, timeout 60 s\r\n")
        _eventually(lambda: console.mark() - start == 3)
        assert console.crash_line(start) is None


def test_socket_console_reads_and_reconnects(line_server: LineServer, tmp_path: Path) -> None:
    url = f"socket://127.0.0.1:{line_server.port}"
    with SerialConsole(url, tmp_path / "c.log") as console:
        line_server.send(b"first\r\n")
        _eventually(lambda: console.mark() == 1)
        line_server.drop_clients()  # the console server restarts
        _eventually(lambda: bool(line_server.clients), timeout=15)
        # pyserial's socket open discards what arrives before it returns: wait for the port
        _eventually(lambda: console.ok)
        start = console.mark()
        line_server.send(b"Kernel panic - not syncing: after the reconnect\r\n")
        _eventually(lambda: console.crash_line(start) is not None)
        assert console.crash_line(start) == "Kernel panic - not syncing: after the reconnect"


def test_a_console_that_cannot_be_opened_names_its_url(tmp_path: Path) -> None:
    with pytest.raises(InfraError, match=r"console .*nope.*cannot open"):
        SerialConsole(str(tmp_path / "nope")).open()
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with pytest.raises(InfraError, match=f"socket://127.0.0.1:{port}"):
        probe_console(f"socket://127.0.0.1:{port}")


def test_virtual_board_uart_through_the_reader(tmp_path: Path) -> None:
    uart = VirtualConsole(tmp_path / "ttyVB0")
    try:
        assert os.readlink(tmp_path / "ttyVB0") == uart.path
        uart.write_line("lost: nobody reads the UART yet")  # flushed when the reader opens
        with SerialConsole(str(tmp_path / "ttyVB0")) as console:
            uart.boot_banner("E9965", "vb0")
            _eventually(lambda: console.mark() == 4)
            assert "Samsung Exynos E9965" in console.excerpt(0)
            assert "lost" not in console.excerpt(0)
            start = console.mark()
            uart.write_line("Kernel panic - not syncing: injected")
            _eventually(lambda: console.crash_line(start) is not None)
            assert console.crash_line(start).endswith("] Kernel panic - not syncing: injected")
    finally:
        uart.close()
    assert not (tmp_path / "ttyVB0").exists()
