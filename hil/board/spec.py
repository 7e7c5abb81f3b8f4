"""`--board` specifications: `virtual`, `virtual:N`, an adb serial, or `HOST:PORT`, each of
the last two optionally `@SERVER_HOST:SERVER_PORT` (the lab adb server that owns the board)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hil.adbaddress import parse_server
from hil.errors import UsageError

MAX_VIRTUAL_BOARDS = 16
_SERIAL = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_HOST_PORT = re.compile(r"^([A-Za-z0-9.-]{1,253}):(\d{1,5})$")


@dataclass(frozen=True)
class BoardSpec:
    """One board to use: started by hil (virtual) or reached through adb."""

    virtual: bool
    """True for a virtual board that hil starts and stops itself."""
    adb: str = ""
    """adb serial or `host:port` (empty for a virtual board, known once started)."""
    adb_server: str | None = None
    """`HOST:PORT` of the adb server that owns the board (`SERIAL@HOST:PORT`); None: default."""

    @property
    def network(self) -> bool:
        """Reached with `adb connect` (`host:port`) rather than over USB."""
        return bool(_HOST_PORT.match(self.adb))


def parse_boards(texts: Sequence[str]) -> list[BoardSpec]:
    """Parse every `--board` value; default: one virtual board."""
    specs: list[BoardSpec] = []
    for text in texts or ["virtual"]:
        if text == "virtual" or text.startswith("virtual:"):
            count_text = text.partition(":")[2] or "1"
            if not count_text.isdigit() or not 1 <= int(count_text) <= MAX_VIRTUAL_BOARDS:
                raise UsageError(
                    f"--board: {text!r}: expected virtual or virtual:N with 1 <= N <= "
                    f"{MAX_VIRTUAL_BOARDS}"
                )
            specs.extend(BoardSpec(virtual=True) for _ in range(int(count_text)))
            continue
        board, at, server = text.partition("@")
        if at:
            server = parse_server(server, f"--board {text!r}")
        match = _HOST_PORT.match(board)
        if match:
            if not 1 <= int(match.group(2)) <= 65535:
                raise UsageError(f"--board: {text!r}: port out of range")
            specs.append(BoardSpec(virtual=False, adb=board, adb_server=server or None))
        elif _SERIAL.match(board):
            specs.append(BoardSpec(virtual=False, adb=board, adb_server=server or None))
        else:
            raise UsageError(
                f"--board: {text!r} is not virtual, virtual:N, an adb serial or HOST:PORT "
                "(either optionally @SERVER_HOST:PORT)"
            )
    adb_ids = [(s.adb, s.adb_server) for s in specs if s.adb]
    if len(set(adb_ids)) != len(adb_ids):
        raise UsageError("--board: the same board is named twice")
    return specs
