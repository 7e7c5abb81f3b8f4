"""A board's kept shell (hil/board/kept_shell.py) answers as a shell of its own per command
would: the same stdout, stderr and exit status, nothing carried from one command to the
next, and a new connection when the one an earlier command left has ended."""

from __future__ import annotations

import threading

import pytest

from hil.board.commands import device_command
from hil.board.connection import shell_v2
from hil.board.kept_shell import KeptShell, KeptShellEnded, _take_status
from hil.board.watchdog import BoardSilent, Watch
from hil.errors import InfraError
from tests.board.test_round_trips import streams


def no_watch() -> float:
    return 1.0


COMMANDS = [
    ["echo", "out"],
    ["sh", "-c", "printf 'no newline'; printf 'err no newline' >&2"],
    ["sh", "-c", "echo to-stderr >&2; exit 3"],
    ["sh", "-c", "kill -SEGV $$"],
    ["sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x; echo; echo done >&2"],
    ["sh", "-c", "echo 'hil-done-0000000000000000' 'lookalike'"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda argv: argv[-1][:20])
def test_a_command_answers_as_in_a_shell_of_its_own(board_device, argv: list[str]) -> None:
    command = device_command(argv)
    alone = shell_v2(board_device, command, 30)
    kept = KeptShell(board_device, 30)
    try:
        for _ in range(2):
            result = kept.run(command, no_watch)
            assert (result.returncode, result.stdout, result.stderr) == (
                alone.returncode, alone.stdout, alone.stderr)
    finally:
        kept.close()


def test_the_exit_status_is_read_however_the_packets_cut_the_sentinel() -> None:
    marker = b"hil-done-0123456789abcdef"
    stream = b"out hil-done-0000000000000000 lookalike\n" + marker + b"127\n"
    for first in range(1, len(stream)):
        for second in range(first, len(stream)):
            stdout, status = bytearray(), None
            for packet in (stream[:first], stream[first:second], stream[second:]):
                assert status is None, (first, second)  # nothing after the sentinel's end
                stdout += packet
                status = _take_status(stdout, marker, len(packet))
            assert (status, bytes(stdout)) == (127, b"out hil-done-0000000000000000 lookalike\n")


def test_nothing_carries_over_and_stdin_is_not_the_next_command(board_device, virtual_board) -> None:
    kept = KeptShell(board_device, 30)
    before = len(streams(virtual_board.root))
    try:
        first = kept.run(device_command(["cd", "/data"], ["export", "LEFT=over"], ["cat"]), no_watch)
        assert first.returncode == 0 and first.stdout == ""  # `cat` read /dev/null, not stdin
        second = kept.run(device_command(["sh", "-c", 'pwd; echo "[$LEFT]"']), no_watch)
        assert second.stdout == "/\n[]\n"
        assert streams(virtual_board.root)[before:] == ["shell,v2"]  # both on one connection
    finally:
        kept.close()


def test_a_shell_that_ended_between_commands_is_replaced(board_device, virtual_board) -> None:
    kept = KeptShell(board_device, 30)
    try:
        pid = kept.run("echo $$", no_watch).stdout.strip()  # a subshell's $$: the kept `sh`
        shell_v2(board_device, device_command(["kill", "-KILL", pid]), 30)
        connection = kept._connection  # noqa: SLF001 - the end must have arrived before the next command
        assert connection is not None and connection.wait_readable(10)
        before = len(streams(virtual_board.root))
        again = kept.run(device_command(["echo", "back"]), no_watch)
        assert again.stdout == "back\n"
        assert streams(virtual_board.root)[before:] == ["shell,v2"]
        with pytest.raises(KeptShellEnded, match="the kept shell ended"):
            kept.run("kill -KILL $$", no_watch)  # it ends while a command runs
        assert kept.run(device_command(["echo", "again"]), no_watch).stdout == "again\n"
    finally:
        kept.close()


def test_the_watch_ends_a_command_that_outlives_the_board(board_device) -> None:
    """A board that stops answering while a command runs: the watch's BoardSilent ends the
    wait (the command's probes fail)."""
    kept = KeptShell(board_device, 30)

    def alive() -> None:
        raise InfraError("device offline")

    watch = Watch(alive, idle_s=1.0, deadline_s=30, on_deadline=lambda: None, what="runner")
    try:
        with pytest.raises(BoardSilent, match="did not answer for 1 s"):
            kept.run(device_command(["sleep", "20"]), watch.poll)
    finally:
        kept.close()


def test_closing_the_shell_from_another_thread_ends_a_command_it_waits_on(board_device) -> None:
    """What `AdbBoard.cleanup` does after a stop, while the case's thread waits for output:
    the wait ends at once with an adb error (InfraError to the case), not when the command
    ends (it did: a `select` in progress is not woken by a `close` in another thread)."""
    marker = "/data/local/tmp/kept-shell-command-ended"
    shell_v2(board_device, device_command(["rm", "-f", marker]), 30)
    kept = KeptShell(board_device, 30)
    started = threading.Event()

    def close_once_waiting() -> None:
        started.wait(10)
        kept.close()

    def watch() -> float:
        started.set()
        return 60.0  # longer than the command: only the close can end the wait before it

    closer = threading.Thread(target=close_once_waiting)
    closer.start()
    try:
        with pytest.raises((EOFError, OSError)):
            kept.run(device_command(["sh", "-c", f"sleep 20; touch {marker}"]), watch)
        assert shell_v2(board_device, device_command(["ls", marker]), 30).returncode != 0
    finally:
        closer.join()
        kept.close()
