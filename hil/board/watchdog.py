"""Time limits on board operations that adbutils cannot bound by itself.

adbutils' `timeout=` is an idle timeout of one socket read, and a frozen board keeps its
TCP link (and its `device` state) up, so every call to a board goes through one of two
guards here:

- `bounded(fn, limit)` for short operations: the answer within `limit` seconds or
  `BoardSilent`.
- `supervise(fn, alive, idle_s, deadline_s, on_deadline)` for a runner, which may stay
  silent for minutes: while it runs, `alive()` probes the board on the side; no successful
  probe for `idle_s` means the board froze (`BoardSilent`), and at `deadline_s`
  `on_deadline()` kills the runner (a timeout of the model, not of the board). The kill runs
  on the side too: a board that froze at the deadline is still found silent after `idle_s`,
  not after the kill's own time limit.

A call that overruns is abandoned in its daemon thread; it ends when its socket times out
or when recovery drops the board's connection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
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
kill runs); otherwise `supervise` sleeps until its next probe, deadline or silence is due."""


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


@dataclass(frozen=True)
class Supervised(Generic[T]):
    """The outcome of a supervised call."""

    value: T
    """What the call returned."""
    deadline_hit: bool
    """The deadline passed and `on_deadline` ran before the call returned."""


def probe_interval(idle_s: float) -> float:
    """Seconds between two liveness probes of a board whose idle limit is `idle_s`."""
    return max(PROBE_EVERY_S, idle_s / 4)


def supervise(
    fn: Callable[[], T],
    alive: Callable[[], None],
    idle_s: float,
    deadline_s: float | None,
    on_deadline: Callable[[], None],
    what: str,
) -> Supervised[T]:
    """Run `fn` while probing the board with `alive()` (which raises InfraError when the
    board does not answer). At `deadline_s`, `on_deadline()` runs once (it kills the
    runner) in its own thread; once it has returned, `fn` must return within `idle_s`.
    BoardSilent when no probe succeeded for `idle_s`; exceptions of `fn` and `on_deadline`
    propagate."""
    start = time.monotonic()
    every_s = probe_interval(idle_s)
    first_s = max(PROBE_AFTER_S, every_s)
    call = _Call(fn, f"hil {what}")
    lock = threading.Lock()
    last_alive = start
    last_error = ""
    probe: _Call[None] | None = None
    probe_started = 0.0
    kill: _Call[None] | None = None
    killed_at: float | None = None

    def probe_once(started: float) -> None:
        nonlocal last_alive, last_error
        try:
            alive()
        except InfraError as exc:
            with lock:
                last_error = str(exc)
            return
        with lock:
            last_alive = max(last_alive, started)

    wait_s = _TICK_S
    while not call.done.wait(wait_s):
        now = time.monotonic()
        if deadline_s is not None and kill is None and now - start >= deadline_s:
            kill = _Call(on_deadline, f"hil kill {what}")
        if kill is not None and killed_at is None and kill.done.is_set():
            kill.result()  # its exception propagates
            killed_at = now
            with lock:
                last_alive = max(last_alive, now)  # on_deadline reached the board
        if killed_at is not None and now - killed_at > idle_s:
            raise BoardSilent(f"{what}: still running {idle_s:g} s after it was killed")
        with lock:
            silent_for = now - last_alive
            reason = last_error
        if silent_for > idle_s:
            detail = f" (last probe: {reason})" if reason else ""
            raise BoardSilent(f"{what}: the board did not answer for {idle_s:g} s{detail}")
        due = now - start >= first_s and now - probe_started >= every_s
        if due and (probe is None or probe.done.is_set()):
            probe_started = now
            probe = _Call(lambda started=now: probe_once(started), f"hil probe {what}")
        if kill is not None:
            wait_s = _TICK_S
        else:  # nothing changes before the next probe, the deadline or the idle limit
            events = [max(start + first_s, probe_started + every_s), now - silent_for + idle_s]
            if deadline_s is not None:
                events.append(start + deadline_s)
            wait_s = min(max(min(events) - now, _TICK_S), every_s)
    return Supervised(call.result(), kill is not None)
