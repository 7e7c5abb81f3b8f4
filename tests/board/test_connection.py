"""hil's own adb connections (hil/board/connection.py) against the real adb server and the
virtual board: the answers adbutils would give, and its error types."""

from __future__ import annotations

import time
from pathlib import Path

import adbutils
import pytest

from hil.board.connection import ServiceConnection, shell_v2
from hil.board.sync import SyncFailed, pull_files, push_files


def test_shell_v2_separates_the_streams_and_keeps_the_exit_status(board_device) -> None:
    seen: list[bytes] = []
    result = shell_v2(board_device, "echo out; echo err >&2; exit 3", 10, on_stderr=seen.append)
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert b"".join(seen) == b"err\n"
    assert result.stdout == board_device.shell2("echo out; echo err >&2; exit 3", v2=True).stdout


def test_shell_v2_closes_the_commands_stdin_as_real_adb_does(board_device) -> None:
    """A command that reads stdin sees its end at once (close-stdin, shell v2 id 4), as under
    `adb shell CMD </dev/null`; without it, it waits for input until the idle timeout."""
    result = shell_v2(board_device, "cat; read line || echo stdin-closed", 20)
    assert (result.returncode, result.stdout) == (0, "stdin-closed\n")


def test_an_unknown_board_is_the_servers_refusal(adb_server) -> None:
    device = adb_server.client.device(serial="127.0.0.1:1")
    with pytest.raises(adbutils.AdbError, match="127.0.0.1:1"):
        ServiceConnection(device, "sync:", 5)


def test_a_refused_push_among_several_names_its_file_and_the_rest_still_work(
    board_device, virtual_board, tmp_path: Path
) -> None:
    files = []
    for name in ("a.bin", "b.pte", "c.bin"):
        (tmp_path / name).write_bytes(name.encode() * 1000)
        files.append((tmp_path / name, f"/data/local/tmp/conn-test/{name}", 0o644))
    virtual_board.control("fault storage-full,path=*.pte", applied_within=30)
    try:
        with pytest.raises(SyncFailed, match=r"push /data/local/tmp/conn-test/b\.pte: .*No space left"):
            push_files(board_device, files)
    finally:
        virtual_board.control("fault clear", applied_within=30)
    assert push_files(board_device, files) == 3 * 5000
    pulled = pull_files(board_device, [remote for _, remote, _ in files])
    assert [pulled[remote] for _, remote, _ in files] == [local.read_bytes() for local, _, _ in files]



def test_disconnect_returns_once_the_server_has_dropped_the_board_and_connect_brings_it_back(
    adb_server, virtual_board, board_device
) -> None:
    """The recovery's reconnect (a dropped transport, then `adb disconnect` and `adb connect`
    at once), repeated: the server never lists the board after `disconnect` returned, and
    `connect` always leaves it in state `device`, whether the server had reconnected the
    dropped transport by itself (it does, after about a second) or not yet."""
    address = virtual_board.address
    for round_ in range(4):
        virtual_board.control("fault drop,on=now", applied_within=30)
        if round_ % 2:
            time.sleep(1.5)  # the server's own reconnect has brought the old transport back
        adb_server.disconnect(address)
        assert address not in [serial for serial, _state in adb_server.devices()], round_
        device = adb_server.connect(address, 30)
        assert device.get_state() == "device"
        assert device.shell(["echo", "back"]).strip() == "back"


def test_a_transport_that_vanishes_after_already_connected_is_connected_again(
    adb_server, virtual_board, board_device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server answers "already connected to" for a transport it is about to remove (one
    kicked by a disconnect whose removal its main loop has not run yet); connect must not
    wait its whole limit on a board the server no longer lists. The interleaving is made
    exact here: the old transport is kicked right after the server's answer."""
    address = virtual_board.address
    answers: list[bool] = []

    def kick_after_the_answer(connected: str, fresh: bool) -> None:
        answers.append(fresh)
        if not fresh and len(answers) == 1:
            adb_server.client.disconnect(address)  # adbutils' own: no wait for the removal

    monkeypatch.setattr(adb_server, "_connected", kick_after_the_answer)
    virtual_board.control("fault drop,on=now", applied_within=30)  # listed, offline
    device = adb_server.connect(address, 8)
    assert answers == [False, True]  # "already connected to", then "connected to"
    assert device.shell(["echo", "back"]).strip() == "back"
