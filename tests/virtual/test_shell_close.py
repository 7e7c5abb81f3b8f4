"""A shell whose stream closes, as adbd treats it (AOSP `daemon/shell_service.cpp`,
`Subprocess::PassDataStreams`): SIGHUP to the shell's pid and its pipes closed. What the shell
started in a process group of its own (toybox `timeout` makes one) lives on, as a runner does on
a board; a reboot ends it."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import adbutils
import pytest

from hil.adbserver import AdbServer
from hil.board.connection import SHELL_HEADER, SHELL_STDERR, SHELL_STDOUT, ServiceConnection
from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board
from tests.adb_lab import wait_for
from tests.processes import host_pid

# a case's shape in hil's run shell: a subshell reading /dev/null, the runner under `timeout`; run
# as the shell service's own command, so that `$$` is the shell adbd signals
CASE = "echo $$; ( timeout 300 sh -c 'echo $$ >&2; exec sleep 300' ) </dev/null; echo done"


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def _start_case(device: adbutils.AdbDevice) -> tuple[ServiceConnection, int, int, int]:
    """A shell running a case's runner (a `sleep`): the connection, the shell's and the
    runner's PIDs as the host numbers them, and the runner's on the board (the board prints
    its own: its first stdout and stderr lines)."""
    namespace = device.shell2("readlink /proc/self/ns/pid", v2=True).stdout.strip()
    connection = ServiceConnection(device, f"shell,v2:{CASE}", 30)
    lines = {SHELL_STDOUT: b"", SHELL_STDERR: b""}
    while not all(line.endswith(b"\n") for line in lines.values()):
        kind, length = SHELL_HEADER.unpack(connection.read_exact(SHELL_HEADER.size))
        data = connection.read_exact(length)
        if kind in lines:
            lines[kind] += data
    shell, runner = int(lines[SHELL_STDOUT]), int(lines[SHELL_STDERR])
    return connection, host_pid(namespace, shell), host_pid(namespace, runner), runner


@pytest.fixture(scope="module")
def rebooting_board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtualBoardProcess]:
    with start_virtual_board(tmp_path_factory.mktemp("board-reboots"), "E9955", "hil-test-hangup",
                             ["--reboot-seconds", "0.5"]) as board:
        yield board


def test_a_closed_shell_is_hung_up_and_a_runner_in_a_group_of_its_own_lives_on(
    board_device: adbutils.AdbDevice,
) -> None:
    connection, shell, runner, on_board = _start_case(board_device)
    try:
        assert not _gone(runner)
        connection.close()
        wait_for(lambda: _gone(shell), 10.0, f"the shell (pid {shell}) to end on its SIGHUP")
        assert not _gone(runner), "the runner under timeout was killed with its shell"
        assert board_device.shell2(f"kill -0 {on_board}", v2=True).returncode == 0  # the board sees it too
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(runner, signal.SIGKILL)


def test_a_reboot_ends_what_outlived_its_shell(adb_server: AdbServer, rebooting_board: VirtualBoardProcess) -> None:
    device = adb_server.connect(rebooting_board.address, timeout=30.0)
    connection, shell, runner, _ = _start_case(device)
    connection.close()
    wait_for(lambda: _gone(shell), 10.0, f"the shell (pid {shell}) to end")
    try:
        rebooting_board.control("reboot", applied_within=30)
        wait_for(lambda: _gone(runner), 10.0, f"the runner (pid {runner}) to end with the reboot")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(runner, signal.SIGKILL)
        adb_server.disconnect(rebooting_board.address)
