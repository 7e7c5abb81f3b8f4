"""Noise control through the real adb path: the virtual board's thermal and cpufreq files,
its `hot` fault and the bounded cool-down, read by the script every case's run shell starts
with (hil/board/thermal.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from hil.board.adb import AdbBoard
from hil.board.connection import shell_v2
from hil.board.preflight import VIRTUAL_RUNNER
from hil.board.thermal import parse_state, thermal_script
from hil.virtual.device import CPUFREQ_POLICIES, THERMAL_ZONES
from tests.faults import wait_until_warm


@pytest.fixture
def board(board_device, virtual_board) -> Iterator[AdbBoard]:
    """An AdbBoard on the session's virtual board, its faults cleared afterwards."""
    yield AdbBoard("thermal", virtual_board.address, board_device, "thermal-run", VIRTUAL_RUNNER, 60)
    virtual_board.control("fault clear", applied_within=30)


def _read(board: AdbBoard, limit_c: float, max_wait_s: int, on_stderr=None):
    result = board._shell([["eval", thermal_script(int(limit_c * 1000), max_wait_s)]],
                          timeout=30, on_stderr=on_stderr)
    assert result.returncode == 0, result.stderr
    return parse_state(result.stderr)


def test_thermal_zones_and_cpufreq_policies_read_through_adb(board, board_device) -> None:
    assert shell_v2(board_device, "cat /sys/class/thermal/thermal_zone0/type", 10).stdout == "BIG\n"
    state = _read(board, 50.0, 0)
    assert state.zones == dict(THERMAL_ZONES)
    assert set(state.cpufreq) == {name for name, _, _ in CPUFREQ_POLICIES}
    for name, low, high in CPUFREQ_POLICIES:
        assert state.cpufreq[name] == {"governor": "schedutil", "cur_khz": high, "min_khz": low,
                                       "max_khz": high}
    assert state.cooldown == {"threshold_c": 50.0, "max_wait_s": 0, "waited_s": 0, "start_c": 38.0,
                              "end_c": 38.0, "cooled": True}
    record = state.record()
    assert record["hottest_c"] == 38.0 and record["hottest_zone"] == "BIG"
    assert state.still_hot is None


def test_a_hot_board_that_does_not_cool_is_waited_for_within_the_bound_and_said_so(
    board, virtual_board
) -> None:
    virtual_board.control("fault hot,temp=82,seconds=0", applied_within=30)
    lines: list[bytes] = []
    state = _read(board, 45.0, 2, on_stderr=lines.append)  # the board's own record says how long
    assert any(b"cooldown waiting: hottest zone 82000 >= 45000, up to 2 s" in chunk for chunk in lines)
    assert state.zones["NPU"] == 82.0
    assert all(policy["cur_khz"] == policy["min_khz"] for policy in state.cpufreq.values())  # throttled
    assert state.cooldown["waited_s"] == 2 and state.cooldown["cooled"] is False
    assert state.still_hot == "board still at 82 °C after waiting 2 s (cool-down threshold 45 °C)"


def test_a_hot_board_cools_when_its_time_is_up_and_the_wait_ends_there(board, virtual_board, caplog) -> None:
    wait_until_warm(virtual_board)  # a hot fault's seconds count from the board's warm-up
    virtual_board.control("fault hot,temp=70,seconds=2", applied_within=30)
    with caplog.at_level(logging.WARNING, logger="hil.board.adb"):
        state = _read(board, 45.0, 30, on_stderr=board._announce_cooldown)
    # read hot, then cooled: the wait ended at the cooling (at least one look), not at its
    # 30 s bound, however loaded the machine is
    assert state.cooldown["start_c"] == 70.0 and state.cooldown["cooled"] is True
    assert 1 <= state.cooldown["waited_s"] < state.cooldown["max_wait_s"] == 30
    assert state.zones == dict(THERMAL_ZONES)
    assert "thermal: hottest thermal zone at 70 °C >= the cool-down threshold 45 °C: waiting" in caplog.text


def test_a_fault_is_in_force_as_soon_as_control_returns(board, board_device, virtual_board) -> None:
    # control(..., applied_within=S) waits until the board's event loop has taken the line:
    # no sleep and no race between arming a fault and the next request
    for temp in (61, 72, 83):
        virtual_board.control(f"fault hot,temp={temp},seconds=0", applied_within=30)
        zone = shell_v2(board_device, "cat /sys/class/thermal/thermal_zone0/temp", 10).stdout.strip()
        assert zone == str(temp * 1000)
        virtual_board.control("fault clear", applied_within=30)
        assert shell_v2(board_device, "cat /sys/class/thermal/thermal_zone0/temp", 10).stdout.strip() == "38000"
