"""labgrid's remote side as hil uses it: a session with the coordinator (labgrid's own
`ClientSession` over gRPC), the identity a holder goes by and whether it still runs, and a
place's power through labgrid's own power driver. The board source is hil/pool/labgrid.py.
"""

from __future__ import annotations

import asyncio
import getpass
import logging
import os
import re
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hil.errors import InfraError, UsageError
from hil.pids import pid_alive

log = logging.getLogger(__name__)

DEFAULT_PORT = 20408
"""labgrid's coordinator port when HOST has none."""
CONNECT_TIMEOUT_S = 10.0
"""How long to wait for the coordinator to answer."""
CALL_TIMEOUT_S = 30.0
"""The longest one coordinator call may take."""
_HOLDER = re.compile(r"^(?P<host>[^/]+)/(?P<user>.*)\.hil-(?P<pid>\d+)$")


def coordinator_address(flag: str | None) -> str | None:
    """`--labgrid HOST[:PORT]`, else labgrid's own LG_COORDINATOR; None when neither is set."""
    address = flag or os.environ.get("LG_COORDINATOR") or None
    if address is None:
        return None
    host, colon, port = address.rpartition(":")
    if not colon:
        host, port = address, str(DEFAULT_PORT)
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UsageError(f"--labgrid (or LG_COORDINATOR): {address!r} is not HOST:PORT")
    return f"{host}:{port}"


def identity() -> tuple[str, str]:
    """(host, user) as labgrid names a client: LG_HOSTNAME / LG_USERNAME or the machine's;
    the user gets `.hil-PID` so that a holder names its run and can be judged dead."""
    host = os.environ.get("LG_HOSTNAME") or socket.gethostname()
    user = os.environ.get("LG_USERNAME") or getpass.getuser()
    return host, f"{user}.hil-{os.getpid()}"


def holder_alive(holder: str, my_host: str) -> bool | None:
    """Whether a place's holder (`HOST/USER`) still runs: known only for a hil run on this
    host (its PID); None otherwise."""
    match = _HOLDER.match(holder or "")
    if match is None or match["host"] != my_host:
        return None
    return pid_alive(int(match["pid"]))


