"""Power control: a command per action (real processes) and a USB serial relay (LCUS
protocol) on a real pty."""

from __future__ import annotations

import os
import select
import sys
import tty
from pathlib import Path

import pytest

from hil.board.power import CommandPower, SerialRelayPower, relay_frame
from hil.errors import InfraError


def _recorder(log: Path, word: str) -> tuple[str, ...]:
    """A command that appends `word` to `log`."""
    script = "import sys; open(sys.argv[1], 'a').write(sys.argv[2] + '\\n')"
    return (sys.executable, "-c", script, str(log), word)


def test_command_power_runs_each_action_and_cycles_off_then_on(tmp_path: Path) -> None:
    log = tmp_path / "power.log"
    power = CommandPower(_recorder(log, "on"), _recorder(log, "off"), off_seconds=0.01)
    power.on()
    power.off()
    power.cycle()
    assert log.read_text().split() == ["on", "off", "off", "on"]


def test_command_power_prefers_a_cycle_command(tmp_path: Path) -> None:
    log = tmp_path / "power.log"
    CommandPower(cycle_argv=_recorder(log, "cycle")).cycle()
    assert log.read_text().split() == ["cycle"]


def test_a_failing_power_command_is_infra_and_does_not_leak_its_arguments(tmp_path: Path) -> None:
    secret = "token=s3cr3t"
    power = CommandPower(on_argv=(sys.executable, "-c", "raise SystemExit(4)", secret))
    with pytest.raises(InfraError) as caught:
        power.on()
    assert "exited 4" in str(caught.value)
    assert secret not in str(caught.value)
    with pytest.raises(InfraError, match="no command configured"):
        power.off()


@pytest.mark.parametrize(("channel", "closed", "frame"), [
    (1, True, "a00101a2"), (1, False, "a00100a1"), (2, True, "a00201a3"), (8, False, "a00800a8"),
])
def test_relay_frames_follow_the_lcus_protocol(channel: int, closed: bool, frame: str) -> None:
    assert relay_frame(channel, closed).hex() == frame


def test_serial_relay_writes_its_frames_to_the_port(tmp_path: Path) -> None:
    master, slave = os.openpty()
    tty.setraw(slave)
    try:
        relay = SerialRelayPower(os.ttyname(slave), channel=2, off_seconds=0.0)
        relay.cycle()
        inverted = SerialRelayPower(os.ttyname(slave), channel=1, inverted=True)
        inverted.on()
        written = b""
        while len(written) < 12 and select.select([master], [], [], 5.0)[0]:
            written += os.read(master, 64)  # the frames may arrive in several reads
    finally:
        os.close(master)
        os.close(slave)
    assert written.hex() == "a00200a2" + "a00201a3" + "a00100a1"


def test_a_missing_relay_is_infra(tmp_path: Path) -> None:
    with pytest.raises(InfraError, match="power relay"):
        SerialRelayPower(str(tmp_path / "ttyUSB9")).on()
