"""Stopping a run from outside (SIGTERM from CI, SIGINT from a terminal): the handlers only
record the signal; the main thread notices it where it waits, and the run ends on its own terms.

Why nothing more: on CPython 3.10-3.12 an exception raised by a signal handler while the main
thread waits in `Thread.join(timeout)` marks the still-running thread as stopped
(python/cpython#90882, fixed in 3.13). hil used to raise KeyboardInterrupt from its SIGTERM
handler while joining the board threads: the join returned at once, the private adb server
stopped, and the board threads' cleanup (removing the run's folder from the board) failed. An
exception raised while a lock is held can leave it taken, and even `Event.set()` in a handler can
deadlock (the handler runs in the main thread, which may hold that Event's own lock). So the
handler stores the signal number in a plain attribute; `Stop.is_set()`, called in ordinary code,
turns it into the Event that every thread waits on.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

POLL_S = 0.2
"""How often a waiting thread looks at the stop flag."""


class Stop:
    """A run's stop: requested by a signal (`StopSignals`) or by code (`set`). Threads wait on
    `event`; `is_set()` is what they check."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int | None = None
        """The first signal received, or None."""

    def set(self) -> None:
        self.event.set()

    def is_set(self) -> bool:
        if self.signum is not None and not self.event.is_set():
            self.event.set()  # here, never in the handler (see the module docstring)
        return self.event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True as soon as the stop is set."""
        deadline = time.monotonic() + seconds
        while not self.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.event.wait(min(POLL_S, left))
        return True


class StopWhen(Stop):
    """A stop that is also set once `condition()` holds (looked at by `is_set`): the lowering's,
    which ends with the run's stop or once no board is left to run what it lowers."""

    def __init__(self, stop: Stop, condition: Callable[[], bool]) -> None:
        super().__init__()
        self._stop = stop
        self._condition = condition

    def is_set(self) -> bool:
        if not self.event.is_set() and (self._stop.is_set() or self._condition()):
            self.event.set()
        return self.event.is_set()


class StopSignals:
    """SIGTERM and SIGINT request `stop` while this is entered (in the main thread); the previous
    handlers come back on exit."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, stop: Stop) -> None:
        self.stop = stop
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.stop.signum is None:
            self.stop.signum = signum  # nothing else: see the module docstring

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()


def wait_until(event: threading.Event, stop: Stop, seconds: float | None = None) -> bool:
    """Wait for `event`: True once it is set; False when `stop` is set first or `seconds` pass."""
    deadline = None if seconds is None else time.monotonic() + seconds
    while not event.is_set():
        if stop.is_set():
            return False
        left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
        if left <= 0:
            return False
        event.wait(left)
    return True


def wait_all(events: list[threading.Event], seconds: float) -> bool:
    """Wait for every event, all within `seconds` in total (a grace period after a stop).
    True when all were set."""
    deadline = time.monotonic() + seconds
    return all(event.wait(max(0.0, deadline - time.monotonic())) for event in events)
