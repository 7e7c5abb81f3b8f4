"""One adb stream of the virtual board: flow-controlled writes, acknowledged reads.

Shared by the transport (`transport.py`) and the services (`sync.py`, `shell.py`), which import it
and not each other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from hil.virtual.protocol import A_OKAY, A_WRTE, Message


class StreamClosed(Exception):
    """The host closed the stream (or the transport) while a service was writing."""


class Sender(Protocol):
    """What a stream needs of its transport."""

    maxdata: int
    """The largest WRTE payload both sides accept."""

    async def send(self, message: Message) -> None:
        """Write one message to the host."""
        ...


class Stream:
    """One adb stream: flow-controlled writes, acknowledged reads."""

    def __init__(self, transport: Sender, local_id: int, remote_id: int) -> None:
        self.transport = transport
        self.local_id = local_id
        self.remote_id = remote_id
        self.closed = False
        self._inbox: asyncio.Queue[bytes] = asyncio.Queue()
        self._buffer = bytearray()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._write_lock = asyncio.Lock()

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
        """Send `data` in WRTEs of at most maxdata bytes, each after the host's OKAY."""
        async with self._write_lock:
            for offset in range(0, len(data), self.maxdata):
                await self._can_write.wait()
                if self.closed:
                    raise StreamClosed
                self._can_write.clear()
                chunk = data[offset : offset + self.maxdata]
                await self.transport.send(Message(A_WRTE, self.local_id, self.remote_id, chunk))

    async def write_records(self, records: Iterable[bytes]) -> None:
        """Send records packed into as few WRTEs as possible, never splitting a record
        that fits in one (adbutils reads sync replies with bare `recv`)."""
        batch = bytearray()
        for record in records:
            if batch and len(batch) + len(record) > self.maxdata:
                await self.write(bytes(batch))
                batch.clear()
            batch += record
        if batch:
            await self.write(bytes(batch))


Service = Callable[[Stream], Awaitable[None]]
