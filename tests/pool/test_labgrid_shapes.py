"""Every ADB resource shape of labgrid's three open ADB pull requests, published through a real
`labgrid-exporter` to a real coordinator (tests/pool/labgrid_lab.py), read by hil by its fields.

One virtual board stands behind every place: on TCP as itself, and connected to a lab's adb
server (a real `adb server` the test starts, tests/adb_lab.py) as the USB device behind an
exporter's adb server is. Each place's one resource is published as that pull request's
exporter publishes it:

```
place             class (pull request)                       params
tcp-1564          NetworkADBDevice (#1564)                   host, port: the board
usb-1564          NetworkUSBADBDevice (#1564's exporter)     host, port: the adb server; serialno
usb-1564-client   RemoteUSBADBDevice (#1564's client class)  host, port: the adb server; serialno
usb-1740-1809     NetworkADBDevice (#1740, #1809)            host, port: the adb server; serialno
tcp-1740-1809     RemoteADBDevice (#1740, #1809)             host, port: the board
local-adbdevice   ADBDevice, as an exporter without #1740/#1809's ADBExport publishes it
```
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hil.board.labgrid_spec import parse_labgrid_spec
from hil.board.preflight import connect
from hil.board.servers import BoardServers
from hil.errors import InfraError
from hil.interrupts import Stop
from hil.lower.cache import default_cache_dir
from hil.pool.labgrid import LabgridSource
from hil.virtual.launcher import start_virtual_board
from tests.adb_lab import LabServer
from tests.pool.labgrid_lab import Processes, start_coordinator, start_exporter

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "fixtures" / "tiny.yaml"
SERIAL = "lab-shapes"
TCP = ("tcp-1564", "tcp-1740-1809")
ON_SERVER = ("usb-1564", "usb-1564-client", "usb-1740-1809")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("shapes")
    processes = Processes()
    with LabServer() as server, start_virtual_board(root / "board", "E9955", SERIAL,
                                                    trusted_keys=[server.public_key]) as board:
        server.connect(board.address)  # the lab's adb server has the device, as over USB
        host, port = board.address.split(":")
        on_server = {"host": "127.0.0.1", "port": server.port, "serialno": board.address}
        groups = {
            "tcp-1564": {"NetworkADBDevice": {"host": host, "port": int(port)}},
            "usb-1564": {"NetworkUSBADBDevice": dict(on_server)},
            "usb-1564-client": {"RemoteUSBADBDevice": dict(on_server)},
            "usb-1740-1809": {"NetworkADBDevice": dict(on_server)},
            "tcp-1740-1809": {"RemoteADBDevice": {"host": host, "port": int(port)}},
            "local-adbdevice": {"ADBDevice": {"serialno": "R3CX40ABCDE"}},
        }
        try:
            address = start_coordinator(processes, root, {
                name: ("shapes", name, {"soc": "e9955", "shape": name}) for name in groups})
            start_exporter(processes, root, address, "shapes", groups)
            yield {"address": address, "board": board, "server": server, "root": root}
        finally:
            processes.stop()


def _open(address: str, *places: str) -> tuple[LabgridSource, list[Any]]:
    source = LabgridSource(address, [parse_labgrid_spec(f"labgrid:place={p}") for p in places])
    return source, source.open(30, Stop())


def test_each_shape_is_read_by_its_fields_and_reaches_the_board(lab: dict[str, Any]) -> None:
    """A serialno means that device on the adb server at HOST:PORT; none means HOST:PORT to
    `adb connect`. Through each place, hil's own bring-up connect reaches the one board."""
    board, server = lab["board"], lab["server"]
    source, entries = _open(lab["address"], *TCP, *ON_SERVER)
    try:
        by_place = {e.labgrid["place"]: e for e in entries}
        assert set(by_place) == {*TCP, *ON_SERVER}
        for place in TCP:
            assert (by_place[place].adb, by_place[place].adb_server) == (board.address, None), place
        for place in ON_SERVER:
            assert (by_place[place].adb, by_place[place].adb_server) == (board.address, server.address), place
        with BoardServers() as servers:
            for place, entry in sorted(by_place.items()):
                device = connect(entry, servers.server_for(entry), entry.adb, 30)
                assert device.shell(["getprop", "ro.serialno"]).strip() == SERIAL, place
                assert servers.address_for(entry) == (server.address if place in ON_SERVER else None)
    finally:
        source.close()
    assert server.devices() == {board.address: "device"}  # the lab's server as it was


def test_a_run_on_the_adb_server_shape_of_1740_and_1809(lab: dict[str, Any], tmp_path: Path) -> None:
    """`NetworkADBDevice {host, port, serialno}` (#1740, #1809): the device on the exporter's
    adb server, never an `adb connect` to the server's port."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LG_", "ANDROID_ADB_SERVER"))}
    env.update(HIL_LEASE_DIR=str(tmp_path / "leases"), HIL_CACHE_DIR=str(default_cache_dir()))
    done = subprocess.run(
        [sys.executable, "-m", "hil", "run", "--labgrid", lab["address"], "--board", "labgrid:shape=usb-1740-1809",
         "--suite", str(TINY), "--flow", "portable", "--out", str(tmp_path / "out")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [c["verdict"] for c in doc["cases"]] == ["PASS"] * 3
    (record,) = doc["run"]["boards"]
    assert record["adb_server"] == lab["server"].address
    assert record["labgrid"]["place"] == "usb-1740-1809"


def test_a_local_adb_resource_without_an_adb_server_is_refused_in_one_line(lab: dict[str, Any]) -> None:
    """labgrid 26.0.1's exporter publishes an ADBDevice as it is (no ADBExport): no adb server
    behind it; hil says why instead of waiting for an address."""
    with pytest.raises(InfraError) as refused:
        _open(lab["address"], "local-adbdevice")
    message = str(refused.value)
    assert "local-adbdevice: ADBDevice is published as the exporter's local resource" in message
    assert "#1740/#1809" in message and "\n" not in message
