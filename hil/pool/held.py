"""One board held for a caller that has no queue of its own: `devicefarm-cli`'s holder and the
pytest plugin's `hil_board`. A second dispatcher over the board pool (the run's scheduler is
the first): its jobs are calls made from other threads, run on the board's own thread.

```
held_sources(inventory, spec, labgrid): a --board spec's source(s), one board
HeldBoard(sources, options) ─ enter ─► BoardPool: lease, bring-up (waiting)
   ─► live (assigned): call(fn) from any thread ─► fn(board) on the board's thread
        fn raises InfraError ─► the caller gets it, the pool climbs its recovery ladder
   ─► release() or exit: the board thread ends, the pool gives everything back
   bring-up failed, quarantined for good: unavailable, with the reason
```

Leases, recovery and quarantine stay the pool's (hil/pool/pool.py); this room only queues
calls and says which of `waiting`, `assigned` and `unavailable` the board is in.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from hil.board.adb import AdbBoard
from hil.errors import InfraError, UsageError
from hil.interrupts import Stop, wait_until
from hil.pids import pid_alive
from hil.pool.bringup import PoolOptions
from hil.pool.pool import BoardPool
from hil.pool.sources import BoardSource

log = logging.getLogger(__name__)

T = TypeVar("T")

WAITING, ASSIGNED, UNAVAILABLE = "waiting", "assigned", "unavailable"
"""The states of a held board (what `devicefarm-cli -C` prints)."""
GIVE_BACK_S = 10.0
"""On exit, how long the board thread gets to clean the board up before the pool stops."""


class CallCancelled(Exception):
    """The caller went away before its call's turn: it was dropped from the queue."""


@dataclass
class _Call(Generic[T]):
    """One call waiting for the board's thread."""

    fn: Callable[[AdbBoard], T]
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None


def held_sources(inventory: str | None, spec: str, labgrid: str | None) -> list[BoardSource]:
    """The source(s) of the one board `spec` names, as `hil run --board SPEC` reads it (with
    `inventory` and the labgrid coordinator `labgrid`, else LG_COORDINATOR, for `labgrid:`
    specs and inventory places). UsageError unless exactly one board is named."""
    from hil.pool.labgrid import board_sources
    from hil.pool.sources import StaticSource

    entries, places = board_sources(inventory, [spec], labgrid)
    count = len(entries) + sum(request.count for source in places for request in source.requests)
    if count != 1:
        raise UsageError(f"{spec} names {count} boards; one is held")
    return [*([StaticSource(entries)] if entries else []), *places]


class HeldBoard:
    """The one board of `sources`, held from `__enter__` to `release()`/exit."""

    def __init__(self, sources: list[BoardSource], options: PoolOptions, stop: Stop | None = None) -> None:
        self.stop = stop or Stop()
        self.pool = BoardPool(sources, options, self.stop)
        self.released = threading.Event()
        self._calls: queue.Queue[_Call[Any]] = queue.Queue()
        self._lock = threading.Lock()
        self.last_used = time.monotonic()
        """When the last call finished (a holder ends after a long idle time)."""

    # -- life ---------------------------------------------------------------------------------
    def __enter__(self) -> HeldBoard:
        self.pool.__enter__()
        try:
            self.pool.start(self)
        except BaseException:
            self.pool.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Release, give the board thread GIVE_BACK_S to clean up, then the pool gives back
        the lease, the virtual board and the adb servers."""
        self.release()
        try:
            self.pool.wind_down(GIVE_BACK_S)  # the board thread ends on its own after release
        finally:
            self.pool.__exit__(*exc_info)

    def release(self) -> None:
        """The board is no longer wanted: calls still queued fail, the board thread ends."""
        self.released.set()
        while True:
            try:
                call = self._calls.get_nowait()
            except queue.Empty:
                return
            call.error = InfraError("the board was released")
            call.done.set()

    # -- what callers ask ---------------------------------------------------------------------
    def state(self) -> tuple[str, str]:
        """(`waiting`, why) / (`assigned`, board name) / (`unavailable`, why)."""
        if self.released.is_set():
            return UNAVAILABLE, "released"
        live = self.pool.live_names()
        if live:
            return ASSIGNED, sorted(live)[0]
        if not self.pool.settled.is_set():
            return WAITING, self._starting()
        if self.pool.any_left() or not self.pool.finished():
            return WAITING, "the board is in recovery (quarantined, health check pending)"
        errors = [record["error"] for record in self.pool.records if record.get("error")]
        quarantined = [record["quarantined"] for record in self.pool.records if record.get("quarantined")]
        return UNAVAILABLE, "; ".join(errors + quarantined) or "no usable board"

    def _starting(self) -> str:
        """Why the board is not up yet: another live process holds its lease, or its bring-up."""
        from hil.board.lease import holder_of

        for entry in self.pool.entries:
            if entry.virtual:
                continue
            holder = holder_of(self.pool.servers.lease_key(entry))
            if holder is not None and holder.pid != os.getpid() and pid_alive(holder.pid):
                return (f"for {entry.name}: held by {holder.describe()}; up to "
                        f"{self.pool.options.board_wait_s:g} s")
        names = ", ".join(entry.name for entry in self.pool.entries) or "the board"
        return f"bringing up {names}"

    def wait_settled(self, seconds: float | None = None) -> tuple[str, str]:
        """Wait until the board came up or failed to (or the stop); the state then."""
        wait_until(self.pool.settled, self.stop, seconds)
        return self.state()

    def call(self, fn: Callable[[AdbBoard], T], cancelled: threading.Event | None = None) -> T:
        """`fn(board)` on the board's thread; its result, or what it raised. InfraError when
        there is no board to run it on (never came up, quarantined for good, released);
        CallCancelled when `cancelled` is set while the call still waits for its turn (a call
        already running is `fn`'s to end)."""
        kind, why = self.state()
        if kind == UNAVAILABLE:
            raise InfraError(f"no board: {why}")
        job: _Call[T] = _Call(fn)
        self._calls.put(job)
        while not job.done.wait(0.2):
            if cancelled is not None and cancelled.is_set() and self._forget(job):
                raise CallCancelled("the caller went away before its turn")
            kind, why = self.state()
            if kind == UNAVAILABLE or self.stop.is_set():
                self._forget(job)
                if job.done.is_set():
                    break
                raise InfraError(f"no board: {why if kind == UNAVAILABLE else 'stopping'}")
        self.last_used = time.monotonic()
        if job.error is not None:
            raise job.error
        return job.result  # type: ignore[no-any-return]

    def _forget(self, job: _Call[Any]) -> bool:
        """Take `job` out of the queue; whether it was still there (not yet taken)."""
        found = False
        with self._lock:
            kept = []
            while True:
                try:
                    other = self._calls.get_nowait()
                except queue.Empty:
                    break
                if other is not job:
                    kept.append(other)
                else:
                    found = True
            for other in kept:
                self._calls.put(other)
        return found

    # -- the pool's dispatcher (hil/pool/pool.py) ------------------------------------------------
    def next_job(self, board: str) -> _Call[Any] | None:
        while not (self.stop.is_set() or self.released.is_set()):
            try:
                return self._calls.get(timeout=0.2)
            except queue.Empty:
                continue
        return None

    def run_job(self, board: AdbBoard, job: _Call[Any]) -> InfraError | None:
        try:
            job.result = job.fn(board)
        except InfraError as exc:
            job.error = exc
            return exc
        except Exception as exc:  # noqa: BLE001 - the caller's to handle, not the board's
            job.error = exc
        finally:
            job.done.set()
        return None

    def has_work(self) -> bool:
        return not self.released.is_set()
