"""Third-party output off the console while a run runs.

torch, torchao and executorch write to stderr while they lower: Python warnings, their own
logging handlers (torch's `W1130 ... _pytree.py ... KernelPreference` deprecation line from
every lowering worker), C++ prints. On a terminal those lines break the progress bars; in CI
they bury hil's own lines. `third_party_to_file(PATH)` sends, for the length of a run:

- file descriptor 2 of hil's process to PATH: C++ writes and every handler that holds
  `sys.stderr` (torch's) land there, and every child inherits it (the lowering workers,
  the adb server, the virtual boards, whose own logs go to their folders anyway);
- Python warnings (`logging.captureWarnings`) and records of loggers outside `hil` to PATH;
- hil's own log records to the real stderr, as before; hil's own status lines too, written
  to `hil_stderr()` (inside the block, `sys.stderr` is the file's).

On exit everything is put back, also after an interrupt.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

FILE_NAME = "third-party.log"
"""Its name in the run's output folder."""
_CONSOLES: list[TextIO] = []
"""The real stderr of each `third_party_to_file` block open now, innermost last."""


def hil_stderr() -> TextIO:
    """Where hil's own status lines go: the real stderr, also inside `third_party_to_file`."""
    return _CONSOLES[-1] if _CONSOLES else sys.stderr


class _HilRecords(logging.Filter):
    """Passes hil's own records (logger `hil` and below), or everything else when inverted."""

    def __init__(self, hil: bool) -> None:
        super().__init__()
        self.hil = hil

    def filter(self, record: logging.LogRecord) -> bool:
        own = record.name == "hil" or record.name.startswith("hil.")
        return own == self.hil


@contextlib.contextmanager
def third_party_to_file(path: Path) -> Iterator[TextIO]:
    """Redirect third-party output to `path` (appended) inside the block; yields the real
    stderr for hil's own lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    console = os.fdopen(os.dup(saved), "w", buffering=1, encoding="utf-8", errors="replace")
    sink = path.open("ab", buffering=0)  # O_APPEND: shared with `records` below
    os.dup2(sink.fileno(), 2)
    root = logging.getLogger()
    moved: list[tuple[logging.StreamHandler, TextIO]] = []
    console_filter, file_filter = _HilRecords(hil=True), _HilRecords(hil=False)
    for handler in root.handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            moved.append((handler, handler.setStream(console)))
            handler.addFilter(console_filter)
    records = path.open("a", encoding="utf-8", errors="replace", buffering=1)
    file_handler = logging.StreamHandler(records)
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    file_handler.addFilter(file_filter)
    root.addHandler(file_handler)
    logging.captureWarnings(True)
    _CONSOLES.append(console)
    try:
        yield console
    finally:
        _CONSOLES.remove(console)
        logging.captureWarnings(False)
        root.removeHandler(file_handler)
        for handler, stream in moved:
            handler.removeFilter(console_filter)
            handler.setStream(stream)
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        records.close()
        sink.close()
        console.close()
