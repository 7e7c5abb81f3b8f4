"""Bringing a board up (hil/board/preflight.py) when hil's own adb server dies meanwhile."""

from __future__ import annotations

import os
import signal
import time
from types import SimpleNamespace

import pytest

from hil.adbserver import AdbServer
from hil.board.inventory import InventoryEntry
from hil.board.preflight import BoardReport, _identity, connect_keeping_server, identity_problems
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


def test_preflight_names_an_adbd_without_shell_v2(tmp_path) -> None:
    """hil reads the runner's exit status and stderr through the shell protocol: a board whose
    adbd lacks `shell_v2` (before Android 7) is refused, and the reason names the feature."""
    from hil.board.adb import AdbBoard
    from hil.board.preflight import VIRTUAL_RUNNER, inspect_board
    from hil.virtual.launcher import start_virtual_board

    entry = InventoryEntry(name="old", adb="")
    with AdbServer(socket_timeout=10.0) as server, \
            start_virtual_board(tmp_path / "old", "E9955", "old-adbd", ["--fault", "old-adbd"]) as board:
        device = server.connect(board.address, timeout=10.0)
        probe = AdbBoard("old", board.address, device, "preflight", VIRTUAL_RUNNER, 10.0, 10.0)
        problems = inspect_board(probe, entry, "E9955", console=False).problems
        server.disconnect(board.address)
    assert any("does not offer shell_v2" in problem for problem in problems), problems


def test_an_unauthorized_board_is_refused_at_once_with_the_hint(tmp_path) -> None:
    """A board that never accepts the host's key is not waited for: the error says at once
    what a person has to do."""
    from hil.attention import NeedsPerson
    from hil.virtual.launcher import start_virtual_board

    with AdbServer(socket_timeout=10.0) as server, \
            start_virtual_board(tmp_path / "locked", "E9955", "locked", ["--fault", "auth-refused"]) as board:
        with pytest.raises(NeedsPerson, match="adb key"):  # not InfraError after the 60 s
            server.connect(board.address, timeout=60.0)
        server.disconnect(board.address)


class _Board:
    """A board whose shell answers like toybox: `ls -d` lists the paths that exist."""

    def __init__(self, files: set[str]) -> None:
        self.files = files

    def properties(self) -> dict[str, str]:
        return {"ro.soc.model": "S5E9955"}

    def shell(self, argv: list[str]) -> SimpleNamespace:
        if argv[:2] == ["ls", "-d"]:
            return SimpleNamespace(stdout="\n".join(p for p in argv[2:] if p in self.files), returncode=1)
        if argv[0] == "uname":
            return SimpleNamespace(stdout="aarch64\n", returncode=0)
        return SimpleNamespace(stdout="Filesystem 1K-blocks Used Available\n/dev/x 9999999 1 9999999\n",
                               returncode=0)


@pytest.mark.parametrize("folder", ["/vendor/lib64", "/system/lib64", "/system_ext/lib64", "/odm/lib64",
                                    "/product/lib64"])
def test_the_enn_library_is_found_in_every_folder_the_runner_loads_it_from(folder: str) -> None:
    # a runner started from /data/local/tmp dlopens it by its bare name from any partition's
    # lib64 the linker namespaces search (linkerconfig), not only /vendor and /system
    report = BoardReport("b", "127.0.0.1:1", "E9955")
    _identity(_Board({f"{folder}/libenn_public_api_cpp.so"}), report)
    assert report.vendor_lib == f"{folder}/libenn_public_api_cpp.so"
    assert not identity_problems(report, None)
    missing = BoardReport("b", "127.0.0.1:1", "E9955")
    _identity(_Board(set()), missing)
    assert any("missing from /vendor/lib64, /system/lib64, /system_ext/lib64, /odm/lib64, /product/lib64"
               in problem for problem in identity_problems(missing, None))
