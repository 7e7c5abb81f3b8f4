"""The `sync:` service: adb's file transfer protocol on the device side.

Requests are a 4-byte id, a u32 LE length and a path (<= 1024 bytes). Implemented:
STAT (v1, lstat), STA2 (stat) and LST2 (lstat), LIST and LIS2, SEND (creates parent
folders, `fixed_push_mkdir`), RECV and QUIT. Every path is resolved by the device model
under the board's `fs/` folder; writes outside `/data` fail with EROFS like a read-only
system partition. Failure messages follow adbd's (`couldn't create file: ...`,
`open failed: ...`); a failed SEND or RECV ends the sync session, as in adbd.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import struct
from collections.abc import Iterator
from pathlib import Path

from hil.virtual.device import Device
from hil.virtual.hostile import escape_entry, escape_reply, is_escape
from hil.virtual.stream import Stream

log = logging.getLogger(__name__)

MAX_PATH = 1024
MAX_DATA = 64 * 1024
"""The largest DATA chunk of a SEND or RECV."""
_WRITE_BATCH = 1024 * 1024
"""Pushed data is written to disk in batches of this size (fewer GIL hand-offs)."""

_REQUEST = struct.Struct("<4sI")
_STAT_V1 = struct.Struct("<4sIII")
_STAT_V2 = struct.Struct("<4sIQQIIIIQqqq")
_DENT_V1 = struct.Struct("<4sIIII")
_DENT_V2 = struct.Struct("<4sIQQIIIIQqqqI")
_LIST_V1_DONE = _DENT_V1.pack(b"DONE", 0, 0, 0, 0)
_LIST_V2_DONE = b"DONE" + bytes(_DENT_V2.size - 4)


class _ReadFailed(Exception):
    """Reading a file for RECV failed (a folder, an I/O error)."""


async def serve_sync(stream: Stream, device: Device) -> None:
    """Serve sync requests until QUIT, a failed transfer or the host closing."""
    while True:
        request, length = _REQUEST.unpack(await stream.readexactly(_REQUEST.size))
        if request == b"QUIT":
            return
        if length > MAX_PATH:
            await _fail(stream, f"path too long: {length} > {MAX_PATH}")
            return
        path = os.fsdecode(await stream.readexactly(length))
        log.debug("sync %s %s", request.decode(errors="replace"), path)
        if request == b"STAT":
            await stream.write(_stat_v1(device, path))
        elif request in (b"STA2", b"LST2"):
            await stream.write(_stat_v2(device, path, request, follow=request == b"STA2"))
        elif request in (b"LIST", b"LIS2"):
            records = _list(device, path, v2=request == b"LIS2")
            if "list-escape" in device.hostile:  # a hostile board (hostile.py)
                records.insert(-1, escape_entry(v2=request == b"LIS2"))
            for record in records:
                await stream.write(record)
        elif request == b"SEND":
            fired = stream.transport.board.fire("push", path.rpartition(",")[0])
            if any(fault.kind == "drop" for fault in fired):
                return
            full = any(fault.kind == "storage-full" for fault in fired)
            if not await _send(stream, device, path, storage_full=full):
                return
        elif request == b"RECV":
            fired = stream.transport.board.fire("pull", path)
            if any(fault.kind == "drop" for fault in fired):
                return
            if "list-escape" in device.hostile and is_escape(path):
                await stream.write(escape_reply())
            elif not await _recv(stream, device, path):
                return
        else:
            await _fail(stream, f"unknown sync request {request!r}")
            return


async def _fail(stream: Stream, message: str) -> None:
    data = message.encode()
    await stream.write(b"FAIL" + struct.pack("<I", len(data)) + data)


def _stat_path(device: Device, path: str, follow: bool) -> os.stat_result:
    host = device.resolve(path, follow_last=follow)
    return host.stat() if follow else host.lstat()


def _stat_v1(device: Device, path: str) -> bytes:
    """STAT reply: mode, size, mtime of the path itself (lstat); zeros when missing."""
    try:
        st = _stat_path(device, path, follow=False)
    except OSError:
        return _STAT_V1.pack(b"STAT", 0, 0, 0)
    return _STAT_V1.pack(b"STAT", st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime))


def _stat_fields(st: os.stat_result) -> tuple[int, ...]:
    return (
        st.st_dev, st.st_ino, st.st_mode, st.st_nlink, st.st_uid, st.st_gid, st.st_size,
        int(st.st_atime), int(st.st_mtime), int(st.st_ctime),
    )


def _stat_v2(device: Device, path: str, request: bytes, follow: bool) -> bytes:
    """STA2/LST2 reply: errno plus the full stat, zeros with the errno when it fails."""
    try:
        st = _stat_path(device, path, follow=follow)
    except OSError as exc:
        return _STAT_V2.pack(request, exc.errno or errno.EIO, *([0] * 10))
    return _STAT_V2.pack(request, 0, *_stat_fields(st))


def _list(device: Device, path: str, v2: bool) -> list[bytes]:
    """DENT (or DNT2) records for `.`, `..` and every entry, then the DONE record.
    A folder that cannot be read lists as empty, as in adbd."""
    done = _LIST_V2_DONE if v2 else _LIST_V1_DONE
    try:
        folder = device.resolve(path)
        names = [".", "..", *sorted(os.listdir(folder))]
    except OSError:
        return [done]
    records = []
    for name in names:
        try:
            st = (folder / name).lstat()
        except OSError:
            continue
        encoded = os.fsencode(name)
        if v2:
            head = _DENT_V2.pack(b"DNT2", 0, *_stat_fields(st), len(encoded))
        else:
            head = _DENT_V1.pack(
                b"DENT", st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime), len(encoded)
            )
        records.append(head + encoded)
    records.append(done)
    return records


def _create(device: Device, path: str, mode: int) -> tuple[Path, int]:
    """Open a pushed file for writing, creating its parent folders."""
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, "only regular files can be pushed")
    if path.endswith("/"):
        raise OSError(errno.EISDIR, os.strerror(errno.EISDIR))
    host = device.resolve(path)
    device.check_writable(host)
    host.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    return host, os.open(host, flags, stat.S_IMODE(mode) & 0o777)


def _flush(fd: int, pending: bytearray) -> str:
    """Write and clear the buffered DATA; the error message, or "" when it worked."""
    view = memoryview(pending)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        return f"write failed: {exc.strerror}"
    finally:
        view.release()
        pending.clear()
    return ""


async def _send(stream: Stream, device: Device, spec: str, storage_full: bool = False) -> bool:
    """SEND `path,mode`: receive DATA chunks until DONE, then OKAY or FAIL. On failure
    the remaining DATA is drained first and the partial file removed. `storage_full`
    fails it as a full /data partition does."""
    path, _, mode_text = spec.rpartition(",")
    host: Path | None = None
    fd = -1
    mode = 0
    error = f"write failed: {os.strerror(errno.ENOSPC)}" if storage_full else ""
    try:
        mode = int(mode_text)
        if not error:
            host, fd = _create(device, path, mode)
    except ValueError:
        error = f"bad SEND mode in {spec!r}"
    except OSError as exc:
        error = f"couldn't create file: {exc.strerror}"
    pending = bytearray()
    try:
        while True:
            chunk_id, size = _REQUEST.unpack(await stream.readexactly(_REQUEST.size))
            if chunk_id == b"DONE":
                mtime = size
                break
            if chunk_id != b"DATA" or size > MAX_DATA:
                error = error or f"invalid data message {chunk_id!r} ({size} bytes)"
                break
            data = await stream.readexactly(size)
            if not error:
                pending += data
                if len(pending) >= _WRITE_BATCH:
                    error = _flush(fd, pending)
        if not error:
            error = _flush(fd, pending)
        if not error:
            os.fchmod(fd, stat.S_IMODE(mode) & 0o777)
            os.utime(fd, (mtime, mtime))
    finally:
        if fd >= 0:
            os.close(fd)
    if error:
        if fd >= 0 and host is not None:
            host.unlink(missing_ok=True)
        log.info("push to %s failed: %s", path, error)
        await _fail(stream, error)
        return False
    await stream.write(b"OKAY" + bytes(4))
    return True


async def _recv(stream: Stream, device: Device, path: str) -> bool:
    """RECV: the file as DATA chunks then DONE, or FAIL."""
    try:
        fd = os.open(device.resolve(path), os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        await _fail(stream, f"open failed: {exc.strerror}")
        return False
    chunk_size = min(MAX_DATA, stream.maxdata - _REQUEST.size)

    def records() -> Iterator[bytes]:
        while True:
            try:
                data = os.read(fd, chunk_size)
            except OSError as exc:
                raise _ReadFailed(exc.strerror) from exc
            if not data:
                break
            yield b"DATA" + struct.pack("<I", len(data)) + data
        yield b"DONE" + bytes(4)

    try:
        for record in records():
            await stream.write(record)
    except _ReadFailed as exc:
        await _fail(stream, f"read failed: {exc}")
        return False
    finally:
        os.close(fd)
    return True
