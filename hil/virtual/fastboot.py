"""The virtual board's bootloader: the DEVICE side of AOSP's fastboot protocol over TCP.

Mirrors AOSP's `system/core/fastboot/README.md` ("Transport and Framing", "TCP Protocol v1",
"Client Variables"): on connect both sides send the 4-byte handshake `FB01`; every packet
then is an 8-byte big-endian length and the packet. The host sends one command per packet;
the board answers `INFO...` lines and one `OKAY...` or `FAIL...` (`DATA%08x` first for
`download:%08x`, whose bytes follow in as many packets as the host likes).

Commands: `getvar:NAME` (and `getvar:all`: one `INFO` line per variable), `download:%08x`,
`flash:PARTITION`, `erase:PARTITION`, `reboot`, `reboot-bootloader`, `continue`; anything
else is answered `FAIL unknown command`, an unknown variable `FAIL` too (what a bootloader
newer than the README's 0.4 does), and both are logged. One host at a time, as over USB.
What Debian's client (29.0.6) asks: one connection per invocation; `flash P` sends
`getvar:has-slot:P`, `getvar:max-download-size`, `getvar:is-logical:P`, `download`, `flash:P`;
`erase P` sends `getvar:has-slot:P`, `getvar:partition-type:P`, `erase:P`; on a refused
connection it prints `< waiting for tcp:... >` and retries until killed.

The board (`server.py`) starts a `FastbootServer` when it enters the bootloader and stops it
when it leaves: a board on adb has no fastboot. Faults (`faults.py`): `flash-fail` FAILs a
flash, `download-hang` stops reading halfway through a download and leaves the bootloader
hung (every later host hangs at the handshake) until the board is powered off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import struct
import threading
from typing import Protocol

from hil.virtual.faults import Fault
from hil.virtual.images import PARTITIONS, FlashStore, ImageError

log = logging.getLogger(__name__)

HANDSHAKE = b"FB01"
MAX_COMMAND = 4096
"""Longest command packet (README: 64 bytes in 0.4; 4096 since fastbootd)."""
MAX_RESPONSE = 256
MAX_DOWNLOAD = 0x10000000
"""`max-download-size`: the client sends a bigger image as sparse pieces."""
BOOTLOADER_VERSION = "hil-virtual-1.0"
_DOWNLOAD = re.compile(r"download:([0-9a-fA-F]{8})")


class Bootloader(Protocol):
    """What the fastboot server needs of its board."""

    store: FlashStore

    def fastboot_variables(self) -> dict[str, str]:
        """The board-wide variables (`product`, `serialno`...)."""
        ...

    def fire(self, event: str, path: str = "") -> list[Fault]:
        """The faults firing on `event` (`download`, `flash` with the partition)."""
        ...

    def flashed(self, partition: str) -> None:
        """A flash of `partition` succeeded."""
        ...

    def bootloader_reboot(self, target: str) -> None:
        """Leave the bootloader: `target` "" boots Android, "bootloader" comes back here."""
        ...


class _Closed(Exception):
    """The host went away, or broke the framing."""


class FastbootServer:
    """The bootloader's TCP listener and its sessions."""

    def __init__(self, board: Bootloader, host: str, port: int) -> None:
        self.board = board
        self.host = host
        self.port = port
        self.hung = False
        """A `download-hang` fired: nothing is answered any more."""
        self._server: asyncio.Server | None = None
        self._sessions: dict[asyncio.StreamWriter, asyncio.Task[None]] = {}
        self._one_host = asyncio.Lock()
        self._staged: bytes | None = None
        self._cut = threading.Event()
        """Set when the bootloader stops (power off, reboot): a write in progress ends."""
        self._writing: asyncio.Future[int] | None = None

    async def start(self) -> None:
        """Listen on `host:port`."""
        self._server = await asyncio.start_server(
            self._accept, self.host, self.port, reuse_address=True
        )
        log.info("fastboot: listening on tcp:%s:%d", self.host, self.port)

    async def stop(self) -> None:
        """Stop listening, cut every session and end a flash write where it is."""
        self._cut.set()
        if self._server is not None:
            self._server.close()
        for writer, task in list(self._sessions.items()):
            writer.transport.abort()
            task.cancel()
        await asyncio.gather(*self._sessions.values(), return_exceptions=True)
        if self._writing is not None:
            await asyncio.gather(self._writing, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        log.info("fastboot: stopped")

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._sessions[writer] = task
        try:
            async with self._one_host:
                await self._session(reader, writer)
        except (_Closed, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._sessions.pop(writer, None)
            writer.transport.abort()

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.hung:
            await asyncio.Future()  # a hung bootloader answers nothing
        greeting = await reader.readexactly(len(HANDSHAKE))
        if greeting[:2] != b"FB" or not greeting[2:].isdigit() or int(greeting[2:]) < 1:
            log.warning("fastboot: malformed handshake %r: disconnecting", greeting)
            return
        writer.write(HANDSHAKE)
        while True:
            try:
                packet = await _read_packet(reader, MAX_COMMAND)
            except asyncio.IncompleteReadError:
                return  # the host is done
            command = packet.decode("ascii", errors="replace")
            log.info("fastboot: %s", command)
            reboot = await self._command(command, reader, writer)
            if reboot is not None:
                await writer.drain()
                writer.close()
                self.board.bootloader_reboot(reboot)
                return

    async def _command(self, command: str, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> str | None:
        """Answer one command; returns a reboot target when the command leaves."""
        name, _, argument = command.partition(":")
        if name == "getvar":
            await self._getvar(argument, writer)
        elif name == "download":
            await self._download(command, reader, writer)
        elif name in ("flash", "erase"):
            await self._write(name, argument, writer)
        elif command in ("reboot", "continue"):
            await _send(writer, "OKAY")
            return ""
        elif command == "reboot-bootloader":
            await _send(writer, "OKAY")
            return "bootloader"
        else:
            log.warning("fastboot: unknown command %r", command)
            await _send(writer, "FAIL", "unknown command")
        return None

    def _variables(self) -> dict[str, str]:
        variables = {
            "version": "0.4",
            "version-bootloader": BOOTLOADER_VERSION,
            "version-baseband": "",
            "secure": "no",
            "unlocked": "yes",
            "is-userspace": "no",
            "max-download-size": f"0x{MAX_DOWNLOAD:08x}",
            **self.board.fastboot_variables(),
        }
        for partition, size in PARTITIONS.items():
            variables[f"partition-size:{partition}"] = f"0x{size:016x}"
            variables[f"partition-type:{partition}"] = "raw"
            variables[f"has-slot:{partition}"] = "no"
            variables[f"is-logical:{partition}"] = "no"
        return variables

    async def _getvar(self, name: str, writer: asyncio.StreamWriter) -> None:
        variables = self._variables()
        if name == "all":
            for key, value in variables.items():
                await _send(writer, "INFO", f"{key}:{value}")
            await _send(writer, "OKAY")
        elif name in variables:
            await _send(writer, "OKAY", variables[name])
        else:
            log.warning("fastboot: unknown variable %r", name)
            await _send(writer, "FAIL", "Variable not found")

    async def _download(self, command: str, reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter) -> None:
        match = _DOWNLOAD.fullmatch(command)
        if match is None:
            await _send(writer, "FAIL", "bad download size")
            return
        size = int(match.group(1), 16)
        if size == 0:  # as U-Boot's fastboot: "Expected nonzero image size"
            await _send(writer, "FAIL", "expected nonzero image size")
            return
        if size > MAX_DOWNLOAD:
            await _send(writer, "FAIL", f"data too large (max-download-size 0x{MAX_DOWNLOAD:x})")
            return
        self._staged = None
        hang = any(f.kind == "download-hang" for f in self.board.fire("download"))
        await _send(writer, "DATA", f"{size:08x}")
        data = bytearray()
        while len(data) < size:
            if hang and len(data) >= size // 2:
                self.hung = True
                log.warning("fastboot: fault download-hang: stopped at %d of %d bytes",
                            len(data), size)
                await asyncio.Future()  # until the board is powered off
            # hanging, stop at half even inside a packet: AOSP's client sends a file as one
            half = size // 2 - len(data) if hang else None
            data += await _read_packet(reader, size - len(data), half)
        self._staged = bytes(data)
        await _send(writer, "OKAY")

    async def _write(self, name: str, partition: str, writer: asyncio.StreamWriter) -> None:
        store = self.board.store
        try:
            store.check(partition)
            if name == "erase":
                store.erase(partition)
                await _send(writer, "OKAY")
                return
            if self._staged is None:
                raise ImageError("no image downloaded")
            if any(f.kind == "flash-fail" for f in self.board.fire("flash", partition)):
                raise ImageError(f"flash write failure on '{partition}' (fault injection)")
            # shielded: a power cut (`stop`) stops the write through `_cut` and waits for it,
            # so no write outlives the power and finishes a partition the cut interrupted
            self._writing = asyncio.ensure_future(
                asyncio.to_thread(store.flash, partition, self._staged, self._cut.is_set))
            written = await asyncio.shield(self._writing)
        except (ImageError, OSError) as exc:  # OSError: the board's own storage (full, gone)
            log.warning("fastboot: %s %s: %s", name, partition, exc)
            await _send(writer, "FAIL", str(exc))
            return
        log.info("fastboot: flashed %s (%d bytes)", partition, written)
        self.board.flashed(partition)
        await _send(writer, "OKAY")


async def _read_packet(reader: asyncio.StreamReader, limit: int, part: int | None = None) -> bytes:
    """One framed packet of at most `limit` bytes (_Closed for a longer one); with `part`, only
    its first `part` bytes (the rest is left unread)."""
    (size,) = struct.unpack(">Q", await reader.readexactly(8))
    if size > limit:
        log.warning("fastboot: packet of %d bytes (at most %d): disconnecting", size, limit)
        raise _Closed
    return await reader.readexactly(size if part is None else min(size, part))


async def _send(writer: asyncio.StreamWriter, kind: str, message: str = "") -> None:
    """One response packet: the 4-byte kind and its message, at most MAX_RESPONSE bytes."""
    payload = (kind + message).encode("ascii", errors="replace")[:MAX_RESPONSE]
    writer.write(struct.pack(">Q", len(payload)) + payload)
    with contextlib.suppress(ConnectionError):
        await writer.drain()
