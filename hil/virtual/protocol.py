"""The virtual board's side of the adb handshake: the version and payload size its adbd
offers in CNXN, and what it settles on with a host. The framing itself is `hil/adbwire.py`."""

from __future__ import annotations

from hil.adbwire import VERSION_SKIP_CHECKSUM

DEVICE_VERSION = VERSION_SKIP_CHECKSUM
"""What the board's adbd speaks: Android 9 and later (no data checksums)."""
DEVICE_MAXDATA = 1024 * 1024
"""The largest payload the virtual board accepts and offers in its CNXN."""


def negotiate(host_version: int, host_maxdata: int) -> tuple[int, int]:
    """The (version, maxdata) both sides use: the lower of each."""
    return min(host_version, DEVICE_VERSION), min(host_maxdata, DEVICE_MAXDATA)
