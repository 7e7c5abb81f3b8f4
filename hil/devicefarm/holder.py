"""The holder: the long-lived process `devicefarm-cli -Q` leaves behind, one per session.

```
-Q ─► python -m hil.devicefarm.holder FOLDER   (own session, stdio to holder.log)
        listen on FOLDER/holder.sock, write holder.json
        HeldBoard (hil/pool/held.py): the pool takes the lease and brings the board up
        requests, one per connection: status · exec · push · pull · release
        ends on `release` (-d), SIGTERM/SIGINT, the board lost for good, or the idle limit;
        then the pool gives everything back (run folder, lease, virtual board, adb server)
```

Killed with SIGKILL, the kernel drops the lease (an flock) with the process; the adb server
and virtual board it started end with it through their parent-death handling
(hil/adbserver.py, hil/virtual/launcher.py), and the next `-C`/`-d` of the session finds
the holder gone and says so.

Requests run on the board's own thread in the pool, one at a time, in arrival order. An adb
failure is the caller's error (one line) and the pool's cue to climb the recovery ladder.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import posixpath
import socket
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any

from hil.board.adb import ADB_ERRORS, AdbBoard
from hil.board.sync import SyncFailed, pull_files, push_files
from hil.devicefarm import board_exec
from hil.devicefarm.session import FINAL_FILE, HOLDER_FILE, Session, read_message, short_path
from hil.errors import InfraError, UsageError
from hil.interrupts import Stop, StopSignals
from hil.pool.bringup import PoolOptions
from hil.pool.held import ASSIGNED, UNAVAILABLE, CallCancelled, HeldBoard, held_sources

log = logging.getLogger("hil.devicefarm")

REQUEST_FILE = "request.json"
"""What `-Q` asked for (board, inventory, adb server, limits), written before the holder starts."""


class RequestFailed(Exception):
    """A request that cannot be done (a missing folder on the board): one line for the caller,
    nothing wrong with the board."""


def _push(board: AdbBoard, source: str, folder: str) -> dict[str, Any]:
    """The host file `source` into the board's `folder` (created), keeping its mode."""
    path = Path(source)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError as exc:
        raise RequestFailed(f"-U: cannot read {source}: {exc.strerror}") from exc
    if not path.is_file():
        raise RequestFailed(f"-U: {source} is not a file")
    remote = posixpath.join(folder, path.name)
    try:
        sent = push_files(board.device, [(path, remote, mode)], timeout=board.idle_timeout_s)
    except SyncFailed as exc:
        raise RequestFailed(f"-U: {exc}") from exc
    except ADB_ERRORS as exc:
        raise InfraError(f"{board.name}: push failed: {type(exc).__name__}: {exc}") from exc
    return {"remote": remote, "bytes": sent}


def _pull(board: AdbBoard, source: str, destination: str) -> dict[str, Any]:
    """The board's `source` (a folder, or a file) into `destination/<basename of source>`:
    where upstream's RuntimeExecutor reads `DST/output/output_<i>.bin` after
    `-D WORKDIR/output DST` (runtime_executor.py)."""
    source = posixpath.normpath(source)
    target = Path(destination) / posixpath.basename(source)
    try:
        top = board.device.sync.stat(source)
        if top.mode == 0:
            raise RequestFailed(f"-D: no such file or folder on {board.name}: {source}")
        if stat.S_ISDIR(top.mode):
            sizes = _tree(board, source)
        else:
            sizes = {source: top.size}
        pulled = pull_files(board.device, list(sizes), timeout=board.idle_timeout_s, expected=sizes)
    except ADB_ERRORS as exc:
        raise InfraError(f"{board.name}: pull failed: {type(exc).__name__}: {exc}") from exc
    missing = [remote for remote, data in pulled.items() if data is None]
    if missing:
        raise RequestFailed(f"-D: cannot read {missing[0]} on {board.name}")
    (target if stat.S_ISDIR(top.mode) else target.parent).mkdir(parents=True, exist_ok=True)
    total = 0
    inside = target.resolve() if stat.S_ISDIR(top.mode) else target.parent.resolve()
    for remote, data in pulled.items():
        assert data is not None
        local = target / posixpath.relpath(remote, source) if remote != source else target
        if not local.parent.resolve().is_relative_to(inside) or local.is_symlink():
            raise RequestFailed(f"-D: {remote} would be written outside {target}: refused")
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(data)
        total += len(data)
    return {"local": str(target), "files": len(pulled), "bytes": total}


