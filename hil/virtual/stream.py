"""One adb stream of the virtual board: flow-controlled writes, acknowledged reads.

Shared by the transport (`transport.py`) and the services (`sync.py`, `shell.py`), which import it
and not each other.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable
from typing import Protocol

from hil.adbwire import A_OKAY, A_WRTE, Message


class StreamClosed(Exception):
    """The host closed the stream (or the transport) while a service was writing."""


class Sender(Protocol):
    """What a stream needs of its transport."""

    maxdata: int
    """The largest WRTE payload both sides accept."""

    async def send(self, message: Message) -> None:
        """Write one message to the host."""
        ...


SOCKET_BUFFER = 256 * 1024
"""Bytes a service may have written that the host has not yet been sent (adbd's service
writes into a local socket; beyond its buffer the service's write blocks)."""


class Stream:
    """One adb stream: flow-controlled writes, acknowledged reads.

    A service's writes are queued, and sent by one task per stream: a WRTE, then nothing
    until the host's OKAY; whatever was written meanwhile goes out together in the next WRTE
    (at most maxdata bytes, never splitting a write that fits in one). So does adbd: its
    transport reads the service's local socket only after the OKAY, taking everything written
    by then (`local_socket_event_func` in `adb/sockets.cpp`), so a run of small replies (the
    OKAY of each pushed file, a shell's short lines) costs one packet and one OKAY, not one
    each."""

    def __init__(self, transport: Sender, local_id: int, remote_id: int) -> None:
        self.transport = transport
        self.local_id = local_id
        self.remote_id = remote_id
        self.closed = False
        self._inbox: asyncio.Queue[bytes] = asyncio.Queue()
        self._buffer = bytearray()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._out: collections.deque[bytes] = collections.deque()
        self._out_bytes = 0
        self._room = asyncio.Event()
        self._room.set()
        self._sender: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None

    @property
    def maxdata(self) -> int:
        """The largest WRTE payload both sides accept."""
        return self.transport.maxdata

    def on_okay(self) -> None:
        self._can_write.set()

    def on_write(self, data: bytes) -> None:
        self._inbox.put_nowait(data)

    def on_close(self) -> None:
        self.closed = True
        self._can_write.set()
        if self._sender is not None:
            self._sender.cancel()

    async def recv(self) -> bytes:
        """The next WRTE payload from the host, acknowledged once taken."""
        data = await self._inbox.get()
        await self.transport.send(Message(A_OKAY, self.local_id, self.remote_id))
        return data

    async def readexactly(self, size: int) -> bytes:
        """Exactly `size` bytes of the host's data, across WRTE boundaries."""
        while len(self._buffer) < size:
            self._buffer += await self.recv()
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    async def write(self, data: bytes) -> None:
        """Queue `data` for the host (waiting while SOCKET_BUFFER bytes are queued);
        StreamClosed once the host closed the stream or a send failed. A write that fits in
        one WRTE is never split (adbutils reads sync replies with bare `recv`)."""
        while True:
            self._raise_failure()
            if self._out_bytes < SOCKET_BUFFER:
                break
            self._room.clear()
            await self._room.wait()
        if data:
            self._out.append(data)
            self._out_bytes += len(data)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send_queued())

    async def flush(self) -> None:
        """Wait until everything written has been sent (StreamClosed if it cannot be)."""
        sender = self._sender
        if sender is not None:
            await asyncio.wait([sender])
        self._raise_failure()

    def _raise_failure(self) -> None:
        if self.closed:
            raise StreamClosed
        if self._failure is not None:
            raise StreamClosed from self._failure

    async def _send_queued(self) -> None:
        try:
            while self._out:
                await self._can_write.wait()
                if self.closed:
                    raise StreamClosed
                self._can_write.clear()
                chunk = self._take(self.maxdata)
                await self.transport.send(Message(A_WRTE, self.local_id, self.remote_id, chunk))
                self._room.set()
        except (StreamClosed, ConnectionError) as exc:
            self._failure = exc
        finally:
            self._room.set()

    def _take(self, limit: int) -> bytes:
        """The queued writes that fit in `limit` bytes, whole; else the first one's head."""
        chunk = bytearray()
        while self._out and len(chunk) + len(self._out[0]) <= limit:
            chunk += self._out.popleft()
        if not chunk:
            head = self._out[0]
            chunk += head[:limit]
            self._out[0] = head[limit:]
        self._out_bytes -= len(chunk)
        return bytes(chunk)


Service = Callable[[Stream], Awaitable[None]]
