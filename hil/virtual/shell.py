"""Shell services of the virtual board: `shell:`, `shell,v2,...:` and `exec:`.

A command runs in the device sandbox (`device.py`); its output goes to the host as it comes, as
shell v2 packets (stdout, stderr, exit status) or, for v1 and `exec:`, raw merged output.

A stream closed by the host (or a dropped transport) is what adbd makes of it (AOSP
`daemon/shell_service.cpp`, `Subprocess::PassDataStreams`): SIGHUP to the shell's pid and its
pipes closed, nothing more. A v1 or `exec:` shell runs on a PTY there, whose hang-up signals the
shell's process group; here the group gets the SIGHUP. What the shell started in a process group
of its own (toybox `timeout` makes one) lives on, as on a board, until it ends, is killed, or the
board reboots (`Device.end_processes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import struct

from hil.virtual.device import Device
from hil.virtual.sandboxes import shell_pid
from hil.virtual.stream import Stream

SHELL_STDIN, SHELL_STDOUT, SHELL_STDERR, SHELL_EXIT, SHELL_CLOSE_STDIN = 0, 1, 2, 3, 4
_SHELL_PACKET = struct.Struct("<BI")


def parse_shell(name: str) -> tuple[bool, dict[str, str], str | None] | None:
    """(v2, env, command) of a `shell[,ARG...]:COMMAND` service; None if not a shell."""
    head, sep, command = name.partition(":")
    args = head.split(",")
    if not sep or args[0] != "shell":
        return None
    env = {}
    for arg in args[1:]:
        if arg.startswith("TERM="):
            env["TERM"] = arg.removeprefix("TERM=")
    return "v2" in args[1:], env, command or None


def exit_status(returncode: int) -> int:
    """A shell's exit status: the code, or 128+N for a process killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


async def serve_shell(
    device: Device, stream: Stream, command: str | None, env: dict[str, str], v2: bool
) -> None:
    """Run a command in the sandbox and stream its output: shell v2 packets
    (stdout, stderr, exit) or, for v1 and exec, raw merged output."""
    proc = await device.spawn(command, env, merge_stderr=not v2)
    assert proc.stdin is not None and proc.stdout is not None
    pumps = [asyncio.create_task(_pump_out(stream, proc.stdout, SHELL_STDOUT if v2 else None))]
    if v2:
        assert proc.stderr is not None
        pumps.append(asyncio.create_task(_pump_out(stream, proc.stderr, SHELL_STDERR)))
    feeder = asyncio.create_task(_pump_in(stream, proc.stdin, v2))
    finished = False
    try:
        await asyncio.gather(*pumps)
        status = exit_status(await proc.wait())
        if v2:
            await stream.write(_SHELL_PACKET.pack(SHELL_EXIT, 1) + bytes([status & 0xFF]))
        finished = True
    finally:
        for task in [*pumps, feeder]:
            task.cancel()
        await asyncio.gather(*pumps, feeder, return_exceptions=True)
        if not finished:
            hang_up(proc, v2)  # the process is reaped by asyncio's child watcher when it ends


def hang_up(proc: asyncio.subprocess.Process, v2: bool) -> None:
    """What adbd does to a shell whose stream closed: SIGHUP to the shell (`kill(pid_,
    SIGHUP)`; its process group for a v1 or `exec:` shell, as a PTY's hang-up), then its
    pipes closed, so that whatever writes to them later gets EPIPE or SIGPIPE (adbd resets
    SIGPIPE to its default for the shell)."""
    shell = shell_pid(proc.pid)  # the sandboxed `sh`, a session of its own (bwrap --new-session)
    if shell is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if v2:
                os.kill(shell, signal.SIGHUP)
            else:
                os.killpg(shell, signal.SIGHUP)
    transport = proc._transport  # noqa: SLF001 - asyncio keeps the pipes' transports there
    for fd in (0, 1, 2):
        pipe = transport.get_pipe_transport(fd)
        if pipe is not None:
            pipe.close()


async def _pump_out(stream: Stream, reader: asyncio.StreamReader, packet_id: int | None) -> None:
    """Forward a command's output as it comes, as shell v2 packets when `packet_id`."""
    size = stream.maxdata - (_SHELL_PACKET.size if packet_id is not None else 0)
    while data := await reader.read(size):
        if packet_id is not None:
            data = _SHELL_PACKET.pack(packet_id, len(data)) + data
        await stream.write(data)


async def _pump_in(stream: Stream, stdin: asyncio.StreamWriter, v2: bool) -> None:
    """Feed the host's data to the command's stdin (shell v2: stdin and close-stdin
    packets; v1: the raw stream)."""
    while True:
        if v2:
            packet_id, size = _SHELL_PACKET.unpack(await stream.readexactly(_SHELL_PACKET.size))
            data = await stream.readexactly(size)
            if packet_id == SHELL_CLOSE_STDIN:
                stdin.close()
                continue
            if packet_id != SHELL_STDIN:
                continue
        else:
            data = await stream.recv()
        if stdin.is_closing():
            continue
        try:
            stdin.write(data)
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            stdin.close()