def _tree(board: AdbBoard, folder: str) -> dict[str, int]:
    """Every regular file below `folder` on the board (sync LIST, recursively), with the size
    the board listed. A name with a `/` or that is `..` is refused: a board's LIST names
    entries of one folder, and such a name would lead the copy out of its destination."""
    files: dict[str, int] = {}
    for entry in board.device.sync.list(folder):
        if entry.path in (".", ".."):
            continue
        if "/" in entry.path or ".." in entry.path.split("/") or "\0" in entry.path:
            raise RequestFailed(f"-D: the board listed {entry.path!r} in {folder}: not a file name, refused")
        remote = posixpath.join(folder, entry.path)
        if stat.S_ISDIR(entry.mode):
            files.update(_tree(board, remote))
        elif stat.S_ISREG(entry.mode):
            files[remote] = entry.size
    return files


class Holder:
    """Serves a session's requests over its unix socket until released."""

    def __init__(self, session: Session, request: dict[str, Any]) -> None:
        self.session = session
        self.request = request
        self.stop = Stop()
        self.timeout_s = float(request.get("timeout_s") or 600.0)
        self.idle_limit_s = float(request.get("idle_s") or 7200.0)
        self.released_by_client = threading.Event()
        self.final: str | None = None
        """Why the holder gave the board back on its own (set before the give-back, which can
        take seconds: `-C` meanwhile says why, not just "released")."""
        try:
            sources = held_sources(request.get("inventory"), request["board"], request.get("labgrid"))
        except UsageError as exc:
            raise UsageError(f"HIL_BOARD={request['board']!r}: {exc}") from None
        runner = request.get("runner")
        self.held = HeldBoard(sources, PoolOptions(
            chipset=request.get("chipset") or "E9955", run_id=session.run_id,
            out_dir=session.folder, runner=Path(runner) if runner else None,
            timeout_s=self.timeout_s, runner_profile=request.get("runner_profile"),
            adb_server=request.get("adb_server"), board_wait_s=float(request.get("board_wait_s") or 600.0),
        ), self.stop)

    def run(self) -> int:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(FileNotFoundError):
            self.session.socket.unlink()
        with short_path(self.session.socket) as path:
            listener.bind(path)
        listener.listen(16)
        listener.settimeout(0.2)
        self.record = {
            "pid": os.getpid(), "session": self.session.name, "board": self.request["board"],
            "since": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "adb_server_pid": None,
        }
        self.session.write(HOLDER_FILE, self.record)
        final: str | None = None
        try:
            with StopSignals(self.stop), self.held:
                threading.Thread(target=self._accept, args=(listener,), name="accept",
                                 daemon=True).start()
                final = self.final = self._wait()
                if final is not None:
                    self.session.write(FINAL_FILE, {"state": UNAVAILABLE, "why": final})
        finally:
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                self.session.socket.unlink()
            with contextlib.suppress(FileNotFoundError):
                (self.session.folder / HOLDER_FILE).unlink()
        log.info("holder ends (%s)", final or "released")
        return 0

    def _wait(self) -> str | None:
        """Until released (None) or the board is lost, a signal, the idle limit (why)."""
        noted, assigned_since = False, 0.0
        while not self.released_by_client.is_set():
            if not noted and self.held.pool.settled.is_set():
                noted = True  # what it started: `-d` after a SIGKILL stops what is left of it
                private = self.held.pool.servers.private
                self.record["adb_server_pid"] = private.pid if private is not None else None
                self.record["children"] = children(os.getpid())
                self.session.write(HOLDER_FILE, self.record)
            if self.stop.wait(0.2):
                return f"the holder was stopped by signal {self.stop.signum or '?'}"
            kind, why = self.held.state()
            if kind == UNAVAILABLE and not self.released_by_client.is_set():
                return why
            if kind != ASSIGNED:
                continue
            assigned_since = assigned_since or time.monotonic()
            idle = time.monotonic() - max(self.held.last_used, assigned_since)
            if idle > self.idle_limit_s:
                return f"released after {idle:.0f} s without a request (HIL_DEVICEFARM_IDLE_S)"
        return None

    def _accept(self, listener: socket.socket) -> None:
        while not self.stop.event.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(30.0)
                message = read_message(conn)
                conn.settimeout(None)
                caller_gone, replied = threading.Event(), threading.Event()  # see `_watch_caller`
                threading.Thread(target=_watch_caller, args=(conn, caller_gone, replied, message.get("op")),
                                 daemon=True).start()
                reply = self._handle(message, caller_gone)
            except (OSError, ValueError) as exc:
                log.warning("bad request: %s", exc)
                return
            replied.set()
            with contextlib.suppress(OSError):
                conn.sendall(_json_line(reply))
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)  # ends `_watch_caller`'s recv (a close would not)

    def _handle(self, message: dict[str, Any], caller_gone: threading.Event | None = None) -> dict[str, Any]:
        op = message.get("op")
        if op == "status":
            kind, why = (UNAVAILABLE, self.final) if self.final is not None else self.held.state()
            return {"state": kind, "why": why, "session": self.session.name}
        if op == "release":
            self.released_by_client.set()
            self.held.release()
            return {"ok": True}
        gone = caller_gone or threading.Event()
        work = {
            "exec": lambda board: board_exec.run(board, str(message["command"]), self.timeout_s, gone),
            "push": lambda board: _push(board, str(message["src"]), str(message["dst"])),
            "pull": lambda board: _pull(board, str(message["src"]), str(message["dst"])),
        }.get(str(op))
        if work is None:
            return {"error": f"unknown request {op!r}"}
        log.info("%s %s", op, {k: v for k, v in message.items() if k != "op"})
        try:
            return {"ok": True, **self.held.call(work, gone)}
        except (RequestFailed, board_exec.CommandStopped, CallCancelled) as exc:
            if gone.is_set():
                log.info("%s: %s", op, exc)
            return {"error": str(exc)}
        except InfraError as exc:
            kind, why = self.held.state()
            log.error("%s failed: %s", op, exc)
            return {"error": f"board: {exc}", "state": kind, "why": why}