class Coordinator:
    """A session with a labgrid coordinator: labgrid's own `ClientSession` (gRPC; places and
    resources kept current by its subscription) on an event loop in a thread of its own, so
    its stream keeps running while hil's threads call it."""

    def __init__(self, address: str, host: str, user: str) -> None:
        from labgrid.remote.client import ClientSession

        self.address = address
        self.holder = f"{host}/{user}"
        self._loop = _shared_loop()

        class Session(ClientSession):  # our identity, whatever the environment says
            def gethostname(self) -> str:
                return host

            def getuser(self) -> str:
                return user

        async def start() -> Any:
            import grpc
            from labgrid.remote.generated import labgrid_coordinator_pb2_grpc

            session = Session(address=address, loop=self._loop)
            # a channel of its own: gRPC shares one connection among a process's channels by
            # default, and the coordinator keys its clients by connection (one session each)
            await session.channel.close()
            session.channel = grpc.aio.insecure_channel(
                target=address, options=[*_CHANNEL_OPTIONS, ("grpc.use_local_subchannel_pool", 1)])
            session.stub = labgrid_coordinator_pb2_grpc.CoordinatorStub(session.channel)
            try:
                await asyncio.wait_for(session.start(), CONNECT_TIMEOUT_S)
            except BaseException:
                await session.channel.close()
                raise
            return session

        try:
            self.session = self._call(start(), CONNECT_TIMEOUT_S + 2)
        except BaseException as exc:
            raise InfraError(f"labgrid coordinator {address}: unreachable "
                             f"({_why(exc)})") from exc

    def _call(self, coroutine: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def rpc(self, method: str, request: Any) -> Any:
        """One coordinator call, then a sync so that our view of places has its effect."""
        import grpc

        async def call() -> Any:
            response = await getattr(self.session.stub, method)(request)
            await self.session.sync_with_coordinator()
            return response

        try:
            return self._call(call())
        except grpc.aio.AioRpcError as exc:
            raise LabgridRefused(exc.details() or str(exc.code())) from exc
        except (TimeoutError, OSError) as exc:
            raise InfraError(f"labgrid coordinator {self.address}: {method}: {_why(exc)}") from exc

    def snapshot(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(places by name, resources by exporter/group/name) as this session sees them now."""
        async def copy() -> tuple[dict[str, Any], dict[str, Any]]:
            if self.session.stopping.is_set():
                raise InfraError(f"labgrid coordinator {self.address}: connection lost")
            places = {name: _place_view(place) for name, place in self.session.places.items()}
            resources = {exporter: {group: {name: dict(entry.data) for name, entry in items.items()}
                                    for group, items in groups.items()}
                         for exporter, groups in self.session.resources.items()}
            return places, resources

        return self._call(copy())

    def reservations(self) -> list[Any]:
        from labgrid.remote.common import Reservation
        from labgrid.remote.generated import labgrid_coordinator_pb2 as pb2

        response = self.rpc("GetReservations", pb2.GetReservationsRequest())
        return [Reservation.from_pb2(item) for item in response.reservations]

    def reserve(self, tags: Sequence[tuple[str, str]]) -> str:
        from labgrid.remote.generated import labgrid_coordinator_pb2 as pb2

        request = pb2.CreateReservationRequest(
            filters={"main": pb2.Reservation.Filter(filter=dict(tags))}, prio=0.0)
        return str(self.rpc("CreateReservation", request).reservation.token)

    def poll(self, token: str) -> Any:
        from labgrid.remote.common import Reservation
        from labgrid.remote.generated import labgrid_coordinator_pb2 as pb2

        response = self.rpc("PollReservation", pb2.PollReservationRequest(token=token))
        return Reservation.from_pb2(response.reservation)

    def cancel(self, token: str) -> None:
        from labgrid.remote.generated import labgrid_coordinator_pb2 as pb2

        self.rpc("CancelReservation", pb2.CancelReservationRequest(token=token))

    def acquire(self, place: str) -> None:
        from labgrid.remote.generated import labgrid_coordinator_pb2 as pb2

        self.rpc("AcquirePlace", pb2.AcquirePlaceRequest(placename=place))

    def release_from(self, place: str, holder: str) -> None:
        """Release `place` only if `holder` holds it (atomic at the coordinator)."""
        from labgrid.remote.generated import labgrid_coordinator_pb2 as pb2

        self.rpc("ReleasePlace", pb2.ReleasePlaceRequest(placename=place, fromuser=holder))

    def close(self) -> None:
        async def stop() -> None:
            await self.session.stop()
            await self.session.close()

        try:
            self._call(stop(), 5.0)
        except Exception as exc:  # noqa: BLE001 - closing: nothing left to do about it
            log.debug("labgrid session close: %s", exc)


_CHANNEL_OPTIONS = [  # labgrid's client's own (remote/client.py ClientSession)
    ("grpc.keepalive_time_ms", 7500),
    ("grpc.keepalive_timeout_ms", 10000),
    ("grpc.http2.ping_timeout_ms", 10000),
    ("grpc.http2.max_pings_without_data", 0),
]
_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()


class _QuietLabgrid(logging.Filter):
    """labgrid's client logs to the root logger (`coordinator is unavailable: ...`); hil says
    the same in one line of its own, so those records go to debug level."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "root" and "labgrid" in record.pathname.replace("\\", "/").split("/"):
            log.debug("labgrid: %s", record.getMessage())
            return False
        return True


def _shared_loop() -> asyncio.AbstractEventLoop:
    """The process's one event loop for labgrid sessions, run by a daemon thread (gRPC's
    asyncio layer wants one loop per process)."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            logging.getLogger().addFilter(_QuietLabgrid())
            _LOOP = asyncio.new_event_loop()
            threading.Thread(target=_LOOP.run_forever, name="labgrid", daemon=True).start()
        return _LOOP


class LabgridRefused(Exception):
    """The coordinator said no (a place already acquired, a token gone...)."""


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]


def _place_view(place: Any) -> dict[str, Any]:
    return {"tags": dict(place.tags), "acquired": place.acquired, "reservation": place.reservation,
            "acquired_resources": [tuple(path) for path in place.acquired_resources],
            "matches": [repr(match) for match in place.matches], "comment": place.comment}


@dataclass(frozen=True)
class LabgridPower:
    """A place's NetworkPowerPort driven by labgrid's own NetworkPowerDriver (hil's
    PowerControl: on, off, cycle). Errors are InfraError naming the place, not the URL."""

    place: str
    model: str
    host: str
    index: str
    delay_s: float = 2.0
    """How long `cycle()` leaves the board off (the driver's `delay`)."""
    proxy: str | None = None
    """An isolated exporter's proxy host: the driver reaches the port through it (ssh)."""

    def _driver(self) -> Any:
        from labgrid import Target
        from labgrid.driver import NetworkPowerDriver
        from labgrid.resource import NetworkPowerPort

        from hil.board import labgrid_ssh

        target = Target(f"hil-{self.place}")
        port = NetworkPowerPort(target, name=None, model=self.model, host=self.host, index=self.index)
        if self.proxy:  # as labgrid's RemotePlaceManager sets it from the exporter's data
            port.extra = {"proxy": self.proxy, "proxy_required": True}
        driver = NetworkPowerDriver(target, name=None, delay=float(self.delay_s))
        with labgrid_ssh.serialized():  # activating forwards through the proxy (on_activate)
            if self.proxy:
                labgrid_ssh.connect(self.proxy)
            target.activate(driver)
        return driver

    def _do(self, action: str) -> None:
        log.info("labgrid power %s: %s (%s)", self.place, action, self.model)
        try:
            getattr(self._driver(), action)()
        except InfraError as exc:  # hil's own words (ssh to the proxy): no URL in them
            raise InfraError(f"labgrid power {action} of {self.place}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - any backend failure is the board's infrastructure
            raise InfraError(f"labgrid power {action} of {self.place}: {type(exc).__name__}") from exc

    def on(self) -> None:
        self._do("on")

    def off(self) -> None:
        self._do("off")

    def cycle(self) -> None:
        self._do("cycle")
