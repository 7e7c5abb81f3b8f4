"""Virtual boards for the bisection tests: quick reboots, the off-host measuring mode (every
execution a modelled 5 ms), warm before the first test; stopped by PID at the session's end.
Every test flashes the firmware it needs (or, with `no_firmware_faults`, runs with none)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board
from tests.faults import wait_until_warm

BOARD_ARGS = ["--reboot-seconds", "0.1", "--device-time", "5"]


@pytest.fixture(scope="session")
def boards(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[VirtualBoardProcess]]:
    """Three virtual boards (most tests use the first), for every bisection test."""
    root = tmp_path_factory.mktemp("bisect-boards")
    started: list[VirtualBoardProcess] = []
    try:
        for index in range(3):
            started.append(start_virtual_board(root / f"b{index}", "E9955", f"bisect-{index}", BOARD_ARGS))
        for board in started:
            wait_until_warm(board)
        yield started
    finally:
        for board in started:
            board.stop()


@pytest.fixture
def no_firmware_faults(boards: list[VirtualBoardProcess]) -> None:
    """The faults an earlier test's firmware armed are disarmed (until a board boots again)."""
    for board in boards:
        board.control("fault clear", applied_within=30)
