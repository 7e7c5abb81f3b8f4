"""Power control of a board: none, a command per action, or a USB serial relay.

The contract is labgrid's power protocol: `on()`, `off()`, `cycle()`; the recovery ladder
calls `cycle()` when a reboot over adb did not bring the board back. Failures raise
InfraError naming the action, never the command line (it may carry a password or token).
"""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import serial

from hil.errors import InfraError

log = logging.getLogger(__name__)

COMMAND_TIMEOUT_S = 60.0
"""The longest a power command may take."""
OFF_SECONDS = 2.0
"""How long `cycle()` leaves the board off when there is no cycle command."""


class PowerControl(Protocol):
    """Switch a board's power."""

    def on(self) -> None:
        """Power the board on."""
        ...

    def off(self) -> None:
        """Power the board off."""
        ...

    def cycle(self) -> None:
        """Power the board off, then on."""
        ...


@runtime_checkable
class BootloaderPower(PowerControl, Protocol):
    """A power control that can also power-cycle a board into its bootloader (a command
    that holds the bootloader key or strap while it powers on)."""

    @property
    def enters_bootloader(self) -> bool:
        """Whether `cycle_to_bootloader` is configured for this board."""
        ...

    def cycle_to_bootloader(self) -> None:
        """Power off, then on into the bootloader (fastboot)."""
        ...


def cycle_to_bootloader(power: PowerControl) -> bool:
    """Power-cycle into the board's bootloader when `power` knows how (`BootloaderPower`
    with it configured: CommandPower's `bootloader`, the virtual board's `power
    bootloader`); False, with nothing done, when it does not: a plain cycle boots the
    board's OS."""
    if not isinstance(power, BootloaderPower) or not power.enters_bootloader:
        return False
    power.cycle_to_bootloader()
    return True


@dataclass(frozen=True)
class CommandPower:
    """One argv per action, run without a shell (e.g. `[usbrelay, BITFT_1=0]`, or a PDU's
    CLI); `cycle` defaults to off, wait `off_seconds`, on."""

    on_argv: tuple[str, ...] | None = None
    off_argv: tuple[str, ...] | None = None
    cycle_argv: tuple[str, ...] | None = None
    off_seconds: float = OFF_SECONDS
    timeout_s: float = COMMAND_TIMEOUT_S
    bootloader_argv: tuple[str, ...] | None = None
    """A power cycle that comes up in the bootloader (fastboot), for provisioning a board
    adb cannot reach."""

    @property
    def enters_bootloader(self) -> bool:
        """Whether `cycle_to_bootloader` is configured."""
        return bool(self.bootloader_argv)

    def cycle_to_bootloader(self) -> None:
        self._run("bootloader", self.bootloader_argv)

    def _run(self, action: str, argv: Sequence[str] | None) -> None:
        if not argv:
            raise InfraError(f"power {action}: no command configured")
        log.info("power %s (%s)", action, argv[0])
        try:
            done = subprocess.run(
                list(argv), capture_output=True, text=True, timeout=self.timeout_s, check=False
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise InfraError(f"power {action}: {type(exc).__name__}") from exc
        if done.returncode != 0:
            raise InfraError(f"power {action}: command exited {done.returncode}")

    def on(self) -> None:
        self._run("on", self.on_argv)

    def off(self) -> None:
        self._run("off", self.off_argv)

    def cycle(self) -> None:
        if self.cycle_argv:
            self._run("cycle", self.cycle_argv)
            return
        self.off()
        time.sleep(self.off_seconds)
        self.on()


def relay_frame(channel: int, closed: bool) -> bytes:
    """The 4-byte command of the common CH340 "LCUS" USB relay modules:
    `A0 <channel> <0|1> <sum of the three, mod 256>`."""
    if not 1 <= channel <= 8:
        raise ValueError(f"relay channel {channel}: expected 1..8")
    head = bytes([0xA0, channel, 1 if closed else 0])
    return head + bytes([sum(head) & 0xFF])


@dataclass(frozen=True)
class SerialRelayPower:
    """A USB serial relay (LCUS protocol) in the board's supply line: relay closed = on,
    unless `inverted` (a normally-closed wiring)."""

    url: str
    """Anything `serial.serial_for_url` opens: `/dev/ttyUSB1`, `socket://host:port`..."""
    channel: int = 1
    baudrate: int = 9600
    inverted: bool = False
    off_seconds: float = OFF_SECONDS

    def _switch(self, powered: bool) -> None:
        frame = relay_frame(self.channel, powered != self.inverted)
        try:
            with serial.serial_for_url(self.url, baudrate=self.baudrate, timeout=1.0,
                                       write_timeout=2.0) as port:
                port.write(frame)
                port.flush()
        except (serial.SerialException, OSError, ValueError) as exc:
            raise InfraError(f"power relay {self.url}: {exc}") from exc
        log.info("power relay %s channel %d: %s", self.url, self.channel, "on" if powered else "off")

    def on(self) -> None:
        self._switch(True)

    def off(self) -> None:
        self._switch(False)

    def cycle(self) -> None:
        self.off()
        time.sleep(self.off_seconds)
        self.on()
