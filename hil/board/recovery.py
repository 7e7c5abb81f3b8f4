"""The recovery ladder: how a board that failed is brought back, or taken out of the run.

```
HEALTHY ─fail─► RECONNECT ─fail─► REBOOT ─fail─► POWER_CYCLE ─fail─► REFLASH ─fail─► QUARANTINED
   ▲               │                 │                 │                 │
   └─── the board answers, has booted and reports its chipset ◄──────────┘
```

One enum and one transition function say which step follows which (`transition`); the
board-specific work of each step lives in `Recovery`:

- RECONNECT: make sure the run's adb server is alive (restart it if it died), then
  `adb disconnect` + `adb connect` for a network board, or wait for a USB board to be
  `device` again. First, a board the server still lists as `device` must answer a sync
  STAT within SILENT_S, and before each `adb connect` a network board must answer a CNXN of
  hil's own within SILENT_S if it accepts the connection (the server may have lost the
  board, or the board froze while a reboot's wait reconnects it): one that does not is
  frozen (BoardFrozen), and neither a reconnect (the server's `adb connect` waits out adb's own
  10 s handshake, and the board is `offline` after it) nor `adb reboot` (sent to the adbd
  that does not answer) cures it: with power control the ladder goes straight to
  POWER_CYCLE.
- REBOOT: `adb reboot`, wait until the board is no longer `device` (so the old state is not
  mistaken for the new one), then until it is `device` again with `sys.boot_completed=1`.
- POWER_CYCLE (only with power control): `cycle()`, then the same wait.
- REFLASH (only for a board with images in the inventory): flash its known-good images
  (hil/provision, given as `reflash`), which ends with the board booted at its expected build.
- QUARANTINED: the board is out for the rest of the run; the run goes on with the others.

A crash seen on the console starts the ladder at REBOOT: a panicked kernel is not fixed by
reconnecting. A board that needs a person (its ENN library gone, say) is quarantined at once,
unless it can be re-flashed: then the ladder starts at REFLASH (a broken vendor partition is
what a re-flash cures, and no reboot does).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import adbutils

from hil.attention import NeedsPerson, check_state
from hil.board.adb import ADB_ERRORS, AdbBoard, chipset_from_props
from hil.board.adbd_probe import adbd_silent
from hil.board.console import ConsoleCrash
from hil.board.invocation import DEVICE_ROOT
from hil.board.power import PowerControl
from hil.board.sync import SyncSession
from hil.board.watchdog import bounded
from hil.errors import InfraError

log = logging.getLogger(__name__)

POLL_S = 0.2
"""Seconds between two looks at a board that is coming back."""
SILENT_S = 3.0
"""How long a board the adb server lists as `device` may take to answer a sync STAT before
it counts as frozen (at most the idle timeout). adbd answers one from its sync thread,
without forking, in milliseconds (a loaded virtual board in CI: well under a second); a
board that is booting is not listed as `device` at all, so it is never judged by this."""


class BoardFrozen(InfraError):
    """The adb server lists the board as `device`, but its adbd does not answer."""


def refuse_if_adbd_silent(address: str, limit_s: float, who: str) -> None:
    """BoardFrozen (naming `who`) when the network board at `address` accepts a connection
    of hil's own but its adbd does not answer a CNXN within `limit_s` (`adbd_probe.py`):
    neither `adb connect`, which would wait out adb's own 10 s handshake, nor `adb reboot`
    reaches it."""
    if adbd_silent(address, limit_s):
        raise BoardFrozen(f"{who}: its adbd accepts a connection but does not answer within "
                          f"{limit_s:g} s (frozen)")


class Rung(enum.Enum):
    """Where a board stands on the recovery ladder."""

    HEALTHY = "healthy"
    RECONNECT = "reconnect"
    REBOOT = "reboot"
    POWER_CYCLE = "power-cycle"
    REFLASH = "reflash"
    QUARANTINED = "quarantined"


def transition(rung: Rung, recovered: bool, has_power: bool, has_images: bool = False,
               frozen: bool = False) -> Rung:
    """The rung after trying `rung`: HEALTHY when the board is back, else the next step up
    (POWER_CYCLE is skipped without power control, REFLASH without images; REBOOT is skipped
    for a `frozen` board with power control: `adb reboot` goes through the adbd that does
    not answer). A quarantined board has no next rung."""
    if rung is Rung.QUARANTINED:
        raise ValueError("a quarantined board stays out of the run")
    if recovered:
        return Rung.HEALTHY
    if frozen and rung is Rung.RECONNECT and has_power:
        return Rung.POWER_CYCLE
    last = Rung.REFLASH if has_images else Rung.QUARANTINED
    return {
        Rung.HEALTHY: Rung.RECONNECT,
        Rung.RECONNECT: Rung.REBOOT,
        Rung.REBOOT: Rung.POWER_CYCLE if has_power else last,
        Rung.POWER_CYCLE: last,
        Rung.REFLASH: Rung.QUARANTINED,
    }[rung]


def first_rung(error: BaseException, has_images: bool = False) -> Rung:
    """Where the ladder starts for this failure."""
    if isinstance(error, NeedsPerson):
        return Rung.REFLASH if has_images else Rung.QUARANTINED
    return Rung.REBOOT if isinstance(error, ConsoleCrash) else Rung.RECONNECT


class ServerKeeper:
    """Restarts an adb server hil owns when it died (whichever board notices first does
    it); for a lab's server, whose `restart()` refuses, a dead server is an InfraError."""

    def __init__(self, server: object, probe_s: float = 5.0) -> None:
        self.server = server
        self.probe_s = probe_s
        self.restarts = 0
        self._lock = threading.Lock()
        self._closed = False

    def close(self) -> None:
        """The run is ending: never restart the server again (it would outlive the run)."""
        with self._lock:
            self._closed = True

    def ensure_alive(self) -> None:
        """Return when the server answers, restarting it (same port) if it does not."""
        client: adbutils.AdbClient = self.server.client  # type: ignore[attr-defined]
        with self._lock:
            if self._closed:
                raise InfraError("the run is ending: the adb server is not restarted")
            try:
                bounded(client.server_version, self.probe_s, "adb server version")
                return
            except (InfraError, adbutils.AdbError, OSError) as exc:
                if getattr(self.server, "owned", True):
                    log.warning("adb server does not answer (%s): restarting it", exc)
            self.server.restart()  # type: ignore[attr-defined]  # a lab's server refuses
            self.restarts += 1


