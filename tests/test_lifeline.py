"""Whatever hil starts dies with hil, even when hil is killed with SIGKILL: its private adb
server, the virtual boards it started and their sandboxed shells (hil/lifeline.py); and the
boards' folders go with them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "fixtures" / "tiny.yaml"


def _children(pid: int) -> list[int]:
    """The children of `pid`; none when it ended while the tree was walked (a short-lived
    child of the run's: its /proc folder goes between the listing and the read)."""
    found = []
    try:
        listings = list(Path(f"/proc/{pid}/task").glob("*/children"))
    except OSError:
        return []
    for listing in listings:
        try:
            found += [int(child) for child in listing.read_text().split()]
        except OSError:
            continue
    return found


def _tree(pid: int) -> dict[int, str]:
    """Every process below `pid` (whatever its session or group): pid -> command line."""
    tree, pending = {}, [pid]
    while pending:
        for child in _children(pending.pop()):
            tree[child] = _cmdline(child)
            pending.append(child)
    return tree


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _kinds(tree: dict[int, str]) -> dict[str, list[int]]:
    kinds: dict[str, list[int]] = {"adb server": [], "board": [], "bwrap": []}
    for pid, cmdline in tree.items():
        if "nodaemon server" in cmdline:
            kinds["adb server"].append(pid)
        elif "hil.virtual.main" in cmdline:
            kinds["board"].append(pid)
        elif "bwrap" in cmdline.split(" ", 1)[0]:
            kinds["bwrap"].append(pid)
    return kinds


@pytest.mark.slow
def test_kill_9_of_hil_run_leaves_no_adb_server_board_or_board_shell(tmp_path: Path) -> None:
    home = tmp_path / "home"  # the adb server's keys go here, not into the user's home
    home.mkdir()
    run = subprocess.Popen(
        [sys.executable, "-m", "hil", "run", "--board", "virtual:2", "--suite", str(TINY),
         "--flow", "portable", "--out", str(tmp_path / "out"), "--iterations", "40"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO), "HOME": str(home),
             "ANDROID_USER_HOME": str(home / ".android")},
    )
    deadline = time.monotonic() + 180  # a bring-up and a tiny lowering: beyond it, a hang
    seen: dict[int, str] = {}
    try:
        while True:  # until the run has both boards, its server and a board shell running
            assert run.poll() is None, f"the run ended (exit {run.returncode}) before it was killed"
            assert time.monotonic() < deadline, f"never saw two boards and a shell: {_kinds(seen)}"
            tree = _tree(run.pid)
            seen.update(tree)
            kinds = _kinds(tree)
            sockets = [_server_socket(tree[pid]) for pid in kinds["adb server"]]
            if len(kinds["board"]) == 2 and kinds["bwrap"] and sockets and sockets[0].exists():
                break  # (the server answers on its socket)
            time.sleep(0.01)
        seen.update(_tree(run.pid))
        run.send_signal(signal.SIGKILL)
        run.wait()
    finally:
        if run.poll() is None:
            run.kill()
    deadline = time.monotonic() + 60  # generous: the point is "gone", not "how fast"
    while (left := {pid: seen[pid] for pid in seen if _alive(pid)}) and time.monotonic() < deadline:
        for pid in list(left):  # whatever these started since (board shells) is theirs too
            seen.update(_tree(pid))
        time.sleep(0.05)
    assert not left, f"left running after kill -9 of hil run: {left}"
    roots = {Path(cmd.split(" --root ", 1)[1].split(" ", 1)[0])  # (a board's own children
             for cmd in seen.values() if "hil.virtual.main" in cmd}    # share its command line)
    assert len(roots) == 2
    deadline = time.monotonic() + 60  # the watcher removes them once the boards are ended
    while (kept := [root for root in roots if root.exists()]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not kept, f"the virtual boards' folders stayed after kill -9 of hil run: {kept}"
    folder = sockets[0].parent  # the server's private folder, and its socket in it
    deadline = time.monotonic() + 60
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not folder.exists(), f"the adb server's folder stayed after kill -9 of hil run: {folder}"


def _server_socket(cmdline: str) -> Path:
    """The unix socket of a private adb server (`adb -L localfilesystem:PATH nodaemon server`)."""
    return Path(cmdline.split("localfilesystem:", 1)[1].split(" ", 1)[0])


def _wait_gone(seen: dict[int, str]) -> dict[int, str]:
    """What of `seen` (and what it started since) is still running after a generous wait."""
    deadline = time.monotonic() + 60  # generous: the point is "gone", not "how fast"
    while (left := {pid: seen[pid] for pid in seen if _alive(pid)}) and time.monotonic() < deadline:
        for pid in list(left):
            seen.update(_tree(pid))
        time.sleep(0.05)
    return left


def test_a_child_started_with_the_lifeline_dies_when_its_starter_is_killed(tmp_path: Path) -> None:
    # the starter spawns from a thread that has exited by the time it is killed: a
    # parent-death signal would have fired already; the grandchild starts its own session
    starter = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys, threading, time\n"
         "from hil import lifeline\n"
         "def spawn():\n"
         "    child = subprocess.Popen(['sleep', '300'], env=lifeline.child_env(),\n"
         "                             start_new_session=True)\n"
         "    print(child.pid, flush=True)\n"
         "thread = threading.Thread(target=spawn); thread.start(); thread.join()\n"
         "time.sleep(300)\n"],
        cwd=REPO, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert starter.stdout is not None
    child = int(starter.stdout.readline())
    assert _alive(child)
    starter.kill()
    starter.wait()
    assert not _wait_gone({child: "sleep 300"})


def test_board_shells_in_sessions_of_their_own_die_with_the_board(tmp_path: Path, adb_server) -> None:
    from hil.virtual.launcher import start_virtual_board

    board = start_virtual_board(tmp_path / "board", "E9955", "lifeline-board")
    try:
        device = adb_server.connect(board.address, timeout=60.0)
        stream = device.shell("sleep 300; echo never", stream=True)  # a shell, forked sleep
        deadline = time.monotonic() + 120
        while not any("sleep 300" in cmd for cmd in _tree(board.pid).values()):
            assert time.monotonic() < deadline, f"no shell on the board: {_tree(board.pid)}"
            time.sleep(0.02)
        seen = _tree(board.pid)
        assert _kinds(seen)["bwrap"], seen
        os.kill(board.pid, signal.SIGKILL)
        board.process.wait()
        assert not _wait_gone(seen), "board shells outlived the board"
        stream.close()
    finally:
        board.stop()
        adb_server.disconnect(board.address)
