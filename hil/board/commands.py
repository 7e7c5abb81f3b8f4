"""Device commands and device names: nothing a case or a user supplies reaches a board's
shell unquoted.

A device command is argument lists quoted with `shlex` and chained with `&&` (the only shell
syntax hil uses), and every name hil puts in a device path passes `safe_name`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def safe_name(name: str, what: str) -> str:
    """`name` if it is a plain file name (no '/', no '..', no shell syntax); ValueError
    otherwise. Everything hil creates on a board is named through this."""
    if not _SAFE_NAME.match(name):
        raise ValueError(f"unsafe {what} for a device path: {name!r}")
    return name


def device_command(*argvs: Sequence[str]) -> str:
    """Quote each argument list and chain them with `&&` (the only shell syntax used)."""
    return " && ".join(shlex.join(argv) for argv in argvs)
