"""The board pool: boards in, usable boards out. One job, one room.

```
sources (hil/pool/sources.py) ─► open: entries (a source that cannot give any: a record why)
   │  one thread per board
   ▼
lease (one owner per board on this host) ─► bring up (hil/pool/bringup.py) ─► live
   live: serve the dispatcher's jobs ─ infrastructure error ─► recovery ladder
         ─► maybe quarantined ─► probation ─► health check ─► live again, or out
   end: lease released, the run's folder removed, console closed, virtual boards stopped,
        sources closed (what they reserved given back), then the adb servers stopped
```

Whoever needs boards gives the pool a `Dispatcher`: the run's scheduler today (jobs are
cases), a localization or a held board next. The pool never looks inside a job; the dispatcher
never looks after a board's health. Leases, recovery, quarantine and probation are decided
here and nowhere else (the policy's numbers: hil/pool/health.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from hil.attention import NeedsPerson
from hil.board.adb import AdbBoard
from hil.board.inventory import InventoryEntry
from hil.board.recovery import Recovery, Rung, first_rung
from hil.board.servers import BoardServers
from hil.errors import FlashError, InfraError, UsageError
from hil.interrupts import Stop, wait_all, wait_until
from hil.pool import health
from hil.pool.bringup import LiveBoard, PoolOptions, bring_up
from hil.pool.capacity import CapacityLedger
from hil.pool.sources import BoardSource
from hil.runner.profiles import BoardRunner

log = logging.getLogger(__name__)

CLEANUP_S = 3.0
"""After a stop, how long the main thread gives boards whose thread is still busy (in
recovery, say) to have the run's folder removed."""


class Dispatcher(Protocol):
    """What the pool serves its boards to."""

    def next_job(self, board: str) -> Any | None:
        """The next job for `board` (blocking while jobs may still come); None: nothing left
        for it."""
        ...

    def run_job(self, board: AdbBoard, job: Any) -> InfraError | None:
        """Do `job` on `board` (the dispatcher keeps its own records); the infrastructure error
        that stopped it, if any, for the pool to act on."""
        ...

    def has_work(self) -> bool:
        """Whether any job is still to be done (a quarantined board waits for its health check
        only while there is)."""
        ...


BoardsChanged = Callable[[list[dict[str, Any]], dict[str, Any]], None]
"""Called with every board's record (results.json `run.boards`) and other run fields learnt
(`virtual`, `usable_boards`) whenever they change; under the pool's lock, in order."""


