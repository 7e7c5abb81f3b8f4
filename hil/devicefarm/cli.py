"""`devicefarm-cli`: the seam upstream's Samsung tests reach a board through, served by hil.

What upstream calls, one process per call (ExecuTorch `backends/samsung/test/utils/
runtime_executor.py`, `.ci/scripts/setup-samsung-linux-deps.sh`, `cleanup-samsung-linux-deps.sh`):

| flag | here |
|---|---|
| `-Q` | start the session's holder (hil/devicefarm/holder.py) for `HIL_BOARD`; 0 (see below) |
| `-C` | one line: `assigned <board>`, `waiting (<why>)`, or `unavailable: <why>` (exit 1) |
| `-E CMD` | CMD through the board's shell as given; its stdout, stderr and exit status |
| `-U SRC DIR` | push the host file SRC into the board's DIR (its mode kept) |
| `-D SRC DST` | pull the board's SRC (a folder) to `DST/<basename of SRC>/...` |
| `-d` | release the board and end the holder; nothing held is not an error |

Exit status: 0 done; `-E`: the command's; 1 one line `devicefarm-cli: ...` on stderr (no
board, a missing file, the board failed); 2 bad usage. Upstream's CI greps `-C`'s output for
`waiting|not assigned` (wait), then `assigned` (go on), anything else meaning "no device":
`unavailable:` lines never contain either word.

`-Q` succeeds whenever its own command line is well formed, even when `HIL_BOARD` is unset or
names no usable board: it records why in the session (`final.json`) and says on stderr that
`-C` will report it; `-C` then exits 1 with `unavailable: <why>`. Upstream's
`setup-samsung-linux-deps.sh` (`acquire_device`) treats a failed `-Q` as "no device farm" and
returns 0, after which `pull.yml` skips the tests with `exit 0`: a misconfigured lab would
show a green job. Its `out="$(devicefarm-cli -C 2>&1)"` runs under `set -ex`, so a failing
`-C` fails the job instead.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hil.devicefarm.session import FINAL_FILE, Session
from hil.errors import UsageError
from hil.pids import pid_alive

PROG = "devicefarm-cli"
START_S = 60.0
"""How long `-Q` waits for its holder to listen."""
RELEASE_S = 60.0
"""How long `-d` waits for the holder to give everything back before it sends SIGTERM."""
BOARD_HELP = ("set HIL_BOARD to a serial, HOST:PORT, SERIAL@HOST:PORT, an inventory name "
              "(with HIL_INVENTORY), a labgrid place (labgrid:TAG=V,... with HIL_LABGRID or "
              "LG_COORDINATOR) or virtual")


class Failed(Exception):
    """One line for stderr, exit 1."""


def _parser() -> argparse.ArgumentParser:
    from hil.commands.help import apply_to
    from hil.commands.manual import DEVICEFARM_CLI

    parser = apply_to(argparse.ArgumentParser(prog=PROG), DEVICEFARM_CLI)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("-Q", dest="enqueue", action="store_true", help="request a board (HIL_BOARD)")
    group.add_argument("-C", dest="check", action="store_true", help="is a board assigned?")
    group.add_argument("-E", dest="execute", nargs="+", metavar="CMD",
                       help="run CMD through the board's shell; exit with its status")
    group.add_argument("-U", dest="upload", nargs=2, metavar=("SRC", "DIR"),
                       help="push the host file SRC into the board's folder DIR")
    group.add_argument("-D", dest="download", nargs=2, metavar=("SRC", "DST"),
                       help="pull the board's folder SRC to DST/<basename of SRC>/")
    group.add_argument("-d", dest="disconnect", action="store_true", help="release the board")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        session = Session.current()
    except UsageError as exc:  # a sessions folder that is not private (hil/devicefarm/session.py)
        _say(f"{PROG}: {exc}", sys.stderr)
        return 1
    try:
        if args.enqueue:
            return enqueue_or_record(session)
        if args.check:
            return check(session)
        if args.disconnect:
            return disconnect(session)
        if args.execute:
            return execute(session, " ".join(args.execute))
        if args.upload:
            return upload(session, *args.upload)
        return download(session, *args.download)
    except Failed as exc:
        _say(f"{PROG}: {exc}", sys.stderr)
        return 1


# -- -Q ---------------------------------------------------------------------------------------
def enqueue_or_record(session: Session) -> int:
    """`enqueue`; when it cannot start a holder, why is recorded for `-C` and `-Q` still exits
    0 (see the module docstring: upstream's CI must fail at `-C`, not skip its tests)."""
    try:
        return enqueue(session)
    except Failed as exc:
        why = str(exc)
    if _live_holder(session) is not None:  # the session holds a board already: left as it is
        _say(f"{PROG}: {why}", sys.stderr)
        return 0
    try:
        session.create()
        session.write(FINAL_FILE, {"state": "unavailable", "why": why})
    except OSError as exc:
        _say(f"{PROG}: {why} (not recorded for -C: {exc.strerror})", sys.stderr)
        return 0
    _say(f"{PROG}: {why}; `{PROG} -C` will report it (unavailable)", sys.stderr)
    return 0


def enqueue(session: Session) -> int:
    """Start the session's holder for HIL_BOARD; return once it listens."""
    from hil.adbaddress import server_choice
    from hil.errors import UsageError
    from hil.pool.held import held_sources

    board = os.environ.get("HIL_BOARD", "").strip()
    if not board:
        raise Failed(f"-Q: no board to request: {BOARD_HELP}")
    inventory = os.environ.get("HIL_INVENTORY") or None
    labgrid = os.environ.get("HIL_LABGRID") or None
    try:
        held_sources(inventory, board, labgrid)  # the holder reads them again: checked here first
        adb_server = server_choice(None)
    except UsageError as exc:
        raise Failed(f"-Q: HIL_BOARD={board}: {exc}") from None
    holder = _live_holder(session)
    if holder is not None:
        _say(f"queued: session {session.name} already holds {holder['board']} (holder pid {holder['pid']})")
        return 0
    session.create()
    for stale in (FINAL_FILE, "holder.json"):
        with contextlib.suppress(FileNotFoundError):
            (session.folder / stale).unlink()
    request = {
        "session": session.name, "board": board,
        "inventory": str(Path(inventory).resolve()) if inventory else None,
        "labgrid": labgrid or os.environ.get("LG_COORDINATOR") or None,
        "adb_server": adb_server, "chipset": os.environ.get("HIL_CHIPSET") or "E9955",
        "runner": os.environ.get("HIL_RUNNER") or None,
        "runner_profile": os.environ.get("HIL_RUNNER_PROFILE") or None,
        "board_wait_s": _number("HIL_BOARD_WAIT", 600.0),
        "idle_s": _number("HIL_DEVICEFARM_IDLE_S", 7200.0),
        "timeout_s": _number("HIL_DEVICEFARM_TIMEOUT_S", 600.0),
    }
    session.write("request.json", request)
    with session.open_log() as log_file:
        process = subprocess.Popen(  # detached: it outlives this process, holds nothing of ours
            [sys.executable, "-m", "hil.devicefarm.holder", str(session.folder)],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True,
        )
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            final = session.final()
            why = final["why"] if final else _log_tail(session)
            raise Failed(f"-Q: the holder ended at once: {why}")
        with contextlib.suppress(OSError, ValueError, ConnectionError):
            session.request({"op": "status"}, timeout=5.0)
            _say(f"queued: {board} for session {session.name} (holder pid {process.pid})")
            return 0
        time.sleep(0.1)
    _end(process.pid)
    raise Failed(f"-Q: the holder did not listen within {START_S:g} s; log: {session.log}")


def _number(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        return float(text)
    except ValueError:
        raise Failed(f"{name}={text!r}: expected seconds") from None


# -- -C ---------------------------------------------------------------------------------------
def check(session: Session) -> int:
    state, why = status(session)
    if state == "assigned":
        _say(f"assigned {why}")
        return 0
    if state == "waiting":
        _say(f"waiting ({why})")
        return 0
    _say(f"unavailable: {plain(why)}")
    return 1


def plain(text: str) -> str:
    """`text` without the words upstream's CI script greps `-C`'s output for (`waiting`,
    `assigned`): an `unavailable:` line must read as neither."""
    text = re.sub(r"(?i)not[\s-]*assigned", "unallocated", text)
    text = re.sub(r"(?i)assigned", "allocated", text)
    return re.sub(r"(?i)waiting", "pending", text)


def status(session: Session) -> tuple[str, str]:
    """(`assigned`, board) / (`waiting`, why) / (`unavailable`, why)."""
    holder = session.holder()
    if holder is not None and pid_alive(int(holder.get("pid", 0))):
        try:
            reply = session.request({"op": "status"}, timeout=10.0)
            return str(reply["state"]), str(reply["why"])
        except (OSError, ValueError, ConnectionError, KeyError):
            if session.final() is None and pid_alive(int(holder["pid"])):
                return "waiting", "the holder is busy answering"
    final = session.final()
    if final is not None:
        return "unavailable", str(final.get("why"))
    if holder is not None:
        return "unavailable", (f"the holder of session {session.name} (pid {holder.get('pid')}) "
                               f"is gone (killed?); log: {session.log}")
    return "unavailable", f"nothing requested in session {session.name}: run {PROG} -Q first"


def _live_holder(session: Session) -> dict[str, Any] | None:
    holder = session.holder()
    if holder is not None and pid_alive(int(holder.get("pid", 0))) and session.socket.exists():
        return holder
    return None


# -- -E, -U, -D -------------------------------------------------------------------------------
def _ask(session: Session, message: dict[str, Any]) -> dict[str, Any]:
    """One request to the session's holder; Failed when there is no board to run it on."""
    if _live_holder(session) is None:
        state, why = status(session)
        raise Failed(f"no board assigned in session {session.name}: {why}")
    try:
        reply = session.request(message, timeout=None)
    except (OSError, ValueError, ConnectionError) as exc:
        raise Failed(f"the holder of session {session.name} did not answer: {exc}") from None
    if "error" in reply:
        raise Failed(str(reply["error"]))
    return reply


def execute(session: Session, command: str) -> int:
    reply = _ask(session, {"op": "exec", "command": command})
    sys.stdout.write(reply["stdout"])
    sys.stdout.flush()
    sys.stderr.write(reply["stderr"])
    sys.stderr.flush()
    return int(reply["exit"])


def upload(session: Session, source: str, folder: str) -> int:
    path = Path(source)
    if not path.is_file():
        raise Failed(f"-U: no such file: {source}")
    _ask(session, {"op": "push", "src": str(path.resolve()), "dst": folder})
    return 0


def download(session: Session, source: str, destination: str) -> int:
    _ask(session, {"op": "pull", "src": source, "dst": str(Path(destination).resolve())})
    return 0


# -- -d ---------------------------------------------------------------------------------------
def disconnect(session: Session) -> int:
    """Release the board, wait for the holder to give everything back, remove the session."""
    holder = session.holder()
    if holder is None or not pid_alive(int(holder.get("pid", 0))):
        final = session.final()
        if holder is not None:
            _stop_orphans(holder.get("children") or [])
        shutil.rmtree(session.folder, ignore_errors=True)
        _say(f"nothing held in session {session.name}"
              + (f" (the holder had ended: {final['why']})" if final else ""))
        return 0
    pid = int(holder["pid"])
    with contextlib.suppress(OSError, ValueError, ConnectionError):
        session.request({"op": "release"}, timeout=10.0)
    if not _wait_gone(pid, RELEASE_S):
        _say(f"{PROG}: the holder (pid {pid}) did not end within {RELEASE_S:g} s: stopping it",
             sys.stderr)
        _end(pid)
    shutil.rmtree(session.folder, ignore_errors=True)
    _say(f"released {holder.get('board')} (session {session.name})")
    return 0


def _stop_orphans(children: list[dict[str, Any]]) -> None:
    """What a holder killed with SIGKILL left running (its adb server, its virtual board),
    each only if its PID still runs the same command line: SIGTERM, SIGKILL after 10 s."""
    left = []
    for child in children:
        pid = int(child.get("pid", 0))
        try:
            same = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace") == child.get("cmdline")
        except OSError:
            continue
        if same and pid_alive(pid):
            _say(f"{PROG}: stopping what the dead holder left: pid {pid} "
                 f"({str(child.get('cmdline')).replace(chr(0), ' ')[:80]})", sys.stderr)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            left.append(pid)
    for pid in left:
        if not _wait_gone(pid, 10.0):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _end(pid: int) -> None:
    """SIGTERM the holder (it gives everything back), SIGKILL after 15 s."""
    if not _is_holder(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if not _wait_gone(pid, 15.0):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _wait_gone(pid, 5.0)


def _is_holder(pid: int) -> bool:
    """`pid` is a holder (not a process that took a dead holder's PID)."""
    try:
        return b"hil.devicefarm.holder" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _say(line: str, stream: Any = None) -> None:
    """One line of the command's own output (stdout unless told)."""
    out = stream or sys.stdout
    out.write(line + "\n")
    out.flush()


def _log_tail(session: Session) -> str:
    try:
        lines = session.log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1] if lines else "no log"
