"""Bringing a board up (hil/board/preflight.py) when hil's own adb server dies meanwhile."""

from __future__ import annotations

import os
import signal
import time

import pytest

from hil.adbserver import AdbServer
from hil.board.inventory import InventoryEntry
from hil.board.preflight import connect_keeping_server
from hil.board.recovery import ServerKeeper
from hil.errors import InfraError
from hil.virtual.launcher import VirtualBoardProcess


def _kill(server: AdbServer) -> None:
    assert server.pid is not None
    os.kill(server.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the port refuses once the process is gone
        try:
            server.client.server_version()
        except Exception:  # noqa: BLE001 - refused: OSError, or adbutils' own wrapping
            return
        time.sleep(0.05)
    pytest.fail("the adb server still answers after SIGKILL")


def test_a_board_comes_up_when_the_adb_server_died_during_its_bring_up(
    virtual_board: VirtualBoardProcess,
) -> None:
    # adb 29.0.6 segfaulted once while four boards came up (a soak): every board was then
    # "not usable" for the whole run
    entry = InventoryEntry(name="b", adb=virtual_board.address)
    with AdbServer(socket_timeout=10.0) as server:
        keeper = ServerKeeper(server)
        _kill(server)
        device = connect_keeping_server(entry, server, keeper, virtual_board.address, 3.0)
        assert keeper.restarts == 1
        assert device.shell(["echo", "up"]).strip() == "up"
        server.disconnect(virtual_board.address)


def test_an_unreachable_board_is_its_own_error_and_the_live_server_is_kept() -> None:
    entry = InventoryEntry(name="gone", adb="127.0.0.1:9")  # the discard port: nobody there
    with AdbServer(socket_timeout=10.0) as server:
        keeper = ServerKeeper(server)
        pid = server.pid
        with pytest.raises(InfraError, match="127.0.0.1:9"):
            connect_keeping_server(entry, server, keeper, entry.adb, 2.0)
        assert (keeper.restarts, server.pid) == (0, pid)
