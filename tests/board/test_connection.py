"""hil's own adb connections (hil/board/connection.py) against the real adb server and the
virtual board: the answers adbutils would give, and its error types."""

from __future__ import annotations

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
