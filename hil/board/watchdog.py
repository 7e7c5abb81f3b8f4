"""Time limits on board operations that adbutils cannot bound by itself.

adbutils' `timeout=` is an idle timeout of one socket read, and a frozen board keeps its
TCP link (and its `device` state) up, so every call to a board goes through one of two
guards here:

- `bounded(fn, limit)` for short operations: the answer within `limit` seconds or
  `BoardSilent`.
- `Watch(alive, idle_s, deadline_s, on_deadline)` for a runner, which may stay silent for
  minutes, its shell read in the caller's own thread, which asks `poll()` between two
  waits for output, and tells `heard()` when some arrived: while it runs silent, `alive()`
  probes the board on the side; no output and no successful probe for `idle_s` means the
  board froze (`BoardSilent`), and at `deadline_s`
  `on_deadline()` kills the runner (a timeout of the model, not of the board). The kill runs
  on the side too: a board that froze at the deadline is still found silent after `idle_s`,
  not after the kill's own time limit.

A bounded call that overruns is abandoned in its daemon thread; it ends when its socket
times out or when recovery drops the board's connection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from hil.errors import InfraError

T = TypeVar("T")

PROBE_AFTER_S = 1.0
"""A supervised call this old gets liveness probes (shorter ones never pay for them)."""
PROBE_EVERY_S = 1.0
"""Seconds between the starts of two probes at the least; with a longer idle limit, a
quarter of it (`probe_interval`): a board is declared silent `idle_s` after its last answer
however often it is asked, and each probe is a connection through the adb server."""
_TICK_S = 0.05
"""The shortest wait between two looks at a supervised call (and the only one while its
kill runs); otherwise `Watch.poll` lets its caller wait until its next probe, deadline or
silence is due."""


class BoardSilent(InfraError):
    """The board did not answer within the idle timeout (frozen, or the link is gone)."""


class _Call(Generic[T]):
    """`fn` running in a daemon thread."""

    def __init__(self, fn: Callable[[], T], name: str) -> None:
        self.done = threading.Event()
        self.value: T | None = None
        self.error: BaseException | None = None
        self._fn = fn
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def _run(self) -> None:
        try:
            self.value = self._fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            self.error = exc
        finally:
            self.done.set()

    def result(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


def bounded(fn: Callable[[], T], limit_s: float, what: str) -> T:
    """`fn()`, or BoardSilent when it has not returned within `limit_s` seconds."""
    call = _Call(fn, f"hil {what}")
    if not call.done.wait(limit_s):
        raise BoardSilent(f"{what}: no answer within {limit_s:g} s")
    return call.result()


def probe_interval(idle_s: float) -> float:
    """Seconds between two liveness probes of a board whose idle limit is `idle_s`."""
    return max(PROBE_EVERY_S, idle_s / 4)


class Watch:
    """The watchdog over one call to a board that the caller makes in its own thread (the
    run shell: `connection.shell_v2`'s `poll`), asked between two waits for the call's
    output: while the call runs, `alive()` (which raises InfraError when the board does not
    answer) probes the board on the side; at `deadline_s`, `on_deadline()` (the runner's
    kill) runs once in a thread of its own, after which the call must end within
    `idle_s`. The call itself needs no thread: before, each case's run shell ran in one,
    and the hand-offs between it and the case's thread were a measurable share of hil's
    CPU per case (scripts/bench_boards.py)."""

    def __init__(
        self,
        alive: Callable[[], None],
        idle_s: float,
        deadline_s: float | None,
        on_deadline: Callable[[], None],
        what: str,
    ) -> None:
        self._alive = alive
        self._idle_s = idle_s
        self._deadline_s = deadline_s
        self._on_deadline = on_deadline
        self._what = what
        self._start = time.monotonic()
        self._every_s = probe_interval(idle_s)
        self._first_s = max(PROBE_AFTER_S, self._every_s)
        self._lock = threading.Lock()
        self._last_alive = self._start
        self._last_heard = self._start
        self._last_error = ""
        self._probe: _Call[None] | None = None
        self._probe_started = 0.0
        self._kill: _Call[None] | None = None
        self._killed_at: float | None = None

    @property
    def deadline_hit(self) -> bool:
        """The deadline passed and `on_deadline` was started."""
        return self._kill is not None

    def _probe_once(self, started: float) -> None:
        try:
            self._alive()
        except InfraError as exc:
            with self._lock:
                self._last_error = str(exc)
            return
        with self._lock:
            self._last_alive = max(self._last_alive, started)

    def heard(self) -> None:
        """The call's output arrived: the board answered now. A board that streams output
        is not probed (each probe is a request through the adb server and a thread of
        hil's); one silent for a probe interval is."""
        now = time.monotonic()
        self._last_heard = now  # the caller's thread only, as `poll`
        with self._lock:
            self._last_alive = max(self._last_alive, now)

    def poll(self) -> float:
        """Act on what is due (the kill at the deadline, a probe), and return the seconds
        the caller may wait for the call's output before it asks again. BoardSilent when no
        probe succeeded for `idle_s`, or the call is still running `idle_s` after its kill;
        the kill's own exception propagates."""
        now = time.monotonic()
        what, idle_s = self._what, self._idle_s
        if self._deadline_s is not None and self._kill is None and now - self._start >= self._deadline_s:
            self._kill = _Call(self._on_deadline, f"hil kill {what}")
        if self._kill is not None and self._killed_at is None and self._kill.done.is_set():
            self._kill.result()  # its exception propagates
            self._killed_at = now
            with self._lock:
                self._last_alive = max(self._last_alive, now)  # on_deadline reached the board
        if self._killed_at is not None and now - self._killed_at > idle_s:
            raise BoardSilent(f"{what}: still running {idle_s:g} s after it was killed")
        with self._lock:
            silent_for = now - self._last_alive
            reason = self._last_error
        if silent_for > idle_s:
            detail = f" (last probe: {reason})" if reason else ""
            raise BoardSilent(f"{what}: the board did not answer for {idle_s:g} s{detail}")
        started = self._start
        quiet_since = max(self._probe_started, self._last_heard)
        due = now - started >= self._first_s and now - quiet_since >= self._every_s
        if due and (self._probe is None or self._probe.done.is_set()):
            self._probe_started = now
            self._probe = _Call(lambda at=now: self._probe_once(at), f"hil probe {what}")
        if self._kill is not None:
            return _TICK_S
        # nothing changes before the next probe, the deadline or the idle limit
        next_probe = max(self._probe_started, self._last_heard) + self._every_s
        events = [max(started + self._first_s, next_probe), now - silent_for + idle_s]
        if self._deadline_s is not None:
            events.append(started + self._deadline_s)
        return min(max(min(events) - now, _TICK_S), self._every_s)
