"""Processes of the tests: stopping one a test started in a session of its own, and finding
the host's PID of a process a virtual board numbers in its own pid namespace."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any


def stop_process(process: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """SIGTERM by PID; after `timeout` s, SIGKILL of its process group (it leads one: it was
    started with `start_new_session=True`). Waits for it."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def host_pid(namespace: str, board_pid: int) -> int:
    """The host's PID of the process the board numbers `board_pid` in its pid namespace
    `namespace` (`pid:[INODE]`: the board's shells share one of their own)."""
    for folder in Path("/proc").iterdir():
        try:
            if os.readlink(folder / "ns" / "pid") != namespace:
                continue
            nspid = next(line for line in (folder / "status").read_text().splitlines() if line.startswith("NSpid:"))
        except (OSError, StopIteration):
            continue
        if int(nspid.split()[-1]) == board_pid:
            return int(folder.name)
    raise AssertionError(f"no process {board_pid} in the board's pid namespace {namespace}")
