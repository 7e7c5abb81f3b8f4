"""A board's kept shell: one `shell,v2:sh` connection kept from case to case, each case's run
shell written to its stdin.

A run shell of its own per case cost a TCP connection to the adb server, two requests, and
the stream's open and close at adbd: the adb server's and hil's largest share of a case's
CPU after the runner's own output (scripts/bench_boards.py). Here one `sh` on the board reads
the cases' commands one at a time: for `shell,v2:sh` adbd execs `/system/bin/sh -c sh`, its
stdin and stdout one socketpair and its stderr another, and passes the shell protocol's
stdin packets to it (AOSP `adb/daemon/shell_service.cpp`, `Subprocess::ForkAndExec`,
`PassDataStreams`). Each runs in a subshell with stdin from /dev/null (nothing
it starts can read the next command, and a `cd` or variable does not outlive it) and is
followed by two sentinel lines carrying a tag new to each command: `TAG<status>` on stdout
(`$?`: the exit status the shell v2 exit packet carried, 128+N for a signal) and `TAG` on
stderr. Each stream is complete once its sentinel has arrived: adbd forwards stdout and
stderr from two pipes in whatever order it reads them, each in order.

The connection is opened on first use and again when the one an earlier case left has ended
(an adb disconnect, a reboot): a connection that has bytes or an end to read before a
command is sent is not trusted. After a failed case (`AdbBoard.close_links`) it is closed:
adbd sends the `sh` SIGHUP and closes its pipes (`PassDataStreams`), which does not end a
runner still running (under `timeout`, in a process group of its own): `AdbBoard.run` kills it
by its recorded PID, and its board-side backstop ends it when the board did not answer.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import adbutils

from hil.board import limits
from hil.board.connection import (
    SHELL_EXIT,
    SHELL_HEADER,
    SHELL_STDERR,
    SHELL_STDIN,
    SHELL_STDOUT,
    ServiceConnection,
)

_STATUS_DIGITS = 3
"""An exit status (0-255) has at most three digits."""


def sentinel_script(command: str, tag: str) -> bytes:
    """What the kept shell's stdin gets for `command` (see the module docstring): the command
    in a subshell reading /dev/null, then `TAG<status>` on stdout and `TAG` on stderr."""
    return f'( {command} ) </dev/null; echo "{tag}$?"; echo {tag} >&2\n'.encode()


def _take_status(stdout: bytearray, marker: bytes, arrived: int) -> int | None:
    """The exit status in the stdout sentinel `MARKER<status>\n`, when its last `arrived`
    bytes completed it (then cut from `stdout`); else None. Found with `find`, not a regular
    expression: the marker is new to each command, so a pattern built from it was compiled
    anew at every case (`re`'s cache never hit), a tenth of hil's CPU per case."""
    at = stdout.find(marker, max(0, len(stdout) - arrived - len(marker) - _STATUS_DIGITS - 1))
    if at < 0:
        return None
    end = stdout.find(b"\n", at + len(marker))
    if end < 0:
        return None
    digits = stdout[at + len(marker):end]
    if not digits.isdigit():
        return None
    del stdout[at:]
    return int(digits)


class KeptShellEnded(EOFError):
    """The kept shell's `sh` exited (its exit packet came) while a command was running."""


class KeptShell:
    """One kept `shell,v2:sh` connection to a board; `run(command)` returns what
    `connection.shell_v2` would. One command at a time (a board runs one case at a time)."""

    def __init__(self, device: adbutils.AdbDevice, timeout: float) -> None:
        """`timeout`: the idle timeout of the connection's set-up and of a packet's rest once
        its first bytes have arrived (the wait for output is `run`'s `poll`'s)."""
        self.device = device
        self._timeout = timeout
        self._connection: ServiceConnection | None = None

    def _ready(self) -> ServiceConnection:
        connection = self._connection
        if connection is not None and connection.wait_readable(0):
            self.close()  # an end (or stray bytes) since the last command: start afresh
            connection = None
        if connection is None:
            connection = self._connection = ServiceConnection(self.device, "shell,v2:sh", self._timeout)
        return connection

    def run(
        self,
        command: str,
        poll: Callable[[], float],
        on_stderr: Callable[[bytes], None] | None = None,
        heard: Callable[[], None] | None = None,
    ) -> adbutils.ShellReturn:
        """Run `command` (a `device_command`) in the kept shell. `poll` (the watchdog,
        `watchdog.Watch.poll`) is asked before each wait for output: it returns the longest
        wait in seconds, and raises to end the call; `heard` (`watchdog.Watch.heard`) is told
        when a packet has arrived; `on_stderr` sees each stderr packet as it arrives.
        EOFError (KeptShellEnded) when the shell ends first."""
        connection = self._ready()
        tag = f"hil-done-{secrets.token_hex(8)}"
        script = sentinel_script(command, tag)
        connection.sendall(SHELL_HEADER.pack(SHELL_STDIN, len(script)) + script)
        marker = tag.encode()
        stdout, stderr = bytearray(), bytearray()
        status: int | None = None
        stderr_done = False
        while status is None or not stderr_done:
            if not connection.wait_readable(poll()):
                continue
            kind, length = SHELL_HEADER.unpack(connection.read_exact(SHELL_HEADER.size))
            try:  # what the board may send is bounded (limits.py)
                data = connection.read_exact(limits.shell_packet(length)) if length else b""
                limits.shell_output(len(stdout) + len(stderr) + len(data))
            except limits.BoardOverflow:
                self.close()  # out of step, and the board keeps writing: adbd ends the sh
                raise
            if heard is not None:
                heard()
            if kind == SHELL_STDOUT:
                stdout += data
                if status is None:
                    status = _take_status(stdout, marker, len(data))
            elif kind == SHELL_STDERR:
                stderr += data
                if on_stderr is not None:
                    on_stderr(data)
                if not stderr_done and stderr.endswith(marker + b"\n"):
                    stderr_done = True
                    del stderr[-len(marker) - 1:]
            elif kind == SHELL_EXIT:
                self.close()
                raise KeptShellEnded(f"the kept shell ended (exit {data[0] if data else '?'})")
        out = stdout.decode("utf-8", "replace")
        err = stderr.decode("utf-8", "replace")
        return adbutils.ShellReturn(command=command, returncode=status, output=out + err,
                                    stderr=err, stdout=out)

    def close(self) -> None:
        """Close the connection (adbd ends the shell); the next `run` opens a new one."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
