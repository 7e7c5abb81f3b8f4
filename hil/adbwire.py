"""adb transport framing: the 24-byte message header, its constants, encode and decode.

A message is six little-endian u32 (command, arg0, arg1, data length, data checksum,
magic = command ^ 0xFFFFFFFF) followed by the data, as AOSP adb defines it: `protocol.txt` (the
message format and the commands), `adb.h` (`struct amessage`), `adb.cpp` and `transport.cpp`
(the checksum and magic a packet is sent with and checked against). Both sides use it: the
virtual board's adbd (`hil/virtual/transport.py`, with its own side of the handshake in
`hil/virtual/protocol.py`) and the recovery ladder's direct look at a network board's adbd
(`hil/board/adbd_probe.py`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

A_CNXN = 0x4E584E43
A_AUTH = 0x48545541
A_OPEN = 0x4E45504F
A_OKAY = 0x59414B4F
A_WRTE = 0x45545257
A_CLSE = 0x45534C43

COMMAND_NAMES = {
    A_CNXN: "CNXN",
    A_AUTH: "AUTH",
    A_OPEN: "OPEN",
    A_OKAY: "OKAY",
    A_WRTE: "WRTE",
    A_CLSE: "CLSE",
}

VERSION_CHECKSUMMED = 0x01000000
"""The original protocol: every message carries the byte sum of its data."""
VERSION_SKIP_CHECKSUM = 0x01000001
"""From Android 9: checksum 0, not checked."""

HEADER = struct.Struct("<6I")
HEADER_SIZE = HEADER.size


class ProtocolError(Exception):
    """The peer sent something that is not an adb message."""


@dataclass(frozen=True)
class Message:
    """One adb transport message."""

    command: int
    arg0: int
    arg1: int
    data: bytes = b""

    @property
    def name(self) -> str:
        """The command's four-letter name, for logs."""
        return COMMAND_NAMES.get(self.command, f"0x{self.command:08x}")


def checksum(data: bytes) -> int:
    """The protocol's data checksum: the byte sum, modulo 2**32."""
    return sum(data) & 0xFFFFFFFF


def encode(message: Message, version: int) -> bytes:
    """Header plus data, with a checksum only when the negotiated version needs one."""
    check = checksum(message.data) if version < VERSION_SKIP_CHECKSUM else 0
    header = HEADER.pack(
        message.command,
        message.arg0,
        message.arg1,
        len(message.data),
        check,
        message.command ^ 0xFFFFFFFF,
    )
    return header + message.data


def decode_header(header: bytes, max_data: int) -> tuple[int, int, int, int]:
    """(command, arg0, arg1, data length) of a header; raises ProtocolError when it is
    malformed or announces more than `max_data` bytes."""
    command, arg0, arg1, length, _check, magic = HEADER.unpack(header)
    if magic != command ^ 0xFFFFFFFF:
        raise ProtocolError(f"bad magic 0x{magic:08x} for command 0x{command:08x}")
    if command not in COMMAND_NAMES:
        raise ProtocolError(f"unknown command 0x{command:08x}")
    if length > max_data:
        raise ProtocolError(f"{COMMAND_NAMES[command]} carries {length} bytes > {max_data}")
    return command, arg0, arg1, length
