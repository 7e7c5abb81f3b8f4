"""The virtual board's adb transport: the DEVICE side of one adb connection over TCP.

One `Transport` per TCP connection from the adb server, one `Stream` per OPEN, one service
task per stream. A host is served only once it is online: its CNXN is answered with AUTH and
its signature checked as a secure adbd does (`auth.py`); before that OPEN, OKAY, WRTE and CLSE
are ignored (AOSP `adb/adb.cpp`, `handle_packet`: `if (t->online ...)`). Flow control follows
the protocol: the host's OPEN permits our first WRTE, every later WRTE waits for the host's
OKAY, and each incoming WRTE is acknowledged only when its service takes it. The board
(`server.py`) accepts the connections and names each OPEN's service (`TransportBoard.service`);
an unknown one is refused with CLSE. This module does not import the board: it sees it through
`TransportBoard`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
from typing import Protocol

from hil import adbwire
from hil.adbkey import TOKEN_SIZE
from hil.adbwire import A_AUTH, A_CLSE, A_CNXN, A_OKAY, A_OPEN, A_WRTE, Message
from hil.virtual import protocol
from hil.virtual.auth import FAILURES_BEFORE_DELAY, Authority
from hil.virtual.device import Device
from hil.virtual.faults import FaultPlan
from hil.virtual.link import Link
from hil.virtual.stream import Service, Stream, StreamClosed

log = logging.getLogger(__name__)

STREAMS_LOG = "streams.log"
"""In the board's run folder: the service kind of every stream opened, one per line (what a
host did on the board, in round trips)."""
AUTH_TOKEN, AUTH_SIGNATURE, AUTH_RSAPUBLICKEY = 1, 2, 3
"""AUTH message types (arg0) the board sends or answers (AOSP `adb_auth.h`)."""


class TransportBoard(Protocol):
    """What a transport needs of its board."""

    device: Device
    """The device model: its banner for CNXN, its run folder for `STREAMS_LOG`."""
    link: Link
    """The shaped link every message crosses."""
    faults: FaultPlan
    """The armed faults (`auth-refused` is the transport's own to act on)."""
    authority: Authority
    """The keys the board trusts (`auth.py`)."""

    async def awake(self, delay: bool) -> None:
        """Wait while the board is frozen; with `delay`, add a `slow` fault's delay."""
        ...

    def service(self, name: str) -> Service | None:
        """The handler of an OPEN's service name, or None to refuse it."""
        ...


class Transport:
    """One TCP connection from the adb server."""

    def __init__(
        self, board: TransportBoard, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.board = board
        self.reader = reader
        self.writer = writer
        self.version = protocol.DEVICE_VERSION
        self.maxdata = protocol.DEVICE_MAXDATA
        self._streams: dict[int, Stream] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._ids = itertools.count(1)
        self.online = False
        """The host's key was accepted (its CNXN answered with CNXN): streams may open."""
        self._token = b""
        self._failures = 0

    async def send(self, message: Message) -> None:
        """Write one message to the host (held while the board is frozen, delayed by a
        `slow` fault)."""
        await self.board.awake(delay=True)
        if self.writer.is_closing():
            raise StreamClosed
        await self.board.link.to_host(adbwire.HEADER_SIZE + len(message.data))
        self.writer.write(adbwire.encode(message, self.version))
        await self.writer.drain()

    async def _read_message(self) -> Message:
        header = await self.reader.readexactly(adbwire.HEADER_SIZE)
        command, arg0, arg1, length = adbwire.decode_header(header, protocol.DEVICE_MAXDATA)
        data = await self.reader.readexactly(length) if length else b""
        await self.board.link.from_host(adbwire.HEADER_SIZE + length)
        return Message(command, arg0, arg1, data)

    async def run(self) -> None:
        """Serve the connection until the host or a reboot drops it."""
        peer = self.writer.get_extra_info("peername")
        try:
            while True:
                message = await self._read_message()
                await self.board.awake(delay=False)
                await self._dispatch(message)
        except (asyncio.IncompleteReadError, ConnectionError, StreamClosed):
            log.info("transport from %s closed", peer)
        except adbwire.ProtocolError as exc:
            log.warning("transport from %s: %s; dropping it", peer, exc)
        finally:
            await self._close_streams()
            self.writer.close()

    def abort(self) -> None:
        """Drop the connection at once (a reboot)."""
        self.writer.transport.abort()

    async def _dispatch(self, message: Message) -> None:
        if message.command == A_CNXN:
            await self._connect(message)
        elif message.command == A_AUTH:
            await self._auth(message)
        elif not self.online:
            log.debug("ignoring %s before the host is authorized", message.name)
        elif message.command == A_OPEN:
            await self._open(message)
        elif message.command == A_OKAY:
            stream = self._streams.get(message.arg1)
            if stream is not None:
                stream.on_okay()
        elif message.command == A_WRTE:
            stream = self._streams.get(message.arg1)
            if stream is not None:
                stream.on_write(message.data)
        elif message.command == A_CLSE:
            await self._host_closed(message.arg1)
        else:
            log.debug("ignoring %s", message.name)

    async def _connect(self, message: Message) -> None:
        await self._close_streams()
        self.online = False
        self.version, self.maxdata = protocol.negotiate(message.arg0, message.arg1)
        log.info(
            "CNXN from %r: version 0x%08x, maxdata %d",
            message.data.rstrip(b"\0").decode(errors="replace")[:80],
            self.version,
            self.maxdata,
        )
        if self.board.faults.state("auth-refused"):
            log.info("fault auth-refused: asking for a key it will not accept")
        await self._ask_for_key()

    async def _ask_for_key(self) -> None:
        """AUTH TOKEN with a new token (AOSP `adb/daemon/auth.cpp`: `send_auth_request`)."""
        self._token = os.urandom(TOKEN_SIZE)
        await self.send(Message(A_AUTH, AUTH_TOKEN, 0, self._token))

    async def _accept_host(self) -> None:
        self.online = True
        banner = self.board.device.banner(old_adbd=self.board.faults.state("old-adbd") is not None)
        await self.send(Message(A_CNXN, self.version, protocol.DEVICE_MAXDATA, banner))

    async def _auth(self, message: Message) -> None:
        """The host's answer to AUTH: a signature a trusted key made brings the host online;
        any other, a new token; a public key, silence (a dialog nobody answers). While
        `auth-refused` holds no key is accepted."""
        peer = self.writer.get_extra_info("peername")
        if message.arg0 == AUTH_SIGNATURE:
            refused = self.board.faults.state("auth-refused") is not None
            token, self._token = self._token, b""  # each token answers one signature
            key = None if refused or not token else self.board.authority.accepts(token, message.data)
            if key is not None:
                log.info("host %s authorized by key %s", peer, key.describe())
                self._failures = 0
                await self._accept_host()
                return
            self._failures += 1
            if self._failures > FAILURES_BEFORE_DELAY:
                await asyncio.sleep(1.0)
            await self._ask_for_key()
        elif message.arg0 == AUTH_RSAPUBLICKEY:
            if self.board.faults.state("auth-refused") is None:
                self.board.authority.offered(message.data, peer)
        else:  # adbd: the transport goes offline
            log.warning("host %s: AUTH type %d: transport offline", peer, message.arg0)
            await self._close_streams()
            self.online = False

    async def _open(self, message: Message) -> None:
        name = message.data.rstrip(b"\0").decode(errors="replace")
        service = self.board.service(name)
        if service is None:
            log.info("refusing unknown service %r", name)
            await self.send(Message(A_CLSE, 0, message.arg0))
            return
        await self.board.link.open_stream()
        with (self.board.device.run_dir / STREAMS_LOG).open("a", encoding="utf-8") as streams:
            streams.write(name.partition(":")[0] + "\n")
        local_id = next(self._ids)
        stream = Stream(self, local_id, message.arg0)
        self._streams[local_id] = stream
        await self.send(Message(A_OKAY, local_id, message.arg0))
        log.debug("stream %d: %s", local_id, name)
        self._tasks[local_id] = asyncio.create_task(self._serve(stream, service, name))

    async def _serve(self, stream: Stream, service: Service, name: str) -> None:
        try:
            await service(stream)
            await stream.flush()  # its last writes before the CLSE
        except (StreamClosed, ConnectionError):
            log.debug("stream %d (%s): host went away", stream.local_id, name)
        except Exception:
            log.exception("stream %d (%s) failed", stream.local_id, name)
        finally:
            self._tasks.pop(stream.local_id, None)
            self._streams.pop(stream.local_id, None)
            if not stream.closed:
                stream.on_close()
                with contextlib.suppress(StreamClosed, ConnectionError):
                    await self.send(Message(A_CLSE, stream.local_id, stream.remote_id))

    async def _host_closed(self, local_id: int) -> None:
        stream = self._streams.pop(local_id, None)
        if stream is None:
            return
        stream.on_close()
        task = self._tasks.pop(local_id, None)
        if task is not None:
            task.cancel()
        await self.send(Message(A_CLSE, stream.local_id, stream.remote_id))

    async def _close_streams(self) -> None:
        for stream in self._streams.values():
            stream.on_close()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._streams.clear()
        self._tasks.clear()