class BoardPool:
    """The boards of one run (or `hil localize`, or a holder): enter to own them, `start` to
    bring them up and serve a dispatcher, exit to give every one back."""

    def __init__(self, sources: list[BoardSource], options: PoolOptions, stop: Stop,
                 on_change: BoardsChanged | None = None) -> None:
        from hil.board.lease import Lease

        self.sources = sources
        self.entries: list[InventoryEntry] = []
        """The boards the sources gave (`start`)."""
        self.options = options
        self.stop = stop
        self.on_change = on_change
        self.servers = BoardServers(options.adb_server)
        """The adb servers of the boards (hil's private one, labs')."""
        self.settled = threading.Event()
        """Every board came up or failed to."""
        self.usable = 0
        """Boards that came up."""
        self.records: list[dict[str, Any]] = []
        self.capacity = CapacityLedger()
        """Board-seconds in and out of the run (recovering, quarantined, on probation)."""
        self._lock = threading.Lock()
        self._opened: list[BoardSource] = []
        self._starting = 0
        self._live: dict[str, LiveBoard] = {}
        """Boards taking jobs now."""
        self._probation: set[str] = set()
        """Quarantined boards waiting for their health check (they may come back)."""
        self._unreachable: set[str] = set()
        """Boards whose recovery ladder ran out: nothing to clean up on them."""
        self._cleaned: set[str] = set()
        self._boards: dict[str, LiveBoard] = {}
        self._leases: dict[str, Lease] = {}
        self._done: dict[str, threading.Event] = {}
        self._undo: list[Callable[[], Any]] = []
        """What bring-up started (virtual boards, their folders): undone last first."""

    # -- what others ask --------------------------------------------------------------------
    def runners(self) -> list[BoardRunner]:
        """What each live board's runner can execute, by board name."""
        with self._lock:
            return [self._live[name].runner for name in sorted(self._live)]

    def live_names(self) -> set[str]:
        with self._lock:
            return set(self._live)

    def any_left(self) -> bool:
        """A board is live or may come back from probation."""
        with self._lock:
            return bool(self._live or self._probation)

    def finished(self) -> bool:
        """Every board's thread has ended (its board given back, or never up)."""
        return all(done.is_set() for done in self._done.values())

    def wait_done(self) -> bool:
        """Wait until every board's thread has ended (True), or the stop (False)."""
        return all(wait_until(done, self.stop) for done in self._done.values())

    # -- life ---------------------------------------------------------------------------------
    def __enter__(self) -> BoardPool:
        self.servers.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Every board given back: virtual boards stopped, leases released, then the adb
        servers stopped (hil's own by PID)."""
        with self._lock:
            undo, self._undo = self._undo[::-1], []
        try:
            for step in undo:
                step()
        finally:
            self._release_leases()
            try:
                for source in reversed(self._opened):
                    source.close()
            finally:
                self.servers.__exit__(*exc_info)

    def start(self, dispatcher: Dispatcher) -> None:
        """Open the sources (in this thread: a reservation may wait up to --board-wait), then a
        thread per board: lease, bring-up, then the dispatcher's jobs until none is left."""
        for source in self.sources:
            try:
                found = source.open(self.options.board_wait_s, self.stop)
            except InfraError as exc:
                log.error("%s: no board: %s", source.describe(), exc)
                with self._lock:
                    self.records.append({"name": source.describe(), "adb": None, "error": str(exc)})
                    self._changed({})
                continue
            self._opened.append(source)
            self.entries.extend(self._serving(found))
        self._starting = len(self.entries)
        if not self.entries:
            with self._lock:
                self._changed({"usable_boards": 0})
            self.settled.set()
        for index, entry in enumerate(self.entries):
            self._done[entry.name] = threading.Event()
            thread = threading.Thread(target=self._board_thread, args=(entry, dispatcher),
                                      name=f"board-{index}", daemon=True)
            thread.start()

    def _serving(self, entries: list[InventoryEntry]) -> list[InventoryEntry]:
        """The entries that can serve the run; a board of another chipset is left out before
        it is leased or reached (a board another run holds would be waited for up to
        --board-wait, for nothing), with a board record that says why."""
        kept = []
        for entry in entries:
            if entry.chipset is None or entry.chipset == self.options.chipset:
                kept.append(entry)
                continue
            why = (f"left out: chipset {entry.chipset}, the run targets {self.options.chipset} "
                   f"(not leased, not connected)")
            log.info("%s: %s", entry.name, why)
            with self._lock:
                self.records.append({"name": entry.name, "adb": entry.adb, "chipset": entry.chipset,
                                     "error": why, "left_out": "chipset"})
                self._changed({})
        return kept

    def wind_down(self, grace_s: float) -> None:
        """After a stop: board threads get `grace_s` to finish and clean their boards up; then
        the main thread removes the run's folder from boards whose thread is still busy (in
        recovery or on probation), each within CLEANUP_S, before the adb servers stop."""
        self.stop.set()
        if wait_all(list(self._done.values()), grace_s):
            return
        with self._lock:
            left = [live.board for name, live in self._boards.items()
                    if not self._done[name].is_set() and name not in self._cleaned
                    and name not in self._unreachable]
        cleaners = [threading.Thread(target=board.cleanup, daemon=True) for board in left]
        for cleaner in cleaners:
            cleaner.start()
        deadline = time.monotonic() + CLEANUP_S
        for cleaner in cleaners:
            cleaner.join(max(0.0, deadline - time.monotonic()))  # no signal raises here

    # -- one board's thread --------------------------------------------------------------------
    def _board_thread(self, entry: InventoryEntry, dispatcher: Dispatcher) -> None:
        name = entry.name
        live = None
        try:
            try:
                self._take_lease(entry)
                live = bring_up(entry, self.options, self.servers, self._on_stop)
            except (InfraError, UsageError) as exc:
                log.error("%s: not usable: %s", name, exc)
                self._release_lease(name)
                with self._lock:
                    self.records.append({"name": name, "adb": entry.adb, "error": str(exc),
                                         **self._lab_fields(entry), **_flash_fields(entry, exc)})
                    self._changed({})
            finally:
                with self._lock:
                    self._starting -= 1
                    if live is not None:
                        self._live[name] = self._boards[name] = live
                        self.usable += 1
                        self.capacity.joined(name)
                        self.records.append({**live.record, **self._lab_fields(entry)})
                        self._changed({"virtual": any(b.get("virtual") for b in self.records)})
                    if self._starting == 0:
                        self._changed({"usable_boards": self.usable})
                        self.settled.set()
            if live is not None:
                self._serve(live, dispatcher)
        finally:
            self._give_back(name, live)
            self._done[name].set()

    def _give_back(self, name: str, live: LiveBoard | None) -> None:
        self._release_lease(name)
        with self._lock:
            self._live.pop(name, None)
            clean = live is not None and name not in self._unreachable  # a dead board has nothing
        if live is None:
            return
        try:
            if clean:
                live.board.cleanup()
                with self._lock:
                    self._cleaned.add(name)
        finally:
            if live.board.console is not None:
                live.board.console.close()

    def _serve(self, live: LiveBoard, dispatcher: Dispatcher) -> None:
        """Jobs on the board until none is left for it; after an infrastructure error, the
        recovery ladder, and quarantine when health.py says so."""
        board, counters = live.board, health.BoardHealth()
        while not self.stop.is_set() and (job := dispatcher.next_job(board.name)) is not None:
            error = dispatcher.run_job(board, job)
            if error is None:
                counters.passed()
                continue
            counters.failed()
            if self.stop.is_set():
                return  # interrupted: no recovery, the run is ending
            self.capacity.out(board.name)
            if isinstance(error, NeedsPerson) and not live.recovery.can_reflash:
                # e.g. ENN's library gone: no rung but a re-flash brings it back
                log.error("%s: quarantined for the rest of the run (%s)", board.name, error)
                with self._lock:
                    self._live.pop(board.name, None)
                self._note_recovery(board.name, live.recovery, quarantined=f"needs a person: {error}")
                return
            start = first_rung(error, live.recovery.can_reflash)
            log.warning("%s: infrastructure error; recovery starts at %s", board.name, start.value)
            rung = live.recovery.recover(start)
            self._note_recovery(board.name, live.recovery)
            why = counters.quarantine_reason(rung is Rung.QUARANTINED)
            if why is not None:
                wait_s = counters.quarantined()
                if not self._quarantine(live, why, rung is not Rung.QUARANTINED, wait_s, dispatcher):
                    return
            self.capacity.back(board.name)

    def _quarantine(self, live: LiveBoard, why: str, reachable: bool, wait_s: float,
                    dispatcher: Dispatcher) -> bool:
        """Take the board out. While other boards carry the run or may come back, or when it
        still answers (`reachable`), it sits out `wait_s`, then gets health checks, every
        health.CHECK_EVERY_S after one fails: True when one passed and the board is back at
        once; False when it is out for good (its checks failed for health.GIVE_UP_S,
        nothing left to do, or a dead last board)."""
        name = live.board.name
        with self._lock:
            others = bool((set(self._live) | self._probation) - {name})
            self._live.pop(name, None)
            if not reachable:
                self._unreachable.add(name)
        if not reachable and not others:
            return self._out_for_the_run(live, why)
        log.error("%s: quarantined (%s); health check %s", name, why,
                  f"in {wait_s:g} s" if wait_s else "at once")
        self._note_recovery(name, live.recovery, quarantined=why)
        with self._lock:
            self._probation.add(name)
        out_since = time.monotonic()
        first_check: float | None = None
        try:
            while self._sit_out(wait_s, dispatcher):
                started = time.monotonic()
                first_check = first_check or started
                problem = self._health_problem(live)
                self._note_probation(name, why, time.monotonic() - out_since, problem)
                if problem is None:
                    log.warning("%s: back in the run (health check passed after %.0f s out)",
                                name, time.monotonic() - out_since)
                    with self._lock:
                        self._live[name] = live
                    return True
                if started - first_check >= health.GIVE_UP_S:
                    return self._out_for_the_run(
                        live, f"{why}; health checks failed for {started - first_check:.0f} s")
                wait_s = health.CHECK_EVERY_S
                log.error("%s: health check failed: %s; next in %g s", name, problem, wait_s)
            return False  # the run is over, or has nothing left for this board
        finally:
            with self._lock:
                self._probation.discard(name)

    def _sit_out(self, seconds: float, dispatcher: Dispatcher) -> bool:
        """Wait `seconds`; False as soon as the pool stops or no job is left."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.stop.wait(min(0.2, max(0.0, deadline - time.monotonic()))):
                return False
            if not dispatcher.has_work():
                return False
        return True

    def _health_problem(self, live: LiveBoard) -> str | None:
        """Why the board is not fit to take jobs again, or None: the ladder must bring it back
        (HEALTHY), and it must take the run's folder and runner again and let a file be written."""
        back = live.recovery.recover(Rung.RECONNECT) is Rung.HEALTHY
        with self._lock:
            (self._unreachable.discard if back else self._unreachable.add)(live.board.name)
        if not back:
            return f"{health.RECOVERY_FAILED} ({live.recovery.history[-1].message})"
        try:
            live.board.prepare()
            live.board.check_writable()
        except InfraError as exc:
            return str(exc)
        return None

    # -- leases (one owner per board on this host: hil/board/lease.py) ----------------------------
    def _take_lease(self, entry: InventoryEntry) -> None:
        """The board's lease (none for a virtual board hil starts): waits up to --board-wait
        while another run holds it; InfraError when it stays busy."""
        from hil.board.lease import acquire

        if entry.virtual:
            return

        def busy(holder: Any) -> None:
            log.warning("%s: busy, held by %s; waiting up to %g s (--board-wait)", entry.name,
                        holder.describe() if holder else "another process", self.options.board_wait_s)

        lease = acquire(self.servers.lease_key(entry), self.options.run_id, self.options.board_wait_s,
                        busy, cancelled=self.stop.event)
        with self._lock:
            self._leases[entry.name] = lease

    def _release_lease(self, name: str) -> None:
        with self._lock:
            lease = self._leases.get(name)
        if lease is not None:
            lease.release()

    def _release_leases(self) -> None:
        with self._lock:
            leases = list(self._leases.values())
        for lease in leases:
            lease.release()

    def _on_stop(self, step: Callable[[], Any]) -> None:
        with self._lock:
            self._undo.append(step)

    # -- the boards' records (results.json run.boards) -----------------------------------------
    def _lab_fields(self, entry: InventoryEntry) -> dict[str, Any]:
        """The adb server the board belongs to, its lease, and its labgrid place if it is one
        (called with `_lock` held)."""
        lease = self._leases.get(entry.name)
        fields = {"adb_server": self.servers.address_for(entry) or "private",
                  "lease": lease.record() if lease is not None else None}
        if entry.labgrid is not None:  # a labgrid place: where it came from (hil/pool/labgrid.py)
            fields["labgrid"] = dict(entry.labgrid)
        return fields

    def _changed(self, fields: dict[str, Any]) -> None:
        if self.on_change is not None:
            self.on_change(self.records, fields)

    def causes(self) -> str:
        """Why no board is left, one clause per board that is out: its start error, or the
        quarantine and its last recovery step (what a case no board ran says)."""
        with self._lock:
            records = [dict(r) for r in self.records]
        return board_causes(records)

    def _board_record(self, name: str) -> dict[str, Any] | None:
        return next((entry for entry in self.records if entry.get("name") == name), None)

    def capacity_lost(self) -> dict[str, Any]:
        """`run.capacity_lost` until now; each board record's `board_seconds_out` brought up
        to date (the records are announced)."""
        out, figures = self.capacity.snapshot()
        with self._lock:
            for entry in self.records:
                if entry.get("name") in out:
                    entry["board_seconds_out"] = round(out[entry["name"]], 1)
            self._changed({})
        return figures

    def _out_for_the_run(self, live: LiveBoard, why: str) -> bool:
        """Record `live`'s board as out for the rest of the run; False (it is not back)."""
        log.error("%s: quarantined for the rest of the run (%s)", live.board.name, why)
        self._note_recovery(live.board.name, live.recovery, quarantined=why)
        return False

    def _note_recovery(self, name: str, recovery: Recovery, quarantined: str | None = None) -> None:
        with self._lock:
            entry = self._board_record(name)
            if entry is not None:
                entry["recovery"] = [step.record() for step in recovery.history]
                if recovery.flashes:  # --provision's flash at bring-up, then the REFLASH rungs'
                    entry["flashes"] = list(recovery.flashes)
                    entry["build"] = {**(entry.get("build") or {}),
                                      "after": recovery.flashes[-1].get("after")}
                if quarantined:
                    entry["quarantined"] = quarantined
            self._changed({})

    def _note_probation(self, name: str, why: str, out_s: float, problem: str | None) -> None:
        """A health check of a quarantined board (`run.boards[].probation`)."""
        with self._lock:
            entry = self._board_record(name)
            if entry is not None:
                entry.setdefault("probation", []).append(
                    {"why": why, "out_s": round(out_s, 1), "health_check": problem or "passed",
                     "back": problem is None})
                if problem is None:
                    entry.pop("quarantined", None)
            self._changed({})


def _flash_fields(entry: InventoryEntry, error: BaseException) -> dict[str, Any]:
    """A board whose flash failed at bring-up (`--provision`) is quarantined: its software is
    unknown. Its record keeps the flash and the build it had."""
    if not isinstance(error, FlashError) or entry.provisioning is None:
        return {}
    from hil.provision import build_record

    return {"quarantined": f"provisioning failed: {error}", "flashes": [error.report],
            "build": build_record(entry.provisioning, error.report.get("before"), None)}


def board_causes(records: list[dict[str, Any]]) -> str:
    """`name: why` for every board record that is out of the run (hil/report reads it too)."""
    parts = []
    for record in records:
        name = record.get("name") or "?"
        if record.get("error"):
            parts.append(f"{name}: {record['error']}")
        elif record.get("quarantined"):
            steps = record.get("recovery") or []
            last = (f" (last recovery step: {steps[-1].get('step')}: {steps[-1].get('message')})"
                    if steps and isinstance(steps[-1], dict) else "")
            parts.append(f"{name}: quarantined: {record['quarantined']}{last}")
    return "; ".join(parts)
