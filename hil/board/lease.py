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

On a host several users share, the folder and its files are checked before hil writes:
the folder must be a real folder (not a symbolic link) owned by root or by the user, and
sticky when others may write to it (`1777`, as `/tmp`: nobody removes or replaces another's
file); a lease file is opened with `O_NOFOLLOW` (a symbolic link planted under a lease name is
refused, not followed) and must be a regular file with one link, owned by the user or root,
or shared (mode `0666`, as hil makes them). hil changes the mode only of a file it has just
created. Anything else refuses the lease with one line naming the folder. Each lease file
shows every local user the run id, pid, host name, start time and board key of its holder.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import socket
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hil.errors import InfraError, UsageError

log = logging.getLogger(__name__)

LEASE_DIR_ENV = "HIL_LEASE_DIR"
DEFAULT_LEASE_DIR = Path("/tmp/exynos-hil-leases")  # noqa: S108 - shared by design, mode 1777
POLL_S = 0.25
"""Seconds between two tries at a busy board."""
MAX_LEASE_BYTES = 4096
"""The most of a lease file read (what hil writes is about 150 bytes)."""


def lease_dir() -> Path:
    """The folder of this host's leases."""
    return Path(os.environ.get(LEASE_DIR_ENV) or DEFAULT_LEASE_DIR)


class UnsafeLeaseDir(UsageError):
    """The lease folder is not safe to write in (another user could redirect hil's writes)."""


def ensure_lease_dir(folder: Path | None = None) -> Path:
    """Create the lease folder (writable by every user and sticky, like /tmp) unless it
    exists, then check it (`check_lease_dir`). UnsafeLeaseDir naming the folder otherwise."""
    folder = folder or lease_dir()
    if not os.path.lexists(folder):
        folder.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another run made it meanwhile: checked below
            folder.mkdir()
            os.chmod(folder, 0o1777)  # noqa: S103 - shared by design, sticky
    check_lease_dir(folder)
    return folder


def check_lease_dir(folder: Path) -> None:
    """UnsafeLeaseDir unless `folder` is a real folder owned by root or by this user, and
    sticky when group or others may write to it."""
    try:
        info = os.lstat(folder)
    except OSError as exc:
        raise UnsafeLeaseDir(f"lease folder {folder}: {exc.strerror}") from exc
    fix = f"set {LEASE_DIR_ENV} to a folder of your own, or have root make it: install -d -m 1777 {folder}"
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a folder"
        raise UnsafeLeaseDir(f"lease folder {folder} is {kind}: refused ({fix})")
    if info.st_uid not in (0, os.geteuid()):
        raise UnsafeLeaseDir(f"lease folder {folder} belongs to uid {info.st_uid}, not root or you "
                             f"(uid {os.geteuid()}): refused ({fix})")
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        raise UnsafeLeaseDir(f"lease folder {folder} is writable by others (mode "
                             f"{stat.S_IMODE(info.st_mode):04o}) and not sticky: refused ({fix})")


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
    """The holder written in a lease file; None when empty, unreadable or not a regular file
    (a symbolic link is not followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return _holder_in(fd)
    finally:
        os.close(fd)


def _holder_in(fd: int) -> Holder | None:
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = json.loads(os.pread(fd, MAX_LEASE_BYTES, 0).decode("utf-8") or "null")
        return Holder(str(data["run"]), int(data["pid"]), str(data["host"]), str(data["since"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _open_lease(key: str, path: Path) -> int:
    """The lease file's descriptor, read-write: opened without following a symbolic link,
    created (mode 0666, so another user's run can take the board over) when missing, and
    checked (`_check_lease_file`). InfraError naming the folder when it is refused."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    for _ in range(10):  # a file removed or created meanwhile: look again
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                continue
            except OSError as exc:
                raise _refused(key, path, exc.strerror or str(exc)) from exc
            with contextlib.suppress(OSError):
                os.fchmod(fd, 0o666)  # ours, just made: the umask took bits hil means to share
            return fd
        except OSError as exc:
            reason = "it is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
            raise _refused(key, path, reason) from exc
        try:
            _check_lease_file(os.fstat(fd))
        except ValueError as exc:
            os.close(fd)
            raise _refused(key, path, str(exc)) from None
        return fd
    raise _refused(key, path, "it keeps changing")


def _check_lease_file(info: os.stat_result) -> None:
    """ValueError unless a regular file with one link, owned by this user or root, or shared
    (writable by every user: a lease file hil made)."""
    if not stat.S_ISREG(info.st_mode):
        raise ValueError("it is not a regular file")
    if info.st_nlink != 1:
        raise ValueError(f"it has {info.st_nlink} hard links")
    if info.st_uid not in (0, os.geteuid()) and stat.S_IMODE(info.st_mode) & 0o666 != 0o666:
        raise ValueError(f"it belongs to uid {info.st_uid} and is not shared "
                         f"(mode {stat.S_IMODE(info.st_mode):04o})")


def _refused(key: str, path: Path, reason: str) -> InfraError:
    return InfraError(f"lease of {key}: refused: {path.name} in lease folder {path.parent}: {reason} "
                      "(another user's file? remove it, or set HIL_LEASE_DIR)")


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
    try:
        path = ensure_lease_dir(folder) / _file_name(key)
    except UnsafeLeaseDir as exc:
        raise InfraError(f"lease of {key}: {exc}") from exc
    fd = _open_lease(key, path)
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
        current = _holder_in(fd)
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
