"""The capacity a run lost to recovery: board-seconds its boards spent out of the run.

```
board up ──► in the run ──infrastructure error──► out (recovery ladder, quarantine, probation,
   │                ▲                                   │         out for good: until the end)
   │                └──────── back (ladder or health check passed) ◄┘
   └── its time counts from here to the run's end (`figures`)
```

A board counts from the moment it came up; the run's boards that never came up are not
capacity (their records say why). Time a board waits for a job (the drain at the end) is in
the run: it is idle, not out. Read into results.json as `run.capacity_lost` and each board
record's `board_seconds_out`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


class CapacityLedger:
    """Per board: since when it counts, the seconds it has been out, and since when it is out
    now (if it is); thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._since: dict[str, float] = {}
        self._out_s: dict[str, float] = {}
        self._out_since: dict[str, float] = {}

    def joined(self, name: str) -> None:
        """The board came up: its time counts from now."""
        with self._lock:
            self._since.setdefault(name, self._clock())
            self._out_s.setdefault(name, 0.0)

    def out(self, name: str) -> None:
        """The board left the run (recovery started, quarantine); a board already out stays so."""
        with self._lock:
            if name in self._since:
                self._out_since.setdefault(name, self._clock())

    def back(self, name: str) -> None:
        """The board is in the run again."""
        with self._lock:
            started = self._out_since.pop(name, None)
            if started is not None:
                self._out_s[name] += self._clock() - started

    def board_seconds_out(self) -> dict[str, float]:
        """Each board's seconds out of the run until now (a board out now: until now)."""
        return self.snapshot()[0]

    def figures(self) -> dict[str, Any]:
        """`run.capacity_lost` until now: board-seconds out of the run, board-seconds of the
        run (every board that came up, from then until now) and their ratio."""
        return self.snapshot()[1]

    def snapshot(self) -> tuple[dict[str, float], dict[str, Any]]:
        """`board_seconds_out` and `figures` at one moment (they agree)."""
        with self._lock:
            now = self._clock()
            out = {name: spent + (now - self._out_since[name] if name in self._out_since else 0.0)
                   for name, spent in self._out_s.items()}
            total = sum(now - since for since in self._since.values())
        spent = min(sum(out.values()), total)
        return ({name: round(seconds, 3) for name, seconds in out.items()},
                {"board_seconds_out": round(spent, 3), "board_seconds": round(total, 3),
                 "fraction": round(spent / total, 4) if total > 0 else 0.0})
