"""What runs below a process and what it holds, read from /proc: descendants (and the
subreaper that keeps orphans among them), loopback TCP connections, and a sample of one
process's RSS, fds and threads."""

from __future__ import annotations

import collections
import contextlib
import ctypes
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state) of `pid`, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return int(fields[1]), fields[0]


def descendants(root: int) -> dict[int, str]:
    """Living descendants of `root` (zombies left out, and processes already exiting: their
    command line is gone): pid -> command line."""
    parents: dict[int, list[int]] = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[1] not in ("Z", "X"):
                parents[stat[0]].append(int(entry))
    found: dict[int, str] = {}
    todo = list(parents.get(root, []))
    while todo:
        pid = todo.pop()
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        todo += parents.get(pid, [])
        if cmdline:  # empty: its memory is gone, it is exiting (no kernel thread is below us)
            found[pid] = _shown(cmdline)
    return found


def _shown(cmdline: bytes) -> str:
    """A command line to read in a report: a virtual board's sandbox (`bwrap ... -- sh -c
    COMMAND`) as its device command, the bind mounts left out; at most 200 characters."""
    words = cmdline.rstrip(b"\0").split(b"\0")
    if words and words[0].endswith(b"bwrap") and b"--" in words:
        words = [b"bwrap ... --", *words[words.index(b"--") + 1:]]
    return b" ".join(words).decode(errors="replace").strip()[:200]


def live_lifeline(cmdline: str) -> bool:
    """A lifeline watcher (hil/lifeline.py) whose owner still runs (the soak itself, a board
    still up): it lives as long as its owner, so it is nothing left behind."""
    if "lifeline.py" not in cmdline:
        return False
    owner = cmdline.rsplit(" ", 1)[-1].split("-", 1)[0]
    state = _stat(int(owner)) if owner.isdigit() else None
    return state is not None and state[1] not in ("Z", "X")


def settle_lifelines(seconds: float = 10.0) -> None:
    """Wait (bounded) until every lifeline watcher below the soak whose owner has exited (hil,
    a board) has ended what its owner left and exited itself: a watcher still there after that
    is a leftover."""
    def orphaned() -> bool:
        return any("lifeline.py" in cmd and not live_lifeline(cmd)
                   for cmd in descendants(os.getpid()).values())

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and orphaned():
        reap_orphans()  # the soak is their subreaper: a watcher waits for its owner's zombies
        time.sleep(0.1)


def become_subreaper() -> None:
    """Orphans of everything started below this process are re-parented to it, so nothing
    hil leaves behind escapes `descendants(os.getpid())`."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        log.info("prctl(PR_SET_CHILD_SUBREAPER) failed: orphans may escape the count")


def reap_orphans() -> None:
    """Collect this process's zombie children (orphans re-parented here)."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[0] == me:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(int(entry), os.WNOHANG)


def tcp_connections() -> list[tuple[int, int, str]]:
    """(local port, remote port, inode) of every established loopback TCP connection."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                parts = line.split()
                if parts[3] != "01":  # ESTABLISHED
                    continue
                local = int(parts[1].rsplit(":", 1)[1], 16)
                remote = int(parts[2].rsplit(":", 1)[1], 16)
                found.append((local, remote, parts[9]))
    return found


def unix_connections(path: str) -> int:
    """Connections to the unix socket `path` (hil's private adb server), as the kernel lists
    them: every socket with that path but the listening one (/proc/net/unix, flag
    __SO_ACCEPTCON 0x10000)."""
    try:
        lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    except OSError:
        return 0
    return sum(1 for line in lines
               if line.endswith(" " + path) and not int(line.split()[3], 16) & 0x10000)


@dataclass
class Sample:
    """hil's process at one moment."""

    at: float
    rss_mb: float
    fds: int
    threads: int
    adb_client_connections: int
    """hil's own connections to its adb server (a unix socket only hil's user reaches)."""
    fd_kinds: dict[str, int]
    """Open fds by what they are: socket, pipe, a device, a file's folder."""


def sample(pid: int, adb_socket: str | None) -> Sample | None:
    """RSS, open fds, threads and adb client connections of `pid`; None once it is gone."""
    kinds: collections.Counter[str] = collections.Counter()
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = os.listdir(f"/proc/{pid}/fd")
        for fd in fds:
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                kinds[target.split(":")[0] if ":[" in target else str(Path(target).parent)] += 1
    except OSError:
        return None
    values = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if "VmRSS" not in values:  # a zombie
        return None
    clients = unix_connections(adb_socket) if adb_socket is not None else 0
    return Sample(time.monotonic(), int(values["VmRSS"].split()[0]) / 1024,
                  len(fds), int(values["Threads"]), clients, dict(kinds))
