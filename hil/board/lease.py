"""One owner per board: an exclusive lease for the length of a run.

A lease is an `fcntl.flock` on a file named after the board's key in a folder every hil on
this host shares (`HIL_LEASE_DIR`, default `/tmp/exynos-hil-leases`; `hil replicate` mounts
it into the container). The kernel drops the lock when its holder's file is closed, which
happens when hil releases the board, ends, is killed by SIGTERM or SIGKILL, or crashes: a
dead holder's lease is taken over at once, and there is no stale state to clean.
While held, the file says who holds it (run id, pid, host, since) so a waiting run can say so.

The key names the physical board: a network board by its address (one board, whichever
server reaches it), except loopback addresses and USB serials, which only mean something on
the host of their adb server, so they are prefixed with that host.

Leases exclude the hil processes of one host (several runner instances sharing a lab). Runs
on two hosts that both reach one board through a lab server are not excluded by this.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hil.errors import InfraError

log = logging.getLogger(__name__)

LEASE_DIR_ENV = "HIL_LEASE_DIR"
DEFAULT_LEASE_DIR = Path("/tmp/exynos-hil-leases")  # noqa: S108 - shared by design, mode 1777
POLL_S = 0.25
"""Seconds between two tries at a busy board."""


def lease_dir() -> Path:
    """The folder of this host's leases."""
    return Path(os.environ.get(LEASE_DIR_ENV) or DEFAULT_LEASE_DIR)


def ensure_lease_dir(folder: Path | None = None) -> Path:
    """Create the lease folder, writable by every user (sticky, like /tmp)."""
    folder = folder or lease_dir()
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # someone else's folder: use it as it is
            folder.chmod(0o1777)
    return folder


def is_loopback(host: str) -> bool:
    """True for this machine's own names (`127.x.x.x`, `localhost`)."""
    return host == "localhost" or host.startswith("127.")


def board_key(adb: str, server_host: str | None) -> str:
    """The lease key of a board: its adb id, prefixed with `localhost/` or the server's host
    when the id only means something there (a USB serial, a loopback address).
    `server_host` None: hil's private server (this host)."""
    host, sep, _port = adb.rpartition(":")
    if sep and not is_loopback(host):
        return adb
    where = "localhost" if server_host is None or is_loopback(server_host) else server_host
    return f"{where}/{adb}"


def _file_name(key: str) -> str:
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", key)[:80]
    return f"{readable}-{hashlib.sha256(key.encode()).hexdigest()[:8]}.lease"


@dataclass(frozen=True)
class Holder:
    """Who holds a lease."""

    run: str
    pid: int
    host: str
    since: str
    """ISO 8601 UTC."""

    def describe(self) -> str:
        """`run 2026... (pid 123 on host, since 17:22:13Z)`."""
        return f"run {self.run} (pid {self.pid} on {self.host}, since {self.since})"


class Lease:
    """A held lease; `release()` (or the holder's death) frees the board."""

    def __init__(self, key: str, fd: int, waited_s: float, waited_for: Holder | None) -> None:
        self.key = key
        self._fd: int | None = fd
        self.waited_s = waited_s
        """Seconds spent waiting for the board."""
        self.waited_for = waited_for
        """Who held it when this run started waiting, if anyone."""

    def record(self) -> dict[str, Any]:
        """The board's `lease` entry in results.json."""
        return {"key": self.key, "waited_s": round(self.waited_s, 2),
                "waited_for": self.waited_for.describe() if self.waited_for else None}

    def release(self) -> None:
        """Unlock and close (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing drops the flock


def read_holder(path: Path) -> Holder | None:
    """The holder written in a lease file; None when empty or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "null")
        return Holder(str(data["run"]), int(data["pid"]), str(data["host"]), str(data["since"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def holder_of(key: str, folder: Path | None = None) -> Holder | None:
    """Who the lease file of `key` says holds it (None: nobody wrote it, or it is free)."""
    return read_holder((folder or lease_dir()) / _file_name(key))


def acquire(
    key: str,
    run_id: str,
    wait_s: float,
    on_busy: Callable[[Holder | None], None] | None = None,
    folder: Path | None = None,
    cancelled: threading.Event | None = None,
) -> Lease:
    """Take the lease of `key`, waiting up to `wait_s` seconds while another process holds
    it (`on_busy(holder)` is called once, when the wait starts). InfraError naming the holder
    when it is still busy after the wait (or when `cancelled` is set)."""
    path = ensure_lease_dir(folder) / _file_name(key)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise InfraError(f"lease of {key}: cannot open {path}: {exc}") from exc
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)  # another user's run must be able to take it over
    start = time.monotonic()
    holder: Holder | None = None
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            pass
        except OSError as exc:
            os.close(fd)
            raise InfraError(f"lease of {key}: cannot lock {path}: {exc}") from exc
        current = read_holder(path)
        if holder is None:
            holder = current or Holder("?", 0, "?", "?")
            if on_busy is not None:
                on_busy(current)
        elif current is not None:
            holder = current
        waited = time.monotonic() - start
        if waited >= wait_s or (cancelled is not None and cancelled.is_set()):
            os.close(fd)
            raise InfraError(
                f"busy: held by {holder.describe()}; waited {waited:.1f} s (--board-wait {wait_s:g})"
            )
        time.sleep(min(POLL_S, max(0.01, wait_s - waited)))
    mine = {"run": run_id, "pid": os.getpid(), "host": socket.gethostname(),
            "since": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "key": key}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(mine).encode(), 0)
    return Lease(key, fd, time.monotonic() - start, holder)
