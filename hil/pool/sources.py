"""Where boards come from: a board source turns what the user named into inventory entries,
and gives back whatever it holds at the end. The pool (hil/pool/pool.py) does the rest.

```
--board SPEC...  ─┐
--inventory FILE ─┼─► BoardSource.open() ─► [InventoryEntry, ...] ─► BoardPool
(next: labgrid)  ─┘         close() at the end: release what the source reserved
```

Today's one source reads the command line and the inventory (one host; each board's lease is
the pool's `flock`). A lab engine's source (labgrid places reserved by tags across hosts)
plugs in here: it only has to produce entries. (A board held for `devicefarm-cli` or the
pytest plugin is this source's one entry served by another dispatcher: hil/pool/held.py.)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from hil.board.inventory import InventoryEntry, load_inventory, select_boards
from hil.interrupts import Stop


class BoardSource(Protocol):
    """Produces the entries of the boards a run, `hil boards` or a holder may use."""

    def describe(self) -> str:
        """One line for messages: where the boards come from."""
        ...

    def open(self, wait_s: float, stop: Stop) -> list[InventoryEntry]:
        """The entries, once any reservation of the source is granted (up to `wait_s`,
        sooner when `stop` is set). InfraError when none can be had; UsageError for bad input."""
        ...

    def close(self) -> None:
        """Give back whatever `open` reserved (nothing for the command line)."""
        ...


class StaticSource:
    """Boards known up front: `--inventory FILE` narrowed by `--board` values that name its
    entries, plus `--board` specs of their own (`virtual`, `virtual:N`, a serial,
    `HOST:PORT[@SERVER]`); without either, one virtual board. Nothing to reserve or give back."""

    def __init__(self, entries: Sequence[InventoryEntry]) -> None:
        self.entries = list(entries)

    @classmethod
    def from_args(cls, inventory_path: str | None, board_args: Sequence[str]) -> StaticSource:
        """The source of `--inventory` (a path or None) and `--board` values, checked at once:
        bad input is a usage error before anything starts (hil.board.inventory.select_boards)."""
        inventory = load_inventory(Path(inventory_path)) if inventory_path else []
        return cls(select_boards(inventory, board_args))

    def describe(self) -> str:
        return ", ".join(entry.name for entry in self.entries)

    def open(self, wait_s: float, stop: Stop) -> list[InventoryEntry]:
        return list(self.entries)

    def close(self) -> None:
        return None