def _watch_caller(conn: socket.socket, gone: threading.Event, replied: threading.Event, op: object) -> None:
    """Set `gone` when the caller's end of `conn` closes before its reply (it sends nothing
    after its request and waits for the reply): upstream kills devicefarm-cli's process group
    at its own limit. Ends when the holder shuts the connection down after its reply."""
    with contextlib.suppress(OSError):
        while conn.recv(4096):
            pass
    gone.set()
    if not replied.is_set():
        log.info("the caller of a %s request went away before its reply", op)


def children(pid: int) -> list[dict[str, Any]]:
    """The child processes of `pid` (the adb server, a virtual board) with their command
    lines, so that a process that later takes one's PID is never mistaken for it."""
    found = []
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            for child in listing.read_text().split():
                with contextlib.suppress(OSError):
                    cmdline = Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace")
                    found.append({"pid": int(child), "cmdline": cmdline})
    return found


def _json_line(data: dict[str, Any]) -> bytes:
    return json.dumps(data).encode() + b"\n"


def main(argv: list[str] | None = None) -> int:
    """`python -m hil.devicefarm.holder FOLDER` (started by `devicefarm-cli -Q`)."""
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0])
    request = json.loads((folder / REQUEST_FILE).read_text(encoding="utf-8"))
    session = Session(request["session"], folder)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return Holder(session, request).run()
    except (UsageError, InfraError) as exc:
        session.write(FINAL_FILE, {"state": UNAVAILABLE, "why": str(exc)})
        log.error("%s", exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
