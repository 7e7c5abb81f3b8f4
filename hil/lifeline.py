"""Whatever hil starts dies with hil, even when hil itself is killed with SIGKILL.

```
hil (any thread)  --spawns with child_env()-->  adb server, virtual boards, board shells...
     |  holds the write end of a pipe               (their environment carries the token)
     v
watcher (python -I lifeline.py, its own session) reads the pipe; at EOF (hil gone, however)
     SIGKILLs every process whose environment carries the token, until none is left
```

A parent-death signal (PR_SET_PDEATHSIG) would not do: it fires when the *thread* that forked
the child exits, and hil starts its adb server and boards from short-lived board threads. A
process group would not do either: board shells start sessions of their own. What each child
inherits whatever its group or session is its environment, so the token goes there
(`HIL_LIFELINE`, a space-separated list: a virtual board started by hil adds its own token for
its shells, and either watcher ends them). The write end of the pipe is close-on-exec, so no
child holds it; the watcher runs in its own session, so a terminal's Ctrl-C does not reach it.
On a normal exit the watcher finds nothing left to end (hil stops what it started first) or
ends what hil's own cleanup missed.

The pipe also carries the paths hil would remove itself on a normal exit (`remove_with`: a
virtual board's root, megabytes each; the `adb.<port>` file a private adb server writes in the
user's home): one path a line; after ending the processes, the watcher removes them, so a
killed run leaves no folder or file behind either.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

TOKEN_ENV = "HIL_LIFELINE"  # noqa: S105 - a variable name, no secret
"""The environment variable that ties a process to the hil process(es) that started it."""

_lock = threading.Lock()
_token: str | None = None
_watcher: subprocess.Popen[bytes] | None = None
_write_end: int | None = None
_PIPE_BUF = 4096
"""Linux's PIPE_BUF: a write of at most this many bytes reaches a pipe whole."""


def _start() -> str:
    """The token of this process, its watcher started on first use."""
    global _token, _watcher, _write_end
    with _lock:
        if _token is not None and _watcher is not None and _watcher.poll() is None:
            return _token
        token = f"{os.getpid()}-{secrets.token_hex(8)}"
        read_end, write_end = os.pipe()  # both close-on-exec (PEP 446)
        env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}  # never kill itself
        try:
            watcher = subprocess.Popen(
                [sys.executable, "-I", __file__, token],  # -I: stdlib only, nothing of hil's
                stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=env, start_new_session=True,
            )
        finally:
            os.close(read_end)
        if _write_end is not None:
            os.close(_write_end)
        _token, _watcher, _write_end = token, watcher, write_end
        return token


def remove_with(path: Path) -> None:
    """Have the watcher remove `path` (a folder or a file) once this process has exited
    however (after its processes are ended); removing it earlier is the caller's business."""
    line = f"{Path(path).resolve()}\n".encode()
    if b"\n" in line[:-1] or len(line) > _PIPE_BUF:
        raise ValueError(f"{path}: not a path the lifeline can carry")
    _start()
    with _lock:
        assert _write_end is not None
        os.write(_write_end, line)  # at most PIPE_BUF bytes: one write, never interleaved


def child_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with this process's token added to
    TOKEN_ENV: pass it as the `env` of every process hil starts that must die with it."""
    env = dict(os.environ if base is None else base)
    tokens = env.get(TOKEN_ENV, "").split()
    env[TOKEN_ENV] = " ".join([*tokens, _start()])
    return env


@contextlib.contextmanager
def tied_environ() -> Iterator[None]:
    """While inside, this process's own environment carries its token: for children it does not
    start with an `env` of its own (multiprocessing's spawned workers, which read os.environ)."""
    before = os.environ.get(TOKEN_ENV)
    os.environ[TOKEN_ENV] = child_env()[TOKEN_ENV]
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(TOKEN_ENV, None)
        else:
            os.environ[TOKEN_ENV] = before


def tokens_of(pid: int) -> set[str]:
    """The lifeline tokens in a process's environment (empty when it has none or is gone)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return set()
    prefix = TOKEN_ENV.encode() + b"="
    for item in environ.split(b"\0"):
        if item.startswith(prefix):
            return set(item[len(prefix):].decode(errors="replace").split())
    return set()


def _descendants(pids: list[int]) -> list[int]:
    found, pending = [], list(pids)
    while pending:
        for listing in Path(f"/proc/{pending.pop()}/task").glob("*/children"):
            with contextlib.suppress(OSError, ValueError):
                children = [int(child) for child in listing.read_text().split()]
                found += children
                pending += children
    return found


def end_tied(token: str, rounds: int = 100) -> int:
    """SIGKILL every process whose environment carries `token` and everything below it
    (a process that cleared its environment), again until none is left (a dying parent
    may still fork); the number of signals sent."""
    sent = 0
    me = os.getpid()
    for _ in range(rounds):
        tied = [int(entry.name) for entry in Path("/proc").iterdir()
                if entry.name.isdigit() and int(entry.name) != me and token in tokens_of(int(entry.name))]
        found = [pid for pid in dict.fromkeys(tied + _descendants(tied)) if pid != me]
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                sent += 1
        time.sleep(0.02)
    return sent


def _watch(token: str) -> None:
    """The watcher: wait for EOF on stdin (the hil process is gone), then end its children."""
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    received = b""
    with contextlib.suppress(OSError):
        while chunk := os.read(0, 4096):
            received += chunk
    end_tied(token)
    for line in received.decode(errors="replace").splitlines():  # `remove_with`'s paths
        if not line.startswith("/"):
            continue
        if os.path.isdir(line) and not os.path.islink(line):
            shutil.rmtree(line, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(line)


if __name__ == "__main__":
    _watch(sys.argv[1])
