"""Many files through ONE adb sync connection, kept open from case to case.

adbutils opens a sync connection (and, for a push, a STAT before and after) per file; over
USB every connection is a round trip, and every connection costs the adb server and hil
CPU. adbd's sync service serves requests until QUIT (`file_sync_service.cpp`), so a board's
`SyncSession` carries each case's `.pte` and inputs up, the liveness probes (a STAT) while
its runner runs, and its outputs down: one sync connection a board (`AdbBoard.run` opens a
new one after a failed case), beside each case's run shell.
The connections are hil's own (`connection.py`: no version query, no sleep on close, Nagle
off).
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import adbutils

from hil.board import limits
from hil.board.connection import ServiceConnection

CHUNK = 64 * 1024
"""Largest DATA payload the sync protocol allows."""


class SyncFailed(Exception):
    """The board answered FAIL to a sync request (the message is the board's)."""


def _request(command: bytes, path: str) -> bytes:
    encoded = path.encode("utf-8")
    if len(encoded) > 1024:
        raise SyncFailed(f"device path too long: {path[:80]}...")
    return command + struct.pack("<I", len(encoded)) + encoded


class SyncSession:
    """One sync connection to a board, opened on first use and again after the board ended
    it (adbd closes a sync connection after a FAIL). One request at a time: a liveness probe
    may still be waiting for its answer when the runner's shell ends and the pull starts.
    `timeout` is the idle timeout of every socket read and write. A context manager."""

    def __init__(self, device: adbutils.AdbDevice, timeout: float) -> None:
        self._device = device
        self._timeout = timeout
        self._lock = threading.Lock()
        self._connection: ServiceConnection | None = None
        self._closed = False

    @property
    def device(self) -> adbutils.AdbDevice:
        """The device it connects to."""
        return self._device

    def _open(self) -> ServiceConnection:
        if self._closed:  # a probe that comes after the case: no connection of its own
            raise adbutils.AdbError("the sync session is closed")
        if self._connection is None:
            self._connection = ServiceConnection(self._device, "sync:", self._timeout)
        return self._connection

    def _drop(self) -> None:
        """Forget the connection (the board ended it, or it is in an unknown state)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def push(self, files: Sequence[tuple[Path | bytes, str, int]]) -> int:
        """Push `(local, remote, mode)` files (`local` a host file or the bytes themselves);
        returns the bytes sent.

        Every file goes out before the first acknowledgement is read (as `adb push` of
        several files does): one wait for the board, not one per file. adbd answers each
        `DONE` in order and ends the session after a FAIL, so the first FAIL names the file.
        A connection an earlier call opened that proves cut at once (EOF, reset, broken
        pipe: a reconnect or a new adb server since) is replaced once; a silent board still
        times out.
        """
        with self._lock:
            earlier = self._connection is not None
            try:
                return self._push_once(files)
            except (EOFError, BrokenPipeError, ConnectionResetError):
                if not earlier:
                    raise
            return self._push_once(files)

    def _push_once(self, files: Sequence[tuple[Path | bytes, str, int]]) -> int:
        connection = self._open()
        try:
            return _push(connection, files)
        except BaseException:
            self._drop()
            raise

    def stat(self, path: str) -> int:
        """The mode of `path` (0 when it does not exist): the liveness probe adbd answers
        from its sync thread, without forking a shell as every `shell,v2:` request does (so
        probing a board while a runner is timed does not disturb the timing)."""
        with self._lock:
            connection = self._open()
            try:
                connection.sendall(_request(b"STAT", path))
                reply = connection.read_exact(16)
                if reply[:4] != b"STAT":
                    raise adbutils.AdbError(f"stat {path}: unexpected sync reply {reply[:4]!r}")
            except BaseException:
                self._drop()
                raise
        return struct.unpack("<I", reply[4:8])[0]

    def pull(
        self, remotes: Sequence[str], expected: Mapping[str, int] | None = None
    ) -> dict[str, bytes | None]:
        """Pull files, every request sent before the first answer is read; a file the board
        does not have maps to None (and costs a new connection for the files after it: adbd
        ends the session after a FAIL). `expected`: sizes hil knows; a file may hold that
        plus `limits.PULL_SLACK` (`limits.PULL_MAX` when unknown), else BoardOverflow."""
        expected = expected or {}
        found: dict[str, bytes | None] = {}
        with self._lock:
            pending = list(remotes)
            while pending:
                connection = self._open()
                try:  # every request in one write: adbd answers them in order
                    connection.sendall(b"".join(_request(b"RECV", remote) for remote in pending))
                    while pending:
                        remote = pending.pop(0)
                        found[remote] = _receive(connection, remote, limits.pull_limit(expected.get(remote)))
                        if found[remote] is None:
                            self._drop()  # adbd ended the session: the rest on a new one
                            break
                except BaseException:
                    self._drop()
                    raise
        return found

    def close(self) -> None:
        """QUIT when no request is in flight, then close. A probe stuck on a frozen board
        holds the lock: its socket is shut down under it, which ends its wait at once."""
        self._closed = True
        if self._lock.acquire(blocking=False):
            try:
                if self._connection is not None:
                    try:
                        self._connection.sendall(_request(b"QUIT", ""))
                    except OSError:
                        pass  # the board went away: closing is all that is left
                self._drop()
            finally:
                self._lock.release()
            return
        connection = self._connection
        if connection is not None:
            try:
                connection.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already gone
            connection.close()

    def __enter__(self) -> SyncSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def push_files(
    device: adbutils.AdbDevice, files: Sequence[tuple[Path | bytes, str, int]], timeout: float = 30.0
) -> int:
    """`SyncSession.push` in a connection of its own."""
    with SyncSession(device, timeout) as session:
        return session.push(files)


def pull_files(
    device: adbutils.AdbDevice, remotes: Sequence[str], timeout: float = 30.0,
    expected: Mapping[str, int] | None = None,
) -> dict[str, bytes | None]:
    """`SyncSession.pull` in a connection of its own."""
    with SyncSession(device, timeout) as session:
        return session.pull(remotes, expected)


def _push(connection: ServiceConnection, files: Sequence[tuple[Path | bytes, str, int]]) -> int:
    """Every request of every file goes out in writes of about CHUNK bytes: a case's small
    files (its inputs, the folder markers) in one write, so one WRTE packet, where a write
    per request cost a packet and its OKAY each (as adb's own client sends a small file in
    one write: `SendSmallFile` in `adb/client/file_sync_client.cpp`)."""
    total = 0
    cut: OSError | None = None
    out = bytearray()
    try:
        for local, remote, mode in files:
            out += _request(b"SEND", f"{remote},{0o100000 | mode}")
            for chunk in _chunks(local):
                out += b"DATA" + struct.pack("<I", len(chunk)) + chunk
                total += len(chunk)
                if len(out) >= CHUNK:
                    connection.sendall(out)
                    out.clear()
            out += b"DONE" + struct.pack("<I", int(time.time()))
        connection.sendall(out)
    except (BrokenPipeError, ConnectionResetError) as error:
        cut = error  # the board may have ended the session after a FAIL: read it first
    for _local, remote, _mode in files:
        try:
            status = connection.read_exact(8)
        except (EOFError, OSError):
            if cut is not None:
                raise cut from None
            raise
        if status[:4] == b"FAIL":
            length = _data_length(struct.unpack("<I", status[4:])[0], remote)
            message = connection.read_exact(length).decode("utf-8", "replace")
            raise SyncFailed(f"push {remote}: {message}")
        if status[:4] != b"OKAY":
            raise adbutils.AdbError(f"push {remote}: unexpected sync reply {status[:4]!r}")
    if cut is not None:
        raise cut
    return total


def _chunks(local: Path | bytes) -> Iterator[bytes]:
    if isinstance(local, bytes):
        for offset in range(0, len(local), CHUNK):
            yield local[offset : offset + CHUNK]
        return
    fd = os.open(local, os.O_RDONLY | os.O_CLOEXEC)  # not `open`: half the system calls
    try:
        while chunk := os.read(fd, CHUNK):
            yield chunk
    finally:
        os.close(fd)


def _data_length(length: int, remote: str) -> int:
    """A sync DATA or FAIL payload's announced length; BoardOverflow past SYNC_DATA_MAX."""
    if length > limits.SYNC_DATA_MAX:
        raise limits.BoardOverflow(f"{remote}: the board announced a sync payload of {length} bytes "
                                   f"(adbd sends at most {limits.SYNC_DATA_MAX}): not read")
    return length


def _receive(connection: ServiceConnection, remote: str, limit: int) -> bytes | None:
    """One RECV's file (None: the board's FAIL); BoardOverflow past `limit` bytes."""
    parts: list[bytes] = []
    total = 0
    while True:
        header = connection.read_exact(8)
        kind, length = header[:4], struct.unpack("<I", header[4:])[0]
        if kind == b"DATA":
            total += _data_length(length, remote)
            if total > limit:
                raise limits.BoardOverflow(f"{remote}: the board sent more than {limit} bytes for it "
                                           "(its expected size and some slack): stopped reading")
            parts.append(connection.read_exact(length))
        elif kind == b"DONE":
            return b"".join(parts)
        elif kind == b"FAIL":
            connection.read_exact(_data_length(length, remote))
            return None
        else:
            raise adbutils.AdbError(f"unexpected sync reply {kind!r}")
