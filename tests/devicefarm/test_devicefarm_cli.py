"""hil's `devicefarm-cli` driven the way upstream ExecuTorch drives Samsung's: its CI script's
-Q / -C / -E "ls /" / -d sequence as separate processes, and the wheel's own
`RuntimeExecutor.run_on_device()` unmodified. One holder on one leased board for the module;
the last test releases it and checks that nothing is left."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from hil.board.lease import acquire, board_key
from hil.devicefarm.session import Session, slug
from hil.errors import InfraError
from hil.pids import pid_alive
from hil.virtual.launcher import VirtualBoardProcess
from tests.board_files import aarch64_elf
from tests.devicefarm.conftest import ROOT, Small, cli_env, df, poll_assigned

pytestmark = pytest.mark.slow

WORKDIR = "/data/local/tmp/enn-executorch-test"


@pytest.fixture(scope="module")
def held(cli_path: Path, lab_board: VirtualBoardProcess,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`-Q` then upstream's `-C` loop: the session's board is assigned. Released at the end
    (again: the last test releases it itself)."""
    folder = tmp_path_factory.mktemp("sessions")
    env = cli_env(cli_path, "ci-job-1", lab_board.address, folder)
    queued = df(env, "-Q")
    assert queued.returncode == 0, queued.stderr
    out = poll_assigned(env)
    session_folder = folder / slug("ci-job-1")
    holder = json.loads((session_folder / "holder.json").read_text())
    yield {"env": env, "assigned": out, "folder": session_folder, "holder": holder}
    df(env, "-d")


