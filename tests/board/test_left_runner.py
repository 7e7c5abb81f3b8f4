"""A case that fails with an exception while its runner runs does not leave the runner behind.
Closing the kept shell does not end it: adbd hangs up the shell and closes its pipes, and the
runner, under `timeout` in a process group of its own, lives on (the virtual board does the
same: tests/virtual/test_shell_close.py). hil kills it by the PID it recorded."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from hil.board.adb import AdbBoard
from hil.board.invocation import INVOCATION_MARKER, PID_FILE
from hil.board.preflight import VIRTUAL_RUNNER
from hil.cases import load_suite
from hil.lower.build import build_artifact
from tests.adb_lab import wait_for

pytestmark = pytest.mark.slow  # a lowering


class _Interrupted(Exception):
    """What the test raises in the middle of a case."""


class _FailsOnceTheRunnerStarts(AdbBoard):
    """A board whose case fails with an exception as soon as its runner has started (its
    invocation marker, printed after its PID was recorded)."""

    def _announce_cooldown(self, chunk: bytes) -> None:
        if INVOCATION_MARKER.encode() in chunk:
            raise _Interrupted("the case ends here")
        super()._announce_cooldown(chunk)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


@pytest.fixture
def hanging_board(board_device, virtual_board) -> Iterator[AdbBoard]:
    board = _FailsOnceTheRunnerStarts("left", virtual_board.address, board_device, "left-run",
                                      VIRTUAL_RUNNER, 60)
    board.prepare()
    virtual_board.control("fault hang", applied_within=30)  # the runner never ends by itself
    yield board
    virtual_board.control("fault clear", applied_within=30)
    board.cleanup()


def test_a_case_failing_with_an_exception_kills_its_runner(hanging_board: AdbBoard, board_device,
                                                           tmp_path: Path) -> None:
    case = next(c for c in load_suite("smoke") if c.id == "add")
    artifact = build_artifact(case, "xnnpack", "E9955", tmp_path / "artifact")
    with pytest.raises(_Interrupted):
        hanging_board.run(artifact, "c0", iterations=1, warmup=0)
    pid = int(board_device.sync.read_text(f"{hanging_board.workdir}/c0/{PID_FILE}"))
    try:
        wait_for(lambda: _gone(pid), 10.0, f"the runner (pid {pid}) to be killed")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
