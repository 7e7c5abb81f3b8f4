"""hil's own connections to a board's adb services: one socket each, Nagle off, closed at once.

adbutils stays for what it does well: the adb server's host services (`connect`,
`disconnect`, `devices`, `get-state`, reboots). The per-case traffic (a case's sync
connections and its run shell, every `AdbBoard.shell`) bypasses it, because on that path
adbutils 2.12 spends more time of its own than a small case costs on a USB 2 board
(reference/adb-protocol.md item 11, measured in `scripts/bench.py`):

- `AdbDevice.open_transport()` first asks the server for its version (`host:version`) on a
  connection of its own, on every call, to choose between `host:tport:` and
  `host:transport:` (`adbutils/_device_base.py`);
- `AdbConnection.close()` does `shutdown(SHUT_WR)` and then `time.sleep(0.01)`, so each of
  those two connections costs 10 ms of sleep;
- its sockets keep Nagle's algorithm on: two small writes in a row (a sync `DATA` then its
  `DONE`) wait for the peer's delayed ACK, up to 40 ms.

The adb server keeps Nagle on at its end of the client's socket, so two small replies in a
row (the acknowledgements of two pushed files, a shell's last output packet and its exit
packet) wait for this side's ACK of the first, which Linux delays up to 40 ms while the
client only reads. `TCP_QUICKACK` before each read makes the ACK immediate (Linux only; it
does not stick, hence before every read).

Here `host:transport:SERIAL` (every server version understands it) is sent on the service's
own connection, `TCP_NODELAY` is set, and `close()` closes: the adb server sees the end of
the stream at once either way (a FIN, or an RST when the board sent bytes nobody read) and
closes the device stream. Failures raise what adbutils raises on the same path (`AdbError`
for a refused request, `EOFError` for a connection cut mid-message, `TimeoutError` for an
idle socket), so callers catch one set of errors (`hil.board.adb.ADB_ERRORS`).
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import select
import socket
import struct
from collections.abc import Callable

import adbutils

from hil.board import limits

SHELL_STDIN, SHELL_STDOUT, SHELL_STDERR, SHELL_EXIT, SHELL_CLOSE_STDIN = 0, 1, 2, 3, 4
"""Shell v2 packet ids (reference/adb-protocol.md; AOSP `adb/shell_protocol.h`)."""
SHELL_HEADER = struct.Struct("<BI")
"""A shell v2 packet's header: its id and its data's length (little-endian)."""
_RECV_SIZE = 256 * 1024
_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


def _server_of(device: adbutils.AdbDevice) -> tuple[str, int] | str:
    """The adb server the device belongs to: (host, port), or the unix socket of hil's private
    server (`hil/adbserver.py`). adbutils keeps its client in a private attribute and has no
    accessor for it; the host and port are public on the client."""
    client = device._client  # noqa: SLF001 - see above
    return getattr(client, "unix_path", None) or (client.host, client.port)


def _connect(address: tuple[str, int] | str, timeout: float) -> socket.socket:
    """A connection to the adb server: its unix socket, or TCP; an address given as an IP is
    connected to directly, without `getaddrinfo` (two a case, each a measurable share of hil's
    CPU per case)."""
    if isinstance(address, str):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
        except BaseException:
            sock.close()
            raise
        return sock
    host, port = address
    family = _ip_family(host)
    if family is None:
        return socket.create_connection(address, timeout=timeout)  # a name: resolved each time
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


@functools.lru_cache(maxsize=64)
def _ip_family(host: str) -> socket.AddressFamily | None:
    """The address family of an IP given as text; None for a host name."""
    try:
        return socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        return None


class ServiceConnection:
    """One connection to a device service through its adb server (a context manager)."""

    def __init__(self, device: adbutils.AdbDevice, service: str, timeout: float) -> None:
        """Open `service` (`sync:`, `shell,v2:CMD`) on `device`; `timeout` bounds the
        connect and then every single read and write (an idle timeout, not a deadline)."""
        self._buffer = bytearray()
        self._timeout = timeout
        self.sock = _connect(_server_of(device), timeout)
        self._tcp = self.sock.family != socket.AF_UNIX
        try:
            if self._tcp:
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # non-blocking, each wait explicit (`_wait`): a socket with a timeout polls before
            # every recv and send, a system call (and a GIL hand-off) more per packet
            self.sock.setblocking(False)
            if device.serial:
                self._request(f"host:transport:{device.serial}")
            else:
                self._request(f"host:transport-id:{device._transport_id}")  # noqa: SLF001
            self._request(service)
        except BaseException:
            self.sock.close()
            raise

    def _request(self, text: str) -> None:
        data = text.encode("utf-8")
        self.sock.sendall(b"%04x" % len(data) + data)
        status = self.read_exact(4)
        if status == b"OKAY":
            return
        if status == b"FAIL":
            length = int(self.read_exact(4), 16)
            raise adbutils.AdbError(self.read_exact(length).decode("utf-8", "replace"))
        raise adbutils.AdbError(f"{text.split(':')[0]}: unexpected adb server reply {status!r}")

    def _wait(self, write: bool) -> None:
        """Wait until the socket can be written (or read); TimeoutError after the idle
        timeout, as a socket with a timeout raises."""
        ready = select.select([], [self.sock], [], self._timeout) if write else \
            select.select([self.sock], [], [], self._timeout)
        if not any(ready):
            raise TimeoutError("timed out")

    def sendall(self, data: bytes) -> None:
        """Write all of `data` (TimeoutError when the socket accepts nothing for the idle
        timeout)."""
        view = memoryview(data)
        while view:
            try:
                view = view[self.sock.send(view):]
            except BlockingIOError:
                self._wait(write=True)

    def wait_readable(self, timeout: float) -> bool:
        """True when a read would not wait (bytes are buffered or have arrived), else once
        `timeout` seconds have passed without any: False."""
        if self._buffer:
            return True
        if self.sock.fileno() < 0:  # closed by another thread (`close`)
            raise EOFError("the connection was closed")
        return bool(select.select([self.sock], [], [], timeout)[0])

    def read_exact(self, size: int) -> bytes:
        """Exactly `size` bytes; EOFError when the connection ends first, TimeoutError when
        nothing arrives for the idle timeout."""
        while len(self._buffer) < size:
            if _QUICKACK is not None and self._tcp:
                self.sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            try:
                chunk = self.sock.recv(max(size - len(self._buffer), _RECV_SIZE))
            except BlockingIOError:
                self._wait(write=False)
                continue
            if not chunk:
                raise EOFError(f"Expected {size} bytes, got {len(self._buffer)}")
            self._buffer += chunk
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def close(self) -> None:
        """Close the socket now (no sleep: see the module docstring). A thread waiting on
        it is woken: `shutdown` makes it readable, at its end."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    def __enter__(self) -> ServiceConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def shell_v2(
    device: adbutils.AdbDevice,
    command: str,
    timeout: float,
    on_stderr: Callable[[bytes], None] | None = None,
    poll: Callable[[], float] | None = None,
) -> adbutils.ShellReturn:
    """Run `command` through adbd's shell v2 service: stdout, stderr and the real exit
    status, as `adbutils.AdbDevice.shell2(command, v2=True)` returns them. `on_stderr`
    sees each stderr packet as it arrives; `poll`, asked before each wait for a packet,
    returns the longest wait in seconds and raises to end the call (the connection closed).
    The command's stdin is closed at once: hil has
    nothing to send, and real adb sends close-stdin at its stdin's end (AOSP
    `client/commandline.cpp`), after which adbd shuts the shell's stdin
    (`daemon/shell_service.cpp`, `kIdCloseStdin`); a command that reads stdin sees its end."""
    stdout, stderr, output = bytearray(), bytearray(), bytearray()
    status = None
    with ServiceConnection(device, f"shell,v2:{command}", timeout) as connection:
        connection.sendall(SHELL_HEADER.pack(SHELL_CLOSE_STDIN, 0))
        while status is None:
            while poll is not None and not connection.wait_readable(poll()):
                pass
            kind, length = SHELL_HEADER.unpack(connection.read_exact(SHELL_HEADER.size))
            data = connection.read_exact(limits.shell_packet(length)) if length else b""
            limits.shell_output(len(output) + len(data))  # bounded (limits.py)
            if kind == SHELL_STDOUT:
                stdout += data
                output += data
            elif kind == SHELL_STDERR:
                stderr += data
                output += data
                if on_stderr is not None:
                    on_stderr(data)
            elif kind == SHELL_EXIT and data:
                status = data[0]
    return adbutils.ShellReturn(
        command=command,
        returncode=status,
        output=output.decode("utf-8", "replace"),
        stderr=stderr.decode("utf-8", "replace"),
        stdout=stdout.decode("utf-8", "replace"),
    )
