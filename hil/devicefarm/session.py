"""A devicefarm session: its name, its folder, and the holder's wire protocol.

```
HIL_DEVICEFARM_SESSION, else gh-<GITHUB_RUN_ID>-<GITHUB_RUN_ATTEMPT>-<GITHUB_JOB>, else <user>-<cwd hash>
   ─► folder  $HIL_DEVICEFARM_DIR | $XDG_RUNTIME_DIR/hil-devicefarm | $HIL_LEASE_DIR/devicefarm-<uid>
              /<session slug>/  holder.sock  holder.json  holder.log  final.json  console/
```

`holder.json` says who holds (pid, board spec, since); `final.json` is the holder's last word
when it ends without a `-d` (the board never came up, was lost, or the idle time ran out), so a
later `-C` can say why. The protocol is one JSON line each way per connection.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import os
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hil.board.lease import lease_dir

SESSION_ENV = "HIL_DEVICEFARM_SESSION"
DIR_ENV = "HIL_DEVICEFARM_DIR"
SOCKET_NAME, HOLDER_FILE, LOG_NAME, FINAL_FILE = "holder.sock", "holder.json", "holder.log", "final.json"
MAX_LINE = 64 * 1024 * 1024
"""Largest reply line (a command's whole output)."""


def session_name(env: dict[str, str] | None = None) -> str:
    """HIL_DEVICEFARM_SESSION; else the GitHub run, attempt and job; else user and folder."""
    env = dict(os.environ) if env is None else env
    if env.get(SESSION_ENV):
        return env[SESSION_ENV]
    if env.get("GITHUB_RUN_ID") and env.get("GITHUB_JOB"):
        return f"gh-{env['GITHUB_RUN_ID']}-{env.get('GITHUB_RUN_ATTEMPT', '1')}-{env['GITHUB_JOB']}"
    cwd = hashlib.sha256(os.getcwd().encode()).hexdigest()[:10]
    return f"{_user()}-{cwd}"


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid{os.getuid()}"


def sessions_root(env: dict[str, str] | None = None) -> Path:
    """Where this user's sessions live (private to the user: mode 0700)."""
    env = dict(os.environ) if env is None else env
    if env.get(DIR_ENV):
        return Path(env[DIR_ENV])
    if env.get("XDG_RUNTIME_DIR") and Path(env["XDG_RUNTIME_DIR"]).is_dir():
        return Path(env["XDG_RUNTIME_DIR"]) / "hil-devicefarm"
    return lease_dir() / f"devicefarm-{os.getuid()}"


def slug(name: str) -> str:
    """A short folder name for a session (unix socket paths are limited to 107 bytes)."""
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:32].lstrip(".-") or "s"
    return f"{readable}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class Session:
    """One session's folder and files."""

    name: str
    folder: Path

    @classmethod
    def current(cls) -> Session:
        name = session_name()
        return cls(name, sessions_root() / slug(name))

    @property
    def socket(self) -> Path:
        return self.folder / SOCKET_NAME

    @property
    def log(self) -> Path:
        return self.folder / LOG_NAME

    @property
    def run_id(self) -> str:
        """The pool's run id (the board's work folder and the lease's holder name)."""
        return f"devicefarm-{slug(self.name)}"

    def create(self) -> None:
        root = self.folder.parent
        root.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            root.chmod(0o700)
        self.folder.mkdir(exist_ok=True)

    def holder(self) -> dict[str, Any] | None:
        """holder.json, or None."""
        return _read_json(self.folder / HOLDER_FILE)

    def final(self) -> dict[str, Any] | None:
        """final.json (the holder ended on its own: why), or None."""
        return _read_json(self.folder / FINAL_FILE)

    def write(self, name: str, data: dict[str, Any]) -> None:
        tmp = self.folder / f".{name}.tmp"
        tmp.write_text(json.dumps(data) + "\n", encoding="utf-8")
        tmp.replace(self.folder / name)

    def request(self, message: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        """Send one request to the holder and read its reply. OSError when no holder listens."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn, short_path(self.socket) as path:
            conn.settimeout(5.0)
            conn.connect(path)
            conn.settimeout(timeout)
            conn.sendall(json.dumps(message).encode() + b"\n")
            return read_message(conn)


@contextlib.contextmanager
def short_path(path: Path) -> Iterator[str]:
    """`path` for bind/connect: as it is when it fits a unix socket address (107 bytes), else
    through `/proc/self/fd/N/` of its open folder (a deep HIL_DEVICEFARM_DIR still works)."""
    if len(os.fsencode(path)) < 100:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_message(conn: socket.socket) -> dict[str, Any]:
    """One JSON line from `conn`. ConnectionError when it closes first."""
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = conn.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the holder closed the connection without a reply")
        data += chunk
        if len(data) > MAX_LINE:
            raise ConnectionError("reply too long")
    message = json.loads(data)
    if not isinstance(message, dict):
        raise ConnectionError("malformed reply")
    return message