def test_ci_sequence_assigns_and_the_board_is_leased(held: dict[str, Any], lab_board: VirtualBoardProcess,
                                                     tmp_path: Path) -> None:
    env = held["env"]
    assert held["assigned"].strip() == f"assigned {lab_board.address}"
    ls = df(env, '-E "ls /"')
    assert ls.returncode == 0 and "data" in ls.stdout.split()
    # the lease is the holder's: another hil process waits for it, then leaves the board out
    with pytest.raises(InfraError, match=r"busy: held by run devicefarm-ci-job-1"):
        acquire(board_key(lab_board.address, None), "probe", 0.3)
    run = subprocess.run(
        [sys.executable, "-m", "hil", "run", "--board", lab_board.address, "--board-wait", "1",
         "--flow", "portable", "--filter", "add*", "--out", str(tmp_path / "out")],
        env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert "busy" in run.stdout + run.stderr and "devicefarm-ci-job-1" in run.stdout + run.stderr
    # a second session asking for the same board waits for it, and says for whom
    second = {**env, "HIL_DEVICEFARM_SESSION": "ci-job-queued"}
    assert df(second, "-Q").returncode == 0
    checked = df(second, "-C")
    assert checked.returncode == 0 and checked.stdout.startswith("waiting (")
    assert "held by run devicefarm-ci-job-1" in checked.stdout
    released = df(second, "-d")
    assert released.returncode == 0 and released.stdout.startswith("released")


def test_upstream_runtime_executor_runs_unchanged_bit_exact(
    held: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The wheel's RuntimeExecutor, unmodified, with hil's devicefarm-cli on PATH. Only its
    runner lookup is patched: `get_runner_path()` runs `git rev-parse --show-toplevel` in the
    wheel's folder (runtime_executor.py:22-29), which is no git checkout."""
    from executorch.backends.samsung.test.utils import runtime_executor
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime

    torch.manual_seed(0)
    inputs = (torch.randn(1, 3, 8, 8), torch.randn(2, 3))
    program = to_edge_transform_and_lower(torch.export.export(Small().eval(), inputs),
                                          partitioner=[XnnpackPartitioner()]).to_executorch()
    android_binary = tmp_path / "enn_executor_runner"  # what upstream's build would push
    android_binary.write_bytes(aarch64_elf(b"aarch64 stand-in"))
    monkeypatch.setattr(runtime_executor, "get_runner_path", lambda: android_binary)
    for key in ("PATH", "PYTHONPATH", "HIL_DEVICEFARM_SESSION", "HIL_DEVICEFARM_DIR"):
        monkeypatch.setenv(key, held["env"][key])

    on_board = runtime_executor.RuntimeExecutor(program, inputs).run_on_device()

    expected = Runtime.get().load_program(program.buffer).load_method("forward").execute(list(inputs))
    assert len(on_board) == len(expected) == 2
    for got, want in zip(on_board, expected, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got.view(torch.int32), want.view(torch.int32))  # bit for bit


def test_failures_are_one_line_and_the_board_stays_held(held: dict[str, Any], lab_board: VirtualBoardProcess,
                                                        tmp_path: Path) -> None:
    env = held["env"]
    failing = df(env, "-E 'ls /no/such/folder'")
    assert failing.returncode != 0 and "no/such/folder" in failing.stderr
    missing_file = df(env, f"-U {tmp_path}/absent.bin {WORKDIR}")
    assert missing_file.returncode == 1
    assert missing_file.stderr.strip().count("\n") == 0 and "absent.bin" in missing_file.stderr
    missing_folder = df(env, f"-D /data/local/tmp/absent-folder {tmp_path}/out")
    assert missing_folder.returncode == 1
    assert missing_folder.stderr.strip().count("\n") == 0 and "absent-folder" in missing_folder.stderr
    # still held, still usable
    with pytest.raises(InfraError, match="busy"):
        acquire(board_key(lab_board.address, None), "probe", 0.1)
    (tmp_path / "probe.txt").write_text("probe\n")
    assert df(env, f"-U {tmp_path}/probe.txt /data/local/tmp/df-probe").returncode == 0
    assert df(env, "-E 'cat /data/local/tmp/df-probe/probe.txt'").stdout == "probe\n"
    assert df(env, f"-D /data/local/tmp/df-probe {tmp_path}/back").returncode == 0
    assert (tmp_path / "back" / "df-probe" / "probe.txt").read_text() == "probe\n"
    assert df(env, "-C").stdout.strip() == f"assigned {lab_board.address}"


def _children(pid: int) -> set[int]:
    found = set()
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        found |= {int(child) for child in listing.read_text().split()}
    return found


def test_two_sessions_hold_two_boards_and_a_virtual_one_leaves_nothing(
    held: dict[str, Any], cli_path: Path, lab_board: VirtualBoardProcess, tmp_path: Path
) -> None:
    """While session ci-job-1 holds the lab board, session ci-job-2 gets a virtual board of its
    own (HIL_BOARD=virtual: the holder starts it); its `-d` stops that board and its adb server."""
    env = cli_env(cli_path, "ci-job-2", "virtual", tmp_path / "sessions")
    assert df(env, "-Q").returncode == 0
    try:
        assert poll_assigned(env).strip() == "assigned virtual-0"
        assert df(held["env"], "-C").stdout.strip() == f"assigned {lab_board.address}"
        assert df(env, "-E 'getprop ro.serialno'").stdout.strip() == "virtual-0"
        holder = json.loads((tmp_path / "sessions" / slug("ci-job-2") / "holder.json").read_text())
        children = _children(holder["pid"])
        assert len(children) >= 2  # the virtual board and the private adb server
    finally:
        assert df(env, "-d").returncode == 0
    assert not pid_alive(holder["pid"])
    assert not [child for child in children if pid_alive(child)]


def test_disconnect_gives_everything_back(held: dict[str, Any], lab_board: VirtualBoardProcess) -> None:
    """Last in this module: `-d` ends the holder; no process, lease, adb server or run folder
    is left, and a second `-d` is no error."""
    env = held["env"]
    holder = json.loads((held["folder"] / "holder.json").read_text())
    assert pid_alive(holder["pid"]) and holder["adb_server_pid"]
    released = df(env, "-d")
    assert released.returncode == 0, released.stderr
    assert not pid_alive(holder["pid"])
    assert not pid_alive(holder["adb_server_pid"])  # the holder's private adb server: gone
    acquire(board_key(lab_board.address, None), "probe", 0.0).release()  # the lease is free
    assert not held["folder"].exists()
    assert not list((lab_board.root / "fs/data/local/tmp/hil").glob("devicefarm-*"))
    again = df(env, "-d")
    assert again.returncode == 0 and "nothing held" in again.stdout
    after = df(env, "-C")
    assert after.returncode == 1 and after.stdout.startswith("unavailable: ")
    assert not re.search(r"waiting|assigned", after.stdout, re.IGNORECASE)
    no_board = df(env, "-E 'ls /'")
    assert no_board.returncode == 1 and "no board assigned" in no_board.stderr


def test_killed_holder_frees_its_lease_and_says_so(cli_path: Path, lab_board: VirtualBoardProcess,
                                                   tmp_path: Path) -> None:
    env = cli_env(cli_path, "ci-job-killed", lab_board.address, tmp_path / "sessions")
    assert df(env, "-Q").returncode == 0
    poll_assigned(env)
    session = Session("ci-job-killed", tmp_path / "sessions" / slug("ci-job-killed"))
    deadline = time.monotonic() + 10
    while not (holder := session.holder() or {}).get("adb_server_pid") and time.monotonic() < deadline:
        time.sleep(0.05)  # the holder notes what it started just after the board came up
    assert holder.get("children")
    os.kill(holder["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pid_alive(holder["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        acquire(board_key(lab_board.address, None), "probe", 5.0).release()  # the kernel freed it
        checked = df(env, "-C")
        assert checked.returncode == 1 and "is gone" in checked.stdout
        assert not re.search(r"waiting|assigned", checked.stdout, re.IGNORECASE)
        assert df(env, "-E 'ls /'").returncode == 1
        released = df(env, "-d")
        assert released.returncode == 0 and "nothing held" in released.stdout
        assert not pid_alive(holder["adb_server_pid"])  # -d stopped what the dead holder left
    finally:
        server = holder.get("adb_server_pid")
        if server and pid_alive(server):
            os.kill(server, signal.SIGKILL)


def test_no_board_requested_fails_loudly(cli_path: Path, tmp_path: Path) -> None:
    """`-Q` itself succeeds (its command line is well formed) and says `-C` will report why;
    `-C` then fails with the reason, in upstream's words for "no device"."""
    env = cli_env(cli_path, "ci-job-none", "", tmp_path / "sessions")
    queued = df(env, "-Q")
    assert queued.returncode == 0
    assert "HIL_BOARD" in queued.stderr and "-C` will report it" in queued.stderr
    checked = df(env, "-C")
    assert checked.returncode == 1 and checked.stdout.startswith("unavailable: ")
    assert "HIL_BOARD" in checked.stdout
    assert not re.search(r"waiting|assigned", checked.stdout, re.IGNORECASE)
    bad = df({**env, "HIL_BOARD": "not a board!"}, "-Q")
    assert bad.returncode == 0 and bad.stderr.count("\n") == 1
    checked = df(env, "-C")
    assert checked.returncode == 1 and "not a board!" in checked.stdout
    assert df(env, "-Z").returncode == 2  # a malformed command line is still an error


# Upstream's CI, in the shape of `.ci/scripts/setup-samsung-linux-deps.sh` (`acquire_device`)
# sourced by `pull.yml` under `set -ex`: a failed -Q means "no device farm" and ends in a green
# job; -C's output is captured with `out="$(...)"`, whose failure ends the script.
UPSTREAM_CI = """set -ex
if ! devicefarm-cli -Q; then
  echo "tests skipped: no device"
  exit 0
fi
out="$(devicefarm-cli -C 2>&1)"
echo "status: $out"
"""


@pytest.mark.parametrize("board", ["", "not a board!"], ids=["unset", "no-usable-board"])
def test_upstreams_ci_fails_when_the_board_is_misconfigured(cli_path: Path, tmp_path: Path, board: str) -> None:
    script = tmp_path / "ci.sh"
    script.write_text(UPSTREAM_CI)
    env = cli_env(cli_path, f"ci-job-misconfigured-{len(board)}", board, tmp_path / "sessions")
    if not board:
        env.pop("HIL_BOARD")
    job = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert job.returncode != 0, job.stdout + job.stderr  # red, not skipped and green
    assert "tests skipped" not in job.stdout
    assert "status:" not in job.stdout  # set -e ended it at the -C line


def test_forgotten_session_gives_the_board_back_after_its_idle_limit(
    cli_path: Path, lab_board: VirtualBoardProcess, tmp_path: Path
) -> None:
    """A job that never calls -d (cancelled, crashed) does not keep the board: with no request
    for HIL_DEVICEFARM_IDLE_S the holder gives everything back and -C says why."""
    env = {**cli_env(cli_path, "ci-job-forgotten", lab_board.address, tmp_path / "sessions"),
           "HIL_DEVICEFARM_IDLE_S": "1"}
    assert df(env, "-Q").returncode == 0
    poll_assigned(env)
    deadline = time.monotonic() + 30
    while (checked := df(env, "-C")).returncode == 0 and time.monotonic() < deadline:
        time.sleep(0.3)
    assert checked.returncode == 1 and "without a request" in checked.stdout
    acquire(board_key(lab_board.address, None), "probe", 5.0).release()
    assert df(env, "-d").returncode == 0
