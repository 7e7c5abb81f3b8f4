"""What an acquired labgrid place's resources become for hil: its adb, console, power and
fastboot. The board source that acquires places is hil/pool/labgrid.py.

ADB: labgrid 26.0.1 has no ADB resource; three open pull requests add one, and give the same
class names different meanings. So hil reads an ADB resource by its fields, not its name:

```
pull request   class, as its exporter publishes it         fields                 it is
#1564          NetworkADBDevice                            host, port             a board on TCP
#1564          NetworkUSBADBDevice (its exporter's name    host, port, serialno   the USB device
               for a USBADBDevice), RemoteUSBADBDevice                            behind the
               (its client's class for the same)                                  exporter's adb
#1740, #1809   NetworkADBDevice (its exporter's name for   host, port, serialno   server
               an ADBDevice)
#1740, #1809   RemoteADBDevice                             host, port             a board on TCP

serialno:  adb SERIAL@HOST:PORT (that device, on the adb server at HOST:PORT)
none:      adb HOST:PORT        (the board itself: hil's adb server `adb connect`s it)
```

A USBADBDevice (#1564) or ADBDevice (#1740, #1809) published under its own name comes from an
exporter without that pull request's `ADBExport` (labgrid 26.0.1's exporter publishes a class
it does not know as it is): there is no adb server behind it, and hil says so.

An isolated exporter (`labgrid-exporter --isolated`) publishes `extra.proxy_required`: labgrid
then reaches every address of its resources through ssh to `extra.proxy`, and so does hil
(hil/board/labgrid_ssh.py `reach`: adb, console, power; fastboot runs on the proxy host).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from hil.board import labgrid_ssh
from hil.errors import InfraError
from hil.pool.labgrid_remote import LabgridPower

log = logging.getLogger(__name__)

ADB_CLASSES = ("NetworkADBDevice", "RemoteADBDevice", "RemoteUSBADBDevice", "NetworkUSBADBDevice")
"""Every ADB class an exporter publishes in labgrid pull requests #1564, #1740 and #1809."""
LOCAL_ADB_CLASSES = ("USBADBDevice", "ADBDevice")
"""The exporter-side classes of #1564 and of #1740/#1809, published as such only by an
exporter without their ADBExport."""

Found = dict[str, tuple[str, dict[str, Any]]]
"""A place's resources by class: (exporter, the resource's data as the coordinator has it)."""


class NotYet(InfraError):
    """A resource the exporter has not published completely yet."""


@dataclass(frozen=True)
class Adb:
    """How hil reaches a place's board over adb."""

    adb: str
    """`HOST:PORT` (adb connect), or the serial on `server`."""
    server: str | None
    """`HOST:PORT` of the adb server the device is on; None: hil's own connects it."""
    exporter: str
    host: str
    """The host the resource names (before any forward)."""


def adb_of(found: Found) -> Adb:
    """The place's adb, read by the resource's fields (this module's table)."""
    cls = next((c for c in ADB_CLASSES if c in found), None)
    if cls is None:
        local = next((c for c in LOCAL_ADB_CLASSES if c in found), None)
        if local is not None:
            raise InfraError(f"{local} is published as the exporter's local resource, with no adb "
                             "server behind it: that exporter lacks the ADB export of labgrid pull "
                             "request #1564 (USBADBDevice) or #1740/#1809 (ADBDevice)")
        raise InfraError(f"no adb resource ({', '.join(ADB_CLASSES)}) among "
                         f"{', '.join(sorted(found)) or 'no resources'}")
    exporter, data = found[cls]
    params = _params(data)
    host, port = params.get("host"), params.get("port")
    if not host or not port:
        raise NotYet(f"{cls} has no host:port yet")
    serial = str(params.get("serialno") or "")
    where, at = labgrid_ssh.reach(str(host), int(port), params.get("extra"))
    address = f"{where}:{at}"
    if serial:
        return Adb(serial, address, exporter, str(host))
    return Adb(address, None, exporter, str(host))


def console_of(found: Found) -> tuple[str | None, int]:
    """The console URL of the place's NetworkSerialPort (None without one) and its speed."""
    if "NetworkSerialPort" not in found:
        return None, 115200
    params = _params(found["NetworkSerialPort"][1])
    if not params.get("port"):
        raise NotYet("its NetworkSerialPort has no port yet (ser2net starting)")
    # as labgrid's SerialDriver opens it (driver/serialdriver.py: the proxy's forward when
    # the exporter is isolated); ser2net does not answer RFC 2217's SET_CONTROL, which
    # `ign_set_control` (pyserial-labgrid's) lets pass
    host, port = labgrid_ssh.reach(str(params["host"]), int(params["port"]), params.get("extra"))
    console = (f"socket://{host}:{port}" if params.get("protocol") == "raw"
               else f"rfc2217://{host}:{port}?ign_set_control")
    return console, int(params.get("speed") or 115200)


def power_of(found: Found, place: str) -> LabgridPower | None:
    """The place's NetworkPowerPort, driven by labgrid's NetworkPowerDriver (which forwards
    through the proxy of an isolated exporter itself)."""
    if "NetworkPowerPort" not in found:
        return None
    params = _params(found["NetworkPowerPort"][1])
    extra = params.get("extra") or {}
    proxy = str(extra["proxy"]) if extra.get("proxy_required") and extra.get("proxy") else None
    return LabgridPower(place, str(params.get("model")), str(params.get("host")),
                        str(params.get("index", 0)), proxy=proxy)


def fastboot_of(found: Found, place: str | None) -> tuple[str, str | None]:
    """(`PROTOCOL:ADDRESS:PORT`, the host fastboot runs on) of the place's network fastboot
    resource: labgrid's exporter publishes an AndroidNetFastboot as RemoteAndroidNetFastboot
    {host, address, port, protocol}, and its AndroidFastbootDriver runs `fastboot` on `host`
    (or the proxy) over ssh. ("", None) when it has none: the flash then fails at its first
    step, saying so. A USB fastboot resource (RemoteAndroidUSBFastboot) is not read."""
    for cls in ("RemoteAndroidNetFastboot", "AndroidNetFastboot"):
        if cls in found:
            params = _params(found[cls][1])
            endpoint = (f"{params.get('protocol') or 'udp'}:{params.get('address')}:"
                        f"{int(params.get('port') or 5554)}")
            host = params.get("host")
            via = labgrid_ssh.ssh_host(str(host), params.get("extra")) if host else None
            return endpoint, via
    log.warning("labgrid: %s: images configured but no AndroidNetFastboot resource", place)
    return "", None


def _params(data: dict[str, Any]) -> dict[str, Any]:
    return data.get("params") or {}
