"""`devicefarm-cli -E CMD` on the board: CMD through adbd's shell as given, stopped on the board
when its caller goes away or its time is up.

Upstream's newer `EDBTestManager` (ExecuTorch `backends/samsung/test/utils/runtime_executor.py`)
runs `devicefarm-cli` in a session of its own and kills that process group after 300 s; the
holder then sees the `-E` request's connection close. Closing the shell's stream would not stop
the command: adbd sends the shell SIGHUP and closes its pipes (AOSP `daemon/shell_service.cpp`),
and whatever the shell started lives on (a runner under `timeout` in a group of its own, or one
that never writes again). So the command runs after `echo TAG $$ >&2`, which tells the holder
the shell's PID (the line is taken out of the command's stderr), and stopping it kills every
process of the shell's session: adbd's forked child calls `setsid()` before it execs the shell
(`Subprocess::ForkAndExec`), so the session is the command's alone. The kill is a constant
script of shell built-ins over `/proc/*/stat` (mksh and toybox on a board, the virtual board's
sh): toybox `pkill` and procps' spell the session option and the signal differently, and
`kill -- -PGID` would miss a `timeout`'s own group.
"""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any

from hil.board.adb import ADB_ERRORS, AdbBoard
from hil.board.connection import shell_v2
from hil.errors import InfraError

STOP_SESSION = (
    'n=0; while [ "$n" -lt 3 ]; do n=$((n + 1)); '
    'for f in /proc/[0-9]*/stat; do read -r s 2>/dev/null <"$f" || continue; '
    'set -- ${s##*") "}; [ "$4" = "$0" ] || continue; p=${f#/proc/}; '
    'kill -KILL "${p%/stat}" 2>/dev/null; done; done; true'
)
"""Constant script run as `sh -c SCRIPT SID`: SIGKILL every process of session SID (field 6 of
`/proc/PID/stat`, the 4th after the command name), three passes for what forks meanwhile."""
POLL_S = 0.2
"""How often a running command checks whether its caller is still there."""


class CommandStopped(Exception):
    """The command was stopped on the board (its caller went away, or its time was up): one
    line for the caller."""


class _Stop(Exception):
    """Raised in the read loop to end it."""


def run(board: AdbBoard, command: str, limit_s: float, caller_gone: threading.Event) -> dict[str, Any]:
    """`command` through the board's shell: its exit status, stdout and stderr. CommandStopped
    when `caller_gone` is set or `limit_s` passes first (the command killed on the board);
    InfraError when the board fails."""
    tag = f"hil-exec-{secrets.token_hex(6)}"
    head = bytearray()
    session: list[int] = []
    deadline = time.monotonic() + limit_s
    why = ""

    def note_pid(data: bytes) -> None:  # the shell's PID: the first stderr line, `TAG PID`
        if session or len(head) > 128:
            return
        head.extend(data)
        line, newline, _ = bytes(head).partition(b"\n")
        if newline and line.startswith(tag.encode() + b" ") and line.split()[1].isdigit():
            session.append(int(line.split()[1]))

    def poll() -> float:
        nonlocal why
        if caller_gone.is_set():
            why = "its caller went away"
        elif time.monotonic() > deadline:
            why = f"it ran past {limit_s:g} s (HIL_DEVICEFARM_TIMEOUT_S)"
        else:
            return POLL_S
        raise _Stop

    if caller_gone.is_set():  # it went away while the call waited for its turn: nothing to run
        raise CommandStopped(f"-E: not run on {board.name}: its caller went away")
    try:
        result = shell_v2(board.device, f'echo "{tag} $$" >&2\n{command}', board.idle_timeout_s,
                          on_stderr=note_pid, poll=poll)
    except _Stop:
        stop(board, session[0] if session else None)
        raise CommandStopped(f"-E: stopped on {board.name}: {why}") from None
    except ADB_ERRORS as exc:
        raise InfraError(f"{board.name}: shell failed: {type(exc).__name__}: {exc}") from exc
    stderr = result.stderr
    first, newline, rest = stderr.partition("\n")
    if newline and first.startswith(f"{tag} "):
        stderr = rest
    return {"exit": result.returncode, "stdout": result.stdout, "stderr": stderr}


def stop(board: AdbBoard, session: int | None) -> None:
    """Kill session `session` on the board (its stream is closed already: adbd has sent its
    shell SIGHUP). Without a PID (the command had not started) there is nothing more to do."""
    if session is None:
        return
    result = board.shell(["sh", "-c", STOP_SESSION, str(session)])
    if result.returncode != 0:
        raise InfraError(f"{board.name}: could not stop session {session}: {result.stderr.strip()[:200]}")
