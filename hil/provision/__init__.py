"""Provisioning: put a board's known-good build on it (`hil flash`, `hil run --provision`, the
recovery ladder's REFLASH rung).

```
inventory (hil/board/images.py: images, flash_order, expected_build, product, fastboot)
   ─► Provisioner (flasher.py: the named steps) ─► Flasher (fastboot.py: Debian's fastboot)
   ─► the flash's record: results.json run.boards[].flashes[], run.boards[].build
```
"""

from __future__ import annotations

from typing import Any

from hil.board.images import Provisioning
from hil.provision.flasher import (
    FLASH_TIMEOUT_S,
    Flasher,
    Provisioner,
    flasher_for,
    needs_flash,
    read_build,
)

__all__ = ["FLASH_TIMEOUT_S", "Flasher", "Provisioner", "build_record", "flasher_for",
           "needs_flash", "read_build"]


def build_record(provisioning: Provisioning, before: str | None, after: str | None) -> dict[str, Any]:
    """results.json `run.boards[].build`: the expected build and what the board ran before and
    after provisioning (`differed`: before was not the expected one)."""
    prop, value = provisioning.expected_build or (None, None)
    return {"property": prop, "expected": value, "before": before, "after": after,
            "differed": value is not None and before != value}
