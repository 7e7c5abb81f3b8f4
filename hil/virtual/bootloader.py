"""The virtual board's bootloader mode: its fastboot endpoint, its images and the build they
make the board report.

A board is in one of three modes: Android (adb listens), the bootloader (fastboot listens
on the board's fastboot port, adb does not) or down (rebooting, powered off, or a
`no-bootloader` board that never got there). `adb reboot bootloader` (or `reboot bootloader`
in a shell) goes Android → down → bootloader, `fastboot reboot` bootloader → down → Android,
`fastboot reboot-bootloader` bootloader → down → bootloader; each down time is the board's
`--reboot-seconds`. A power cycle boots Android; `power bootloader` on the control FIFO
(`VirtualBoardProcess.cycle_to_bootloader()`) is a power cycle with the bootloader key held,
which is how a lab brings a board that is down into its bootloader.

The fastboot port is chosen when the board starts (`--fastboot-port`, 0: a free one) and kept
for the board's life: outside the bootloader a socket stays bound to it without listening,
so a host connecting there is refused, as by a board with no fastboot, and no other process
takes the port. The endpoint, `tcp:127.0.0.1:PORT`, is on the board's ready line.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import socket
from typing import Protocol

from hil.errors import UsageError
from hil.virtual.device import CHIPSETS, Device
from hil.virtual.fastboot import FastbootServer
from hil.virtual.faults import Fault, FaultPlan, parse_fault
from hil.virtual.images import FlashStore, firmware_faults, product

log = logging.getLogger(__name__)

class _Board(Protocol):
    device: Device
    faults: FaultPlan

    def fire(self, event: str, path: str = "") -> list[Fault]: ...
    def clear_faults(self, kind: str | None = None) -> None: ...
    def request_reboot(self, reason: str, target: str = "") -> None: ...


class BootloaderMode:
    """The board's bootloader: the fastboot port, the server while in the bootloader, the
    flash storage (`images.py`) and the build it makes Android report."""

    def __init__(self, board: _Board, host: str, port: int) -> None:
        self.board = board
        self.host = host
        self.port = port
        self.store = FlashStore(board.device.root)
        self.server: FastbootServer | None = None
        self._reservation: socket.socket | None = None
        self._firmware_faults: list[Fault] = []
        """The faults the flashed `system` image armed at the last boot (`images.py`)."""

    @property
    def endpoint(self) -> str:
        """The fastboot client's name for the board: `tcp:HOST:PORT`."""
        return f"tcp:{self.host}:{self.port}"

    @property
    def active(self) -> bool:
        """Whether fastboot listens (the board is in the bootloader)."""
        return self.server is not None

    def reserve(self) -> None:
        """Hold the fastboot port (bound, not listening); picks one when the port is 0.
        OSError when it is taken."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        self.port = sock.getsockname()[1]
        self._reservation = sock

    def release(self) -> None:
        """Let the fastboot port go (the board stops)."""
        if self._reservation is not None:
            self._reservation.close()
            self._reservation = None

    async def enter(self) -> bool:
        """Start fastboot on the board's port; False (nothing listens) under `no-bootloader`
        or when the port was taken meanwhile."""
        if self.board.faults.state("no-bootloader") is not None:
            log.warning("fault no-bootloader: the board never reaches its bootloader")
            self.board.device.log("fault injected: no-bootloader", level="W")
            return False
        self.release()
        server = FastbootServer(self, self.host, self.port)
        try:
            await server.start()
        except OSError as exc:
            log.error("fastboot port %d: %s: the board sits in a bootloader no host reaches",
                      self.port, exc)
            return False
        self.server = server
        return True

    async def leave(self) -> None:
        """Stop fastboot (cutting its sessions, a hung one too) and hold the port again."""
        if self.server is None:
            return
        server, self.server = self.server, None
        await server.stop()
        try:
            self.reserve()
        except OSError as exc:
            log.warning("fastboot port %d: %s (taken while the board was away?)", self.port, exc)

    async def boot_android(self) -> None:
        """What a boot into Android reads from the partitions: the build, the vendor lib and
        the test rig's firmware faults. The images are hashed in a worker thread: large ones
        would stall the board's loop."""
        device = self.board.device
        props = await asyncio.to_thread(
            self.store.build, device.properties["ro.product.name"],
            device.properties["ro.product.device"], device.properties["ro.product.brand"],
        )
        for key, value in props.items():
            device.set_property(key, value)
        log.info("build %s", props["ro.build.fingerprint"])
        self._arm_firmware_faults(firmware_faults(await asyncio.to_thread(self.store.system_head)))
        self.apply_vendor()

    def _arm_firmware_faults(self, specs: list[str]) -> None:
        """Disarm the faults the previous boot's `system` image armed; arm this one's (a
        SPEC the board cannot parse is logged and left out, as an unknown property is)."""
        for fault in self._firmware_faults:
            self.board.faults.remove(fault)
        self._firmware_faults = []
        for spec in specs:
            try:
                fault = parse_fault(spec)
            except UsageError as exc:
                log.warning("system image: %s: ignored", exc)
                continue
            if fault.on == "now":
                log.warning("system image: fault %r: on=now is not a build's: ignored", spec)
                continue
            self.board.faults.add(fault)
            self._firmware_faults.append(fault)
            self.board.device.log(f"firmware fault armed: {spec} (test rig)", level="W")
        if specs:
            log.info("firmware faults armed: %s", ", ".join(specs))

    def apply_vendor(self) -> None:
        """ENN's library is on the board unless the vendor partition is broken (or the board
        was started without it)."""
        broken = self.board.faults.state("broken-vendor") is not None
        self.board.device.place_vendor_lib(self.board.device.vendor_lib and not broken)

    # -- fastboot.Bootloader --------------------------------------------------------------
    def fastboot_variables(self) -> dict[str, str]:
        """`product` (the chipset's, or the `wrong-product` fault's) and `serialno`."""
        device = self.board.device
        answer = product(device.chipset)
        wrong = self.board.faults.state("wrong-product")
        if wrong is not None:
            other = next(name for name in sorted(CHIPSETS) if name != device.chipset)
            answer = wrong.product or product(other)
        return {"product": answer, "serialno": device.serial}

    def fire(self, event: str, path: str = "") -> list[Fault]:
        """The board's faults firing on a fastboot event."""
        return self.board.fire(event, path)

    def flashed(self, partition: str) -> None:
        """A flash of the `broken-vendor` fault's partition cures it."""
        broken = self.board.faults.state("broken-vendor")
        if broken is not None and fnmatch.fnmatchcase(partition, broken.path):
            log.info("%s flashed: the broken vendor partition is cured", partition)
            self.board.clear_faults("broken-vendor")

    def bootloader_reboot(self, target: str) -> None:
        """`fastboot reboot` ("") or `reboot-bootloader` ("bootloader")."""
        self.board.request_reboot(f"fastboot reboot {target}".strip(), target)
