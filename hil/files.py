"""Whole files read with the fewest system calls.

`Path.read_bytes()` makes eight for a small file (open, two fstat, an isatty ioctl, lseek,
two reads, close) and releases the GIL at each; a case read about ten files (its cache
entry's checksums, its push, its references), a measurable share of hil's CPU per case on
16 boards (scripts/bench_boards.py). `read_file` makes four: open, read, the read that finds
the end, close.
"""

from __future__ import annotations

import os
from pathlib import Path

_READ_SIZE = 1 << 20


def read_file(path: Path | str) -> bytes:
    """The whole content of `path` (OSError as `open` raises it)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        first = os.read(fd, _READ_SIZE)
        if not first:
            return first
        rest = [first]
        while chunk := os.read(fd, _READ_SIZE):
            rest.append(chunk)
        return first if len(rest) == 1 else b"".join(rest)
    finally:
        os.close(fd)
