"""Stopping a process a test started in a session of its own (`start_new_session=True`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
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
