"""Boards from a labgrid lab: places reserved by tags at a coordinator, one owner lab-wide.

```
open:   session (labgrid's ClientSession, our identity HOST/USER.hil-PID)
        ─► stale holders on this host (their pid gone): release-from + cancel their reservations
        ─► a reservation per place wanted (filter = tags; `place=NAME` is `name=NAME`)
        ─► poll every second (a waiting reservation expires unpolled), saying who holds what
        ─► allocated: acquire the place ─► its resources ─► InventoryEntry
             an ADB resource {host,port}              → adb HOST:PORT
             an ADB resource {host,port,serialno}     → adb SERIAL@HOST:PORT (its adb server)
               (every class of labgrid PRs #1564, #1740, #1809: hil/pool/labgrid_resources.py)
             NetworkSerialPort{host,port,protocol}    → console rfc2217://…?ign_set_control, socket://
             NetworkPowerPort{model,host,index}       → LabgridPower (labgrid's own power driver)
             tags chipset/soc, runner_profile         → chipset, runner_profile
             RemoteAndroidNetFastboot{host,address,port,protocol} → fastboot tcp|udp:ADDRESS:PORT,
                                                        run on HOST over ssh, as labgrid runs it
                                                        (with the inventory entry's images)
             an isolated exporter's (extra.proxy_required) → every address through its proxy
        ─► --board-wait over: take the places granted, cancel the rest; none: InfraError
close:  release every place we acquired (only if still ours) and cancel every reservation;
        close the ssh connections to exporters (hil/board/labgrid_ssh.py)
```

labgrid's locks never expire (labgrid#1739): a run killed with SIGKILL keeps its places.
The next hil on the same host sees a holder `HOST/USER.hil-PID` whose PID is gone and takes
the place over with `release-from` semantics (the coordinator releases only if that exact
holder still holds it, and answers OK either way: the place is read again before it is said
freed). A holder on another host is never judged: it is listed, not taken.

hil only reads what exporters publish; it runs no exporter and no adb server of a lab. Where
labgrid runs a program on an exporter's host (fastboot) or reaches its resources through ssh
(an isolated exporter), hil does the same with labgrid's own ssh helpers. The coordinator
session, holder identity and labgrid power driver: hil/pool/labgrid_remote.py; what the
resources become: hil/pool/labgrid_resources.py.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hil.board import labgrid_ssh
from hil.board.inventory import CHIPSETS, NAME, InventoryEntry
from hil.board.labgrid_spec import LabgridRequest
from hil.errors import InfraError, UsageError
from hil.interrupts import Stop
from hil.pool.labgrid_remote import (  # noqa: F401 - re-exported: the source's vocabulary
    Coordinator,
    LabgridPower,
    LabgridRefused,
    coordinator_address,
    holder_alive,
    identity,
)
from hil.pool.labgrid_resources import (
    NotYet,
    adb_of,
    console_of,
    fastboot_of,
    power_of,
)
from hil.runner.profiles import PROFILES

log = logging.getLogger(__name__)

POLL_S = 1.0
"""How often a waiting reservation is polled (labgrid's client does the same)."""
SAY_EVERY_S = 30.0
"""While waiting, the holders are said again this often (and whenever they change)."""
GATHER_S = 10.0
"""Once one place is ours, how much longer the others may take before the run goes on with
what it has: two runs each holding some places while waiting for the rest would otherwise
block each other until --board-wait."""
PUBLISH_TIMEOUT_S = 10.0
"""After acquiring, how long an exporter may take to publish what it starts on acquire
(ser2net's port of a NetworkSerialPort)."""


def matches(tags: dict[str, str], name: str, wanted: Sequence[tuple[str, str]]) -> bool:
    """Whether a place with `tags` (and `name`) satisfies a reservation filter."""
    have = {**tags, "name": name}
    return all(have.get(key) == value for key, value in wanted)


@dataclass
class _Want:
    request: LabgridRequest
    token: str
    place: str | None = None
    acquired: bool = False
    since: float = field(default_factory=time.monotonic)


class LabgridSource:
    """Places of a labgrid coordinator (hil/pool/sources.py's BoardSource)."""

    def __init__(self, address: str, requests: Sequence[LabgridRequest]) -> None:
        self.address = address
        self.requests = list(requests)
        self.host, self.user = identity()
        self.holder = f"{self.host}/{self.user}"
        self._coordinator: Coordinator | None = None
        self._wants: list[_Want] = []
        self._first_grant = float("inf")
        self._lock = threading.Lock()

    def describe(self) -> str:
        return f"labgrid {self.address} ({'; '.join(r.describe() for r in self.requests)})"

    # -- open -----------------------------------------------------------------------------
    def open(self, wait_s: float, stop: Stop) -> list[InventoryEntry]:
        try:
            return self._open(wait_s, stop)
        except LabgridRefused as exc:
            self.close()
            raise InfraError(f"labgrid {self.address}: refused: {exc}") from exc
        except BaseException:
            self.close()  # the pool closes only the sources that opened
            raise

    def _open(self, wait_s: float, stop: Stop) -> list[InventoryEntry]:
        coordinator = self._coordinator = Coordinator(self.address, self.host, self.user)
        self.take_over_stale()
        places, _ = coordinator.snapshot()
        for request in self.requests:
            fitting = sorted(n for n, p in places.items() if matches(p["tags"], n, request.tags))
            if not fitting:
                raise InfraError(f"labgrid {self.address}: no place has {request.describe()} "
                                 f"({len(places)} place(s): {', '.join(sorted(places)) or 'none'})")
            count = request.count
            if count > len(fitting):
                log.warning("labgrid: %s: only %d place(s) match, asking for %d", request.label,
                            len(fitting), len(fitting))
                count = len(fitting)
            for _ in range(count):
                token = coordinator.reserve(request.tags)
                with self._lock:
                    self._wants.append(_Want(request, token))
                log.info("labgrid: reservation %s for %s", token, request.describe())
        deadline = time.monotonic() + wait_s
        said, said_at = "", 0.0
        while not stop.is_set():
            self._advance()
            waiting = [w for w in self._wants if not w.acquired]
            if len(waiting) < len(self._wants):
                deadline = min(deadline, self._first_grant + GATHER_S)
            if not waiting or time.monotonic() >= deadline:
                break
            self.take_over_stale()
            line = self._holders_line(waiting)
            if line != said or time.monotonic() - said_at >= SAY_EVERY_S:
                log.warning("labgrid: waiting up to %.0f s (--board-wait) for %s",
                            max(0.0, deadline - time.monotonic()), line)
                said, said_at = line, time.monotonic()
            stop.wait(POLL_S)
        if stop.is_set():
            return []
        granted = [w for w in self._wants if w.acquired]
        left = [w for w in self._wants if not w.acquired]
        if left:
            line = self._holders_line(left)
            for want in left:
                self._cancel(want)
            if not granted:
                raise InfraError(f"labgrid {self.address}: no place free within {wait_s:g} s "
                                 f"(--board-wait): {line}")
            log.warning("labgrid: going on with %d place(s); not granted within %g s: %s",
                        len(granted), wait_s, line)
        return self._entries(granted)

    def _advance(self) -> None:
        """Poll every waiting reservation (which also keeps it from expiring); acquire the
        places allocated to us."""
        assert self._coordinator is not None
        for want in self._wants:
            if want.acquired:
                continue
            try:
                reservation = self._coordinator.poll(want.token)
            except LabgridRefused:  # expired and removed: ask again
                want.token = self._coordinator.reserve(want.request.tags)
                continue
            state = reservation.state.name
            if state in ("expired", "invalid"):
                self._cancel(want)
                want.token = self._coordinator.reserve(want.request.tags)
                continue
            if state not in ("allocated", "acquired"):
                continue
            place = next(iter(next(iter(reservation.allocations.values()), [])), None)
            if place is None:
                continue
            try:
                self._coordinator.acquire(place)
            except LabgridRefused as exc:
                log.warning("labgrid: %s: allocated to us but not acquired: %s", place, exc)
                continue
            want.place, want.acquired = place, True
            self._first_grant = min(self._first_grant, time.monotonic())
            log.warning("labgrid: acquired place %s (reservation %s, waited %.1f s)", place,
                        want.token, time.monotonic() - want.since)

    def _holders_line(self, waiting: Sequence[_Want]) -> str:
        """Who holds the places the waiting reservations could get."""
        assert self._coordinator is not None
        places, _ = self._coordinator.snapshot()
        parts = []
        for request in {w.request for w in waiting}:
            fitting = sorted(n for n, p in places.items() if matches(p["tags"], n, request.tags))
            held = []
            for name in fitting:
                holder = places[name]["acquired"]
                if holder:
                    alive = holder_alive(holder, self.host)
                    state = {True: "alive", False: "dead", None: "another host"}[alive]
                    held.append(f"{name} held by {holder} ({state})")
                elif places[name]["reservation"]:
                    held.append(f"{name} reserved ({places[name]['reservation']})")
                else:
                    held.append(f"{name} free")
            parts.append(f"{request.describe()}: {', '.join(held) or 'no place'}")
        return "; ".join(parts)

    def take_over_stale(self) -> list[str]:
        """Release the places held by dead hil runs of this host and cancel their
        reservations; the places taken back."""
        assert self._coordinator is not None
        places, _ = self._coordinator.snapshot()
        freed = []
        for name, place in sorted(places.items()):
            holder = place["acquired"]
            if holder and holder != self.holder and holder_alive(holder, self.host) is False:
                try:
                    self._coordinator.release_from(name, holder)
                except LabgridRefused as exc:
                    log.warning("labgrid: %s: release-from %s refused: %s", name, holder, exc)
                    continue
                # the coordinator answers OK when another holder has it by now, releasing
                # nothing (remote/coordinator.py ReleasePlace): what it holds now is the answer
                now = self._coordinator.snapshot()[0].get(name, {}).get("acquired")
                if now is None:
                    log.warning("labgrid: %s: holder %s is dead (no such process on %s): released",
                                name, holder, self.host)
                    freed.append(name)
                elif now == holder:
                    log.warning("labgrid: %s: holder %s is dead, but the coordinator still has it "
                                "as the holder after release-from", name, holder)
                else:
                    log.warning("labgrid: %s: holder %s is dead, but %s holds the place by now: "
                                "not released", name, holder, now)
        for reservation in self._coordinator.reservations():
            owner = reservation.owner
            if owner != self.holder and holder_alive(owner, self.host) is False:
                try:
                    self._coordinator.cancel(reservation.token)
                    log.info("labgrid: cancelled reservation %s of dead %s", reservation.token, owner)
                except LabgridRefused:
                    pass
        return freed

    # -- what a place becomes -------------------------------------------------------------
    def _entries(self, granted: Sequence[_Want]) -> list[InventoryEntry]:
        assert self._coordinator is not None
        entries = []
        problems = []
        for want in granted:
            assert want.place is not None
            deadline = time.monotonic() + PUBLISH_TIMEOUT_S
            while True:
                places, resources = self._coordinator.snapshot()
                try:
                    entries.append(self.entry_for(want, places[want.place], resources))
                    break
                except NotYet as exc:
                    if time.monotonic() >= deadline:
                        problems.append(f"{want.place}: {exc}")
                        self._give_back(want)
                        break
                    time.sleep(0.2)
                except InfraError as exc:
                    problems.append(f"{want.place}: {exc}")
                    self._give_back(want)
                    break
        for problem in problems:
            log.error("labgrid: place %s", problem)
        if not entries:
            raise InfraError(f"labgrid {self.address}: no usable place: {'; '.join(problems)}")
        return entries

    def entry_for(self, want: _Want, place: dict[str, Any],
                  resources: dict[str, Any]) -> InventoryEntry:
        """The inventory entry of an acquired place, from the resources it acquired."""
        found: dict[str, tuple[str, dict[str, Any]]] = {}
        for exporter, group, cls, name in place["acquired_resources"]:
            data = resources.get(exporter, {}).get(group, {}).get(name)
            if data is None:
                raise InfraError(f"resource {exporter}/{group}/{cls}/{name} is gone "
                                 "(exporter disconnected?)")
            found.setdefault(data["cls"], (exporter, data))
        adb = adb_of(found)
        console, baud = console_of(found)
        power = power_of(found, want.place or "")
        provisioning = want.request.provisioning
        if provisioning is not None and provisioning.flashable:
            provisioning = provisioning.with_endpoint(*fastboot_of(found, want.place))
        tags = place["tags"]
        chipset = want.request.chipset or _chipset(tags)
        profile = want.request.runner_profile or tags.get("runner_profile")
        if profile is not None and profile not in PROFILES:
            log.warning("labgrid: %s: tag runner_profile=%s unknown; ignored", want.place, profile)
            profile = None
        name = want.place or ""
        if not NAME.match(name):
            name = re.sub(r"[^A-Za-z0-9._-]", "-", name)[:64]
        return InventoryEntry(
            name=name, adb=adb.adb, adb_server=adb.server, chipset=chipset, console=console,
            console_baud=baud, power=power, runner_profile=profile, provisioning=provisioning,
            tags=tuple(f"{k}={v}" for k, v in sorted(tags.items())),
            labgrid={"coordinator": self.address, "place": want.place, "exporter": adb.exporter,
                     "host": adb.host, "reservation": want.token, "holder": self.holder,
                     "tags": dict(tags), "waited_s": round(time.monotonic() - want.since, 1)},
        )

    # -- close ----------------------------------------------------------------------------
    def _give_back(self, want: _Want) -> None:
        """Release the place if it is still ours, cancel the reservation."""
        coordinator = self._coordinator
        if coordinator is None:
            return
        if want.acquired and want.place:
            try:
                coordinator.release_from(want.place, self.holder)
                log.info("labgrid: released place %s", want.place)
            except (LabgridRefused, InfraError) as exc:
                log.warning("labgrid: release %s: %s", want.place, exc)
            want.acquired = False
        self._cancel(want)

    def _cancel(self, want: _Want) -> None:
        if self._coordinator is None or not want.token:
            return
        try:
            self._coordinator.cancel(want.token)
        except (LabgridRefused, InfraError):
            pass  # gone already
        want.token = ""

    def close(self) -> None:
        """Every place released and every reservation cancelled; idempotent."""
        with self._lock:
            wants, self._wants = self._wants, []
        coordinator = self._coordinator
        if coordinator is None:
            return
        try:
            for want in wants:
                self._give_back(want)
        finally:
            self._coordinator = None
            coordinator.close()
            labgrid_ssh.close()


def _chipset(tags: dict[str, str]) -> str | None:
    for key in ("chipset", "soc"):
        value = (tags.get(key) or "").upper()
        if value in CHIPSETS:
            return value
    return None


def place_rows(address: str) -> list[dict[str, Any]]:
    """`hil boards --labgrid`: every place with its tags, holder, whether the holder is
    alive (for hil runs of this host), its reservation and resources."""
    host, user = identity()
    coordinator = Coordinator(address, host, user)
    try:
        places, _ = coordinator.snapshot()
        reservations = {r.token: r for r in coordinator.reservations()}
    finally:
        coordinator.close()
    rows = []
    for name, place in sorted(places.items()):
        holder = place["acquired"]
        reservation = reservations.get(place["reservation"] or "")
        rows.append({
            "place": name, "tags": place["tags"], "holder": holder,
            "alive": holder_alive(holder, host) if holder else None,
            "reservation": place["reservation"],
            "reserved_by": reservation.owner if reservation is not None else None,
            "resources": sorted({path[2] for path in place["acquired_resources"]}) or place["matches"],
        })
    return rows


def render_places(address: str, rows: list[dict[str, Any]]) -> str:
    """The places as a plain table."""
    header = ["place", "tags", "holder", "alive", "reservation"]
    table = [header]
    for row in rows:
        alive = {True: "yes", False: "no (stale)", None: "-" if not row["holder"] else "?"}[row["alive"]]
        table.append([row["place"], ",".join(f"{k}={v}" for k, v in sorted(row["tags"].items())) or "-",
                      row["holder"] or "-", alive,
                      f"{row['reservation']} ({row['reserved_by']})" if row["reservation"] else "-"])
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = [f"labgrid coordinator {address}: {len(rows)} place(s)"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    return "\n".join(lines) + "\n"


def board_sources(inventory_path: str | None, board_args: Sequence[str],
                  labgrid_flag: str | None) -> tuple[list[InventoryEntry], list[LabgridSource]]:
    """The boards of `--inventory`, `--board` and `--labgrid`: the entries known up front
    (hil/pool/sources.py's StaticSource takes them) and a labgrid source for the places asked
    for (`--board labgrid:...`, inventory `labgrid:` entries). Without any board named: one
    virtual board, as before. Bad input is a UsageError before anything starts."""
    from hil.board.inventory import load_lab_inventory, select_boards
    from hil.board.labgrid_spec import is_labgrid_spec, parse_labgrid_spec

    specs = [arg for arg in board_args if is_labgrid_spec(arg)]
    others = [arg for arg in board_args if not is_labgrid_spec(arg)]
    requests = [parse_labgrid_spec(arg) for arg in specs]
    inventory, lab_entries = load_lab_inventory(Path(inventory_path)) if inventory_path else ([], [])
    if board_args:  # they pick: inventory boards by name, and specs of their own
        picked = [r for r in lab_entries if r.label in others]
        others = [arg for arg in others if arg not in {r.label for r in picked}]
        requests += picked
        entries = select_boards(inventory, others) if others else []
    else:  # the whole inventory; nothing named: one virtual board
        requests += lab_entries
        entries = list(inventory) if inventory_path else select_boards([], [])
    address = coordinator_address(labgrid_flag)
    if requests and address is None:
        raise UsageError(f"--board {requests[0].label}: a labgrid place: name the coordinator with "
                         "--labgrid HOST:PORT (or LG_COORDINATOR)")
    return entries, ([LabgridSource(address, requests)] if requests and address else [])