@dataclass
class Step:
    """One rung tried: what it was, whether the board came back, and why not."""

    rung: Rung
    recovered: bool
    message: str = ""
    seconds: float = 0.0

    def record(self) -> dict[str, Any]:
        """Its entry in results.json's `run.boards[].recovery`."""
        return {"step": self.rung.value, "recovered": self.recovered, "message": self.message,
                "seconds": self.seconds}


@dataclass
class Recovery:
    """The ladder's steps for one adb board."""

    board: AdbBoard
    keeper: ServerKeeper
    connect: Callable[[str, float], adbutils.AdbDevice]
    """`AdbServer.connect`: `adb connect` until the board is `device`."""
    disconnect: Callable[[str], None]
    """`AdbServer.disconnect`."""
    network: bool
    """Reached with `adb connect` (else over USB)."""
    power: PowerControl | None = None
    expected_chipset: str | None = None
    idle_s: float = 30.0
    """Limit of one adb call, and of the reconnect step."""
    boot_s: float = 120.0
    """Limit of a reboot or power cycle, until `sys.boot_completed=1`."""
    reflash: Callable[[], dict[str, Any]] | None = None
    """Flash the board's known-good images and return the flash's record (hil/provision;
    FlashError when it fails); None: the board has no images, no REFLASH rung."""
    history: list[Step] = field(default_factory=list)
    flashes: list[dict[str, Any]] = field(default_factory=list)
    """The records of the REFLASH rungs tried (results.json `run.boards[].flashes`)."""

    @property
    def can_reflash(self) -> bool:
        return self.reflash is not None

    def recover(self, start: Rung) -> Rung:
        """Climb from `start` until the board is back (HEALTHY) or QUARANTINED."""
        rung = start
        while rung not in (Rung.HEALTHY, Rung.QUARANTINED):
            began = time.monotonic()
            person = frozen = False
            try:
                self._step(rung)
                self.check()
                step = Step(rung, True)
            except NeedsPerson as exc:  # no rung fixes it: quarantined at once, with the hint
                step, person = Step(rung, False, f"{type(exc).__name__}: {exc}"[:500]), True
            except (InfraError, *ADB_ERRORS) as exc:
                step = Step(rung, False, f"{type(exc).__name__}: {exc}"[:300])
                frozen = isinstance(exc, BoardFrozen)
            step.seconds = round(time.monotonic() - began, 2)
            self.history.append(step)
            log.warning("%s: recovery %s: %s%s", self.board.name, rung.value,
                        "board is back" if step.recovered else "failed",
                        f" ({step.message})" if step.message else "")
            rung = Rung.QUARANTINED if person else transition(
                rung, step.recovered, self.power is not None, self.can_reflash, frozen)
        return rung

    def _step(self, rung: Rung) -> None:
        if rung is Rung.RECONNECT:
            self._check_not_frozen()
            self._wait_booted(self.idle_s)  # a board that rebooted by itself needs the wait
        elif rung is Rung.REBOOT:
            self.reboot_to("", self.boot_s)
            self._wait_booted(self.boot_s)
        elif rung is Rung.POWER_CYCLE:
            assert self.power is not None
            self.power.cycle()
            self._wait_booted(self.boot_s)
        elif rung is Rung.REFLASH:
            assert self.reflash is not None
            try:
                self.flashes.append(self.reflash())
            except InfraError as exc:
                self.flashes.append(getattr(exc, "report", None) or {"error": str(exc)})
                raise

    def _check_not_frozen(self) -> None:
        """BoardFrozen when the adb server lists the board as `device` but its adbd does not
        answer a sync STAT within SILENT_S (the virtual board's `freeze` fault: TCP up, adbd
        silent). A board not listed, or whose connection ends at once, is left to the
        reconnect (which asks a network board's adbd itself first: `_reconnect`)."""
        if self._state() != "device":
            return
        limit_s = min(SILENT_S, self.idle_s)
        try:
            with SyncSession(self.board.device, limit_s) as sync:
                sync.stat(DEVICE_ROOT)
        except TimeoutError as exc:
            raise BoardFrozen(
                f"{self.board.address}: listed as 'device' but adbd does not answer within "
                f"{limit_s:g} s (frozen: a reconnect or `adb reboot` cannot reach it)"
            ) from exc
        except ADB_ERRORS:
            return  # the connection ended or was refused: the reconnect's case

    def _reconnect(self, limit_s: float) -> None:
        """The adb server alive, then the board `device` again: `adb disconnect` + `adb connect`
        for a network board, unless its adbd accepts a connection of hil's own but does not
        answer its CNXN within SILENT_S (BoardFrozen: `adb connect` would wait out adb's own
        10 s handshake, and a frozen board that a reboot's or the first reconnect's wait met
        would keep waiting until its time limit; asked only when the board's adb server runs
        on this host); a USB board is waited for."""
        self.keeper.ensure_alive()
        address = self.board.address
        if self.network:
            if self._asks_adbd():
                refuse_if_adbd_silent(address, min(SILENT_S, self.idle_s), address)
            bounded(lambda: self.disconnect(address), self.idle_s, f"adb disconnect {address}")
            self.board.device = bounded(
                lambda: self.connect(address, limit_s), limit_s + self.idle_s,
                f"adb connect {address}",
            )
            return
        deadline = time.monotonic() + limit_s
        while (state := self._state()) != "device":
            check_state(address, state)
            if time.monotonic() > deadline:
                raise InfraError(f"{address}: not back as 'device' within {limit_s:g} s")
            time.sleep(POLL_S)

    def _asks_adbd(self) -> bool:
        """Whether the board's adbd may be asked directly: only when its adb server runs on
        this host (a lab server elsewhere was given the board's address as it sees it)."""
        return bool(getattr(self.keeper.server, "on_this_host", False))

    def _state(self) -> str:
        try:
            return bounded(self.board.device.get_state, self.idle_s, "adb get-state")
        except (InfraError, *ADB_ERRORS) as exc:
            return str(exc) or type(exc).__name__

    def reboot_to(self, target: str, leave_s: float) -> None:
        """`adb reboot [TARGET]` (the `reboot:TARGET` service, which an unrooted shell user
        may use; TARGET `bootloader` enters fastboot), then wait until the board has left
        state `device`, at most `leave_s`: Android shuts down first, which on a real board
        can outlast the idle timeout (the virtual board's `--shutdown-seconds`)."""

        def request() -> None:
            connection = self.board.device.open_transport(timeout=self.idle_s)
            try:
                connection.send_command(f"reboot:{target}")
                connection.check_okay()
            finally:
                connection.close()

        bounded(request, self.idle_s, f"adb reboot {target}".strip())
        deadline = time.monotonic() + leave_s
        while self._state() == "device":
            if time.monotonic() > deadline:
                raise InfraError(f"{self.board.address}: still 'device' {leave_s:g} s after reboot")
            time.sleep(POLL_S)

    def wait_booted(self, limit_s: float) -> None:
        """Reconnect until the board is `device` with `sys.boot_completed=1` (InfraError past
        `limit_s`)."""
        self._wait_booted(limit_s)

    def _wait_booted(self, limit_s: float) -> None:
        """Reconnect until the board is `device` with `sys.boot_completed=1`."""
        deadline = time.monotonic() + limit_s
        last = ""
        fresh = True
        while time.monotonic() < deadline:
            try:
                if fresh or self._state() != "device":
                    self._reconnect(max(1.0, min(self.idle_s, deadline - time.monotonic())))
                    fresh = False
                if self._getprop("sys.boot_completed") == "1":
                    return
                last = "sys.boot_completed is not 1"
            except (NeedsPerson, BoardFrozen):
                raise  # waiting longer does not help: a person or the power switch has to act
            except (InfraError, *ADB_ERRORS) as exc:
                last = str(exc)
            time.sleep(POLL_S)
        raise InfraError(f"{self.board.address}: not back within {limit_s:g} s ({last})")

    def _getprop(self, name: str) -> str:
        return self.board.shell(["getprop", name]).stdout.strip()

    def check(self) -> None:
        """InfraError unless the board answers a shell, has booted and reports the
        expected chipset."""
        props = bounded(self.board.properties, self.idle_s, "getprop")
        if props.get("sys.boot_completed") != "1":
            raise InfraError(f"{self.board.name}: sys.boot_completed is not 1")
        chipset = chipset_from_props(props)
        if self.expected_chipset and chipset != self.expected_chipset:
            raise InfraError(
                f"{self.board.name}: reports chipset {chipset}, expected {self.expected_chipset}"
            )
