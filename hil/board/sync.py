"""Many files through ONE adb sync connection each way.

adbutils opens a sync connection (and, for a push, a STAT before and after) per file; over
USB every connection is a round trip. adbd's sync service serves requests until QUIT, so a
case's `.pte` and inputs go up in one connection, and its outputs come down in another.
The connections are hil's own (`connection.py`: no version query, no sleep on close, Nagle
off).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import adbutils

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


def push_files(
    device: adbutils.AdbDevice, files: Sequence[tuple[Path | bytes, str, int]], timeout: float = 30.0
) -> int:
    """Push `(local, remote, mode)` files in one sync connection (`local` a host file or the
    bytes themselves); returns the bytes sent.

    Every file goes out before the first acknowledgement is read (as `adb push` of several
    files does): one wait for the board per connection, not one per file. adbd answers each
    `DONE` in order and ends the session after a FAIL, so the first FAIL names the file.
    `timeout` is the idle timeout of every socket read and write.
    """
    total = 0
    with ServiceConnection(device, "sync:", timeout) as connection:
        cut: OSError | None = None
        try:
            for local, remote, mode in files:
                pending = _request(b"SEND", f"{remote},{0o100000 | mode}")
                for chunk in _chunks(local):
                    connection.sendall(pending + b"DATA" + struct.pack("<I", len(chunk)) + chunk)
                    pending = b""
                    total += len(chunk)
                connection.sendall(pending + b"DONE" + struct.pack("<I", int(time.time())))
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
                length = struct.unpack("<I", status[4:])[0]
                message = connection.read_exact(length).decode("utf-8", "replace")
                raise SyncFailed(f"push {remote}: {message}")
            if status[:4] != b"OKAY":
                raise adbutils.AdbError(f"push {remote}: unexpected sync reply {status[:4]!r}")
        if cut is not None:
            raise cut
        connection.sendall(_request(b"QUIT", ""))
    return total


def _chunks(local: Path | bytes) -> Iterator[bytes]:
    if isinstance(local, bytes):
        for offset in range(0, len(local), CHUNK):
            yield local[offset : offset + CHUNK]
        return
    with local.open("rb") as source:
        while chunk := source.read(CHUNK):
            yield chunk


def pull_files(
    device: adbutils.AdbDevice, remotes: Sequence[str], timeout: float = 30.0
) -> dict[str, bytes | None]:
    """Pull files in one sync connection; a file the board does not have maps to None.

    adbd ends a sync connection after a FAIL, so a missing file costs one reconnection for
    the files after it (the normal case, every file present, is one connection).
    """
    found: dict[str, bytes | None] = {}
    pending = list(remotes)
    while pending:
        with ServiceConnection(device, "sync:", timeout) as connection:
            while pending:
                remote = pending[0]
                connection.sendall(_request(b"RECV", remote))
                data = _receive(connection)
                pending.pop(0)
                found[remote] = data
                if data is None:
                    break  # the board closes the connection after FAIL
            else:
                connection.sendall(_request(b"QUIT", ""))
    return found


def _receive(connection: ServiceConnection) -> bytes | None:
    parts: list[bytes] = []
    while True:
        header = connection.read_exact(8)
        kind, length = header[:4], struct.unpack("<I", header[4:])[0]
        if kind == b"DATA":
            parts.append(connection.read_exact(length))
        elif kind == b"DONE":
            return b"".join(parts)
        elif kind == b"FAIL":
            connection.read_exact(length)
            return None
        else:
            raise adbutils.AdbError(f"unexpected sync reply {kind!r}")


def stat_probe(device: adbutils.AdbDevice, path: str, timeout: float) -> int:
    """The mode of `path` by one sync STAT (0 when it does not exist): a liveness probe adbd
    answers from its own sync thread, without forking a shell as every `shell,v2:` request does
    (so probing a board while a runner is timed does not disturb the timing)."""
    with ServiceConnection(device, "sync:", timeout) as connection:
        connection.sendall(_request(b"STAT", path))
        reply = connection.read_exact(16)
        if reply[:4] != b"STAT":
            raise adbutils.AdbError(f"stat {path}: unexpected sync reply {reply[:4]!r}")
        connection.sendall(_request(b"QUIT", ""))
    return struct.unpack("<I", reply[4:8])[0]
