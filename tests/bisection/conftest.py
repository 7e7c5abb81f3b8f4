"""Virtual boards for the bisection tests: quick reboots, the off-host measuring mode (every
execution a modelled 5 ms), warm before the first test; stopped by PID at the session's end.
`boards` is the one board most tests use; `three_boards` adds two (started only where a test
asks for them). Every test flashes the firmware it needs (or, with `no_firmware_faults`, runs
with none)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board
from tests.faults import wait_until_warm

BOARD_ARGS = ["--reboot-seconds", "0.1", "--device-time", "5"]


def _start(root: Path, indexes: range) -> Iterator[list[VirtualBoardProcess]]:
    started: list[VirtualBoardProcess] = []
    try:
        for index in indexes:
            started.append(start_virtual_board(root / f"b{index}", "E9955", f"bisect-{index}", BOARD_ARGS))
        for board in started:
            wait_until_warm(board)
        yield started
    finally:
        for board in started:
            board.stop()


@pytest.fixture(scope="session")
def boards(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[VirtualBoardProcess]]:
    """One virtual board, for every bisection test."""
    yield from _start(tmp_path_factory.mktemp("bisect-boards"), range(1))


@pytest.fixture(scope="session")
def three_boards(boards: list[VirtualBoardProcess],
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[VirtualBoardProcess]]:
    """`boards`' one and two more."""
    for more in _start(tmp_path_factory.mktemp("bisect-more-boards"), range(1, 3)):
        yield boards + more


@pytest.fixture
def no_firmware_faults(boards: list[VirtualBoardProcess]) -> None:
    """The faults an earlier test's firmware armed are disarmed (until a board boots again)."""
    for board in boards:
        board.control("fault clear", applied_within=30)
