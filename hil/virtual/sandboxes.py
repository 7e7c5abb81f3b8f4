"""The virtual board's running shells, and `/data` made read-only (or writable) under them.

Each shell runs in a bubblewrap sandbox whose `/data` is a bind mount of the board's data
folder (`Device.sandbox_argv`). A real board's `/data` remounted read-only (an ext4 error)
is read-only at once for every process, a shell started before it included: a case's run
shell goes through the board's kept shell (hil/board/kept_shell.py), started long before.
So `remount_data` remounts `/data` in the mount namespace of every running sandbox
(`nsenter --mount`, then `mount -o remount,bind,ro|rw`), as well as new sandboxes binding it
read-only. It needs what bubblewrap itself needs here (root, or CAP_SYS_ADMIN); where the
remount fails the board logs it, and the shells started before keep a writable `/data`.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

REMOUNT_TIMEOUT_S = 10.0


class Sandboxes:
    """The bwrap processes of a board's running shells (`add` each one started)."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self._running: set[asyncio.subprocess.Process] = set()
        self._log = log

    def add(self, process: asyncio.subprocess.Process) -> None:
        """A sandbox just started (its bwrap process); ended ones are forgotten here: a
        process not yet reaped keeps its PID, so no PID here belongs to anything else."""
        self._running = {p for p in self._running if p.returncode is None}
        self._running.add(process)

    def remount_data(self, readonly: bool) -> int:
        """Remount `/data` read-only (or writable) in every running sandbox; the number
        remounted."""
        mode = "ro" if readonly else "rw"
        nsenter = shutil.which("nsenter")
        done = 0
        for process in list(self._running):
            if process.returncode is not None:
                continue
            inner = _sandboxed_child(process.pid)
            if inner is None:
                continue
            if nsenter is None:
                self._log(f"/data not remounted {mode} in running shell {inner}: no nsenter")
                continue
            result = subprocess.run(  # noqa: S603 - a fixed argument list
                [nsenter, "--target", str(inner), "--mount", "--",
                 "mount", "-o", f"remount,bind,{mode}", "/data"],
                capture_output=True, text=True, timeout=REMOUNT_TIMEOUT_S, check=False,
            )
            if result.returncode == 0:
                done += 1
            else:
                self._log(f"/data not remounted {mode} in running shell {inner}: "
                          f"{(result.stderr or result.stdout).strip()[:200]}")
        return done


def _sandboxed_child(bwrap_pid: int) -> int | None:
    """The process bwrap started in the sandbox's namespaces (the shell), or None when it
    has none (yet, or any more)."""
    try:
        children = Path(f"/proc/{bwrap_pid}/task/{bwrap_pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def shell_pid(bwrap_pid: int) -> int | None:
    """The shell a sandbox runs (what adbd's forked child is on a board), or None once it has
    ended."""
    return _sandboxed_child(bwrap_pid)
