"""Link shaping for the virtual board: bandwidth and per-message latency like a USB cable.

Loopback TCP moves hundreds of MB/s with no latency, which would make every timing figure
meaningless. The shaper charges each message its transfer time on a direction's link and
each new stream a service start-up, serialised per direction like one USB cable:

| link | bandwidth each way | per message | per stream open |
|---|---|---|---|
| none | unlimited | 0 | 0 |
| usb2 | 35 MB/s | 0.125 ms | 2.0 ms |
| usb3 | 180 MB/s | 0.0625 ms | 1.0 ms |

Why: adb push on USB 2.0 high-speed boards measures 30-40 MB/s; 0.125 ms is one USB 2.0
microframe; 2 ms stands for adbd starting a service (fork, socket pair). adb on USB 3
measures 100-250 MB/s (adbd, not the bus, is the limit) with shorter turnarounds. `none` is
for the fastest feedback in tests.

Delays below a millisecond accumulate as debt and are slept in one go, so the totals are
right even though the event loop cannot sleep for 125 µs.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class LinkProfile:
    """The numbers of one link kind."""

    bytes_per_s: float | None
    """Bandwidth each way; None for unlimited."""
    message_s: float
    """Latency charged per adb message."""
    open_s: float
    """Latency charged per new stream (a service round trip)."""


LINKS: dict[str, LinkProfile] = {
    "none": LinkProfile(None, 0.0, 0.0),
    "usb2": LinkProfile(35e6, 0.000125, 0.002),
    "usb3": LinkProfile(180e6, 0.0000625, 0.001),
}


class _Direction:
    """One direction of the cable: transfers queue behind each other."""

    def __init__(self) -> None:
        self.free_at = 0.0

    async def occupy(self, seconds: float) -> None:
        if seconds <= 0:
            return
        now = time.monotonic()
        self.free_at = max(self.free_at, now) + seconds
        delay = self.free_at - now
        if delay >= 0.001:
            await asyncio.sleep(delay)


class Link:
    """Shapes one virtual board's traffic according to a LinkProfile."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.profile = LINKS[kind]
        self._up = _Direction()
        self._down = _Direction()

    def _cost(self, nbytes: int) -> float:
        bandwidth = self.profile.bytes_per_s
        return self.profile.message_s + (nbytes / bandwidth if bandwidth else 0.0)

    async def to_host(self, nbytes: int) -> None:
        """Charge a message of `nbytes` from the board to the host."""
        await self._down.occupy(self._cost(nbytes))

    async def from_host(self, nbytes: int) -> None:
        """Charge a message of `nbytes` from the host to the board."""
        await self._up.occupy(self._cost(nbytes))

    async def open_stream(self) -> None:
        """Charge the start of a service (one per OPEN)."""
        await self._down.occupy(self.profile.open_s)
