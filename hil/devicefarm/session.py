"""A devicefarm session: its name, its folder, and the holder's wire protocol.

```
HIL_DEVICEFARM_SESSION, else gh-<GITHUB_RUN_ID>-<GITHUB_RUN_ATTEMPT>-<GITHUB_JOB>, else <user>-<cwd hash>
   ─► folder  $HIL_DEVICEFARM_DIR | $XDG_RUNTIME_DIR/hil-devicefarm | <temp dir>/hil-devicefarm-<uid>
              /<session slug>/  holder.sock  holder.json  holder.log  final.json  console/
```

The sessions' folder is private to the user: hil creates it with mode 0700 and refuses it
(UsageError naming it) unless it is a real folder the user owns that nobody else may write to
(a folder another user made first, a symbolic link, mode 0770...), as tmux checks its own.
A session's files are written without following symbolic links.

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
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from hil.errors import UsageError

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
    """Where this user's sessions live (private to the user: mode 0700, `private_folder`)."""
    env = dict(os.environ) if env is None else env
    if env.get(DIR_ENV):
        return Path(env[DIR_ENV])
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and _is_private(Path(runtime)):
        return Path(runtime) / "hil-devicefarm"
    return Path(tempfile.gettempdir()) / f"hil-devicefarm-{os.geteuid()}"


def _is_private(folder: Path) -> bool:
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def private_folder(folder: Path) -> Path:
    """`folder`, created with mode 0700 when missing; UsageError naming it unless it is a real
    folder owned by this user that neither group nor others may write to."""
    with contextlib.suppress(FileExistsError):
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.mkdir(mode=0o700)
    if not _is_private(folder):
        try:
            info = os.lstat(folder)
            why = (f"belongs to uid {info.st_uid}" if info.st_uid != os.geteuid()
                   else "is a symbolic link" if stat.S_ISLNK(info.st_mode)
                   else f"has mode {stat.S_IMODE(info.st_mode):04o}")
        except OSError as exc:
            why = exc.strerror or str(exc)
        raise UsageError(f"devicefarm sessions folder {folder} {why}: refused (it must be yours "
                         f"and private; set {DIR_ENV} or XDG_RUNTIME_DIR to such a folder)")
    return folder


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
        """This process's session, in the user's private sessions folder (made when missing;
        UsageError naming it when it is not private)."""
        name = session_name()
        return cls(name, private_folder(sessions_root()) / slug(name))

    def open_log(self) -> BinaryIO:
        """holder.log, for appending (never through a symbolic link)."""
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        return os.fdopen(fd, "ab")

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
        """Make the session's folder, in the user's private sessions folder."""
        with contextlib.suppress(FileExistsError):
            self.folder.mkdir(mode=0o700)
        if not _is_private(self.folder):
            raise UsageError(f"devicefarm session folder {self.folder} is not a private folder: refused")

    def holder(self) -> dict[str, Any] | None:
        """holder.json, or None."""
        return _read_json(self.folder / HOLDER_FILE)

    def final(self) -> dict[str, Any] | None:
        """final.json (the holder ended on its own: why), or None."""
        return _read_json(self.folder / FINAL_FILE)

    def write(self, name: str, data: dict[str, Any]) -> None:
        """Write `name` whole (a new file renamed over it; never through a symbolic link)."""
        tmp = self.folder / f".{name}.{os.getpid()}.tmp"
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(data) + "\n")
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
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as stream:
            data = json.loads(stream.read(MAX_LINE))
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
