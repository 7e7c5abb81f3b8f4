"""A hostile board: what a tampered or broken board could send hil, on demand, to test that
none of it becomes a workflow command (`hil/workflow_safe.py`), a file outside a pull's
destination (`hil/devicefarm/holder.py`) or an unbounded buffer (`hil/board/limits.py`).

| fault | the board | kind |
|---|---|---|
| `forge-command` | `uname` adds a line `::warning title=forged::...` to its answer | state |
| `list-escape` | its sync LIST of any folder names an entry `../../escaped.txt`, and RECV serves it | state |
| `flood` | a runner exec writes `bytes` (default 1G) of output before it ends | runner (exec) |
| `endless-line` | a runner exec starts a UART line of `bytes` (default 1G) with no newline | runner (exec) |

`bytes` takes K, M and G (powers of 1024). The flood and the line stop early when nobody
takes them any more (the runner's shell is gone; the fault is cleared; the board stops).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable

FORGED_LINE = "::warning title=forged::a board wrote this line"
"""What `forge-command` adds to `uname`'s answer (a workflow command, if it got through)."""
FORGE_PROPERTY = "hil.fault.forge"
"""The property the `uname` stub reads (`1` while `forge-command` holds)."""
ESCAPE_NAME = "../../escaped.txt"
"""The entry `list-escape` adds to every LIST: a name leading two folders up."""
ESCAPE_DATA = b"written by a hostile board\n"
CHUNK = 64 * 1024
DEFAULT_BYTES = 1 << 30
_SIZE = re.compile(r"^(\d+)([KMG]?)$")
_DENT_V1 = struct.Struct("<4sIIII")
_DENT_V2 = struct.Struct("<4sIQQIIIIQqqqI")


def parse_size(text: str) -> int:
    """`1G`, `64K`, `1000`: a byte count; ValueError otherwise."""
    match = _SIZE.match(text.strip().upper())
    if match is None:
        raise ValueError(f"{text!r} is not a size (N, NK, NM or NG)")
    return int(match.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2)]


def escape_entry(v2: bool) -> bytes:
    """`list-escape`'s LIST record: a regular file named ESCAPE_NAME (LIST or LIS2 form)."""
    name = ESCAPE_NAME.encode()
    mode = 0o100644
    if v2:
        return _DENT_V2.pack(b"DNT2", 0, 0, 0, mode, 1, 0, 0, len(ESCAPE_DATA), 0, 0, 0, len(name)) + name
    return _DENT_V1.pack(b"DENT", mode, len(ESCAPE_DATA), 0, len(name)) + name


def escape_reply() -> bytes:
    """RECV's answer for the escaping entry: its data, then DONE."""
    return b"DATA" + struct.pack("<I", len(ESCAPE_DATA)) + ESCAPE_DATA + b"DONE" + bytes(4)


def is_escape(path: str) -> bool:
    """A RECV of the entry `list-escape` listed (in any folder)."""
    return path == ESCAPE_NAME or path.endswith("/" + ESCAPE_NAME)


def flood(emit: Callable[[int, bytes], None], total: int, stopped: Callable[[], bool]) -> int:
    """Write `total` bytes of output (stdout, kind 1) through `emit`, a chunk at a time, until
    `stopped()`; the bytes written."""
    chunk = b"flood " * (CHUNK // 6)
    sent = 0
    while sent < total and not stopped():
        piece = chunk[: total - sent]
        emit(1, piece)
        sent += len(piece)
    return sent
