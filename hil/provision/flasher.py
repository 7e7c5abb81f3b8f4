"""Putting a known build on a board: the flash sequence, each step named and time-limited.

```
check images      exist, not empty, sha256 when the inventory gives one; an endpoint is known
reboot bootloader adb `reboot bootloader`; a board adb cannot reach: already in fastboot, or
                  power-cycled when it has power control (a lab's bootloader entry), else fail
wait fastboot     the board answers on its endpoint (USB serial listed, TCP port + getvar)
getvar product    must be the inventory's `product`, else nothing is written (board rebooted)
flash PARTITION   in flash order, each retried up to FLASH_ATTEMPTS times after a FAIL
reboot            fastboot reboot
wait adb          adb `device` again with sys.boot_completed=1
check build       the expected build property has its expected value
```

The order and the retries follow LAVA's fastboot deploy (lava_dispatcher/actions/deploy/
fastboot.py: the device's `flash_cmds_order` first, then the job's other images, each flash an
action with retries) and labgrid's AndroidFastbootDriver (labgrid/driver/fastbootdriver.py:
`flash_images` partition -> image, `flash_all` in that order). A failed step raises FlashError
(an InfraError) naming the step, with the flash's record; the board is then the pool's to
quarantine. A flash that timed out is not retried: the bootloader stopped answering.

The flasher is one small contract (`Flasher`), so that another method than fastboot can be
added (Samsung's download mode, say, whose `adb reboot download` and its own USB tool would be
a second implementation); `flasher_for` chooses it. Supported today: fastboot over a USB
serial, TCP (`tcp:HOST:PORT`) and UDP (`udp:HOST:PORT`), run on this host or, for a labgrid
place, on its exporter's host over ssh (hil/provision/fastboot.py).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from hil.board.adb import ADB_ERRORS
from hil.board.images import Image, Provisioning
from hil.board.power import PowerControl, cycle_to_bootloader
from hil.board.recovery import Recovery
from hil.errors import FlashError, InfraError

log = logging.getLogger(__name__)

FLASH_ATTEMPTS = 3
"""Tries of one partition's flash that the bootloader answered with FAIL."""
FLASH_TIMEOUT_S = 300.0
"""Default limit of one image's download and write (`--flash-timeout`)."""
T = TypeVar("T")


class Flasher(Protocol):
    """How images get onto a board in its flashing mode."""

    method: str
    """`fastboot`, ...: recorded with each flash."""
    endpoint: str
    """Where the board answers in its flashing mode."""
    reboot_target: str
    """What `adb reboot` is given to enter that mode (`bootloader` for fastboot)."""

    def wait(self, limit_s: float) -> None:
        """Return once the board answers in its flashing mode (InfraError past `limit_s`)."""
        ...

    def answers(self) -> bool:
        """Whether it answers in its flashing mode now."""
        ...

    def product(self) -> str:
        """The product the bootloader reports."""
        ...

    def write(self, image: Image) -> None:
        """Flash one image to its partition (InfraError when it fails; one that is also a
        TimeoutError when the board stopped answering: not retried)."""
        ...

    def boot(self) -> None:
        """Leave the flashing mode for the OS."""
        ...


def flasher_for(provisioning: Provisioning, flash_s: float = FLASH_TIMEOUT_S) -> Flasher:
    """The flasher of a board's provisioning record (fastboot: the only method today)."""
    from hil.provision.fastboot import FastbootFlasher

    return FastbootFlasher(provisioning.fastboot or "", flash_s=flash_s, via=provisioning.fastboot_via)


def needs_flash(provisioning: Provisioning, build: str | None) -> bool:
    """Whether a board reporting `build` must be flashed to reach the expected one."""
    return provisioning.flashable and (provisioning.expected_build is None
                                       or build != provisioning.expected_build[1])


def read_build(adb: Recovery, provisioning: Provisioning) -> str | None:
    """The board's value of the expected build property; None when it cannot be read."""
    if provisioning.expected_build is None:
        return None
    try:
        result = adb.board.shell(["getprop", provisioning.expected_build[0]])
    except (InfraError, *ADB_ERRORS):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


@dataclass
class Provisioner:
    """One board's flash: its images, its flasher, its adb side (the recovery ladder's steps
    for `adb reboot` and the wait for boot) and its power control."""

    name: str
    provisioning: Provisioning
    flasher: Flasher
    adb: Recovery
    power: PowerControl | None = None
    boot_s: float = 120.0
    """Limit of entering the bootloader, and of booting after the flash."""
    after_boot: Callable[[], None] | None = None
    """Run once the board has booted (the pool installs the runner again)."""

    def flash(self, why: str, before: str | None = None) -> dict[str, Any]:
        """Flash the board's images; its record (results.json `run.boards[].flashes[]`).
        FlashError naming the failed step (with the record) otherwise."""
        report: dict[str, Any] = {
            "why": why, "method": self.flasher.method, "endpoint": self.flasher.endpoint,
            "before": before, "after": None, "written": [], "steps": [], "error": None,
            "images": [],
        }
        steps = _Steps(self.name, report)
        images = self.provisioning.images
        report["images"] = steps.run("check images", lambda: self._check(images))
        log.warning("%s: flashing %s (%s) over %s", self.name, ", ".join(i.partition for i in images),
                    why, self.flasher.endpoint)
        steps.run(f"reboot {self.flasher.reboot_target}", self._enter)
        try:
            steps.run(f"wait {self.flasher.method}", lambda: self.flasher.wait(self.boot_s))
            steps.run("getvar product", self._check_product)
            for image in images:
                steps.run(f"flash {image.partition}", lambda image=image: self._write(image))
                report["written"].append(image.partition)
        except FlashError as exc:
            if not report["written"] and exc.step != "getvar product":  # (that one reboots)
                self._back_to_os()
            raise
        steps.run("reboot", self.flasher.boot)
        steps.run("wait adb", lambda: self.adb.wait_booted(self.boot_s))
        report["after"] = steps.run("check build", self._check_build)
        if self.after_boot is not None:
            steps.run("prepare", self.after_boot)
        return report

    def _check(self, images: tuple[Image, ...]) -> list[dict[str, Any]]:
        if not self.flasher.endpoint:
            raise InfraError(f"no {self.flasher.method} endpoint (a labgrid place without an "
                             "AndroidNetFastboot resource?)")
        return [_checked(image) for image in images]

    def _enter(self) -> str:
        """Into the flashing mode: adb reboot; for a board adb cannot reach, it may already be
        there; else a power cycle into the bootloader where the power control has one, else a
        plain power cycle (which boots the OS) and adb's way in again."""
        target = self.flasher.reboot_target
        try:
            self.adb.reboot_to(target, self.boot_s)
            return f"adb reboot {target}"
        except (InfraError, *ADB_ERRORS) as exc:
            if self.flasher.answers():
                return f"adb failed ({exc}); already in {self.flasher.method}"
            if self.power is None:
                raise InfraError(f"adb reboot {target} failed ({exc}) and the board has no "
                                 "power control") from exc
            if cycle_to_bootloader(self.power):
                return f"adb failed ({exc}); power-cycled into the bootloader"
            self.power.cycle()
            try:
                self.adb.wait_booted(self.boot_s)
                self.adb.reboot_to(target, self.boot_s)
            except (InfraError, *ADB_ERRORS) as again:
                raise InfraError(
                    f"adb failed ({exc}); power-cycled (a plain cycle: the power control has no "
                    f"`bootloader` command), then adb reboot {target} failed too: {again}"
                ) from again
            return f"adb failed ({exc}); power-cycled, then adb reboot {target}"

    def _back_to_os(self) -> None:
        """Nothing was written: the board back to its OS rather than left in its bootloader,
        where the next run's bring-up cannot reach it (best effort)."""
        try:
            self.flasher.boot()
        except InfraError as exc:
            log.warning("%s: left in %s: the reboot failed: %s", self.name, self.flasher.method, exc)

    def _check_product(self) -> str:
        product = self.flasher.product()
        wanted = self.provisioning.product
        if product != wanted:
            try:
                self.flasher.boot()  # nothing written: back to its OS, not left in the bootloader
                back = "board rebooted"
            except InfraError as exc:
                back = f"reboot failed too: {exc}"
            raise InfraError(f"the bootloader reports product {product!r}, the inventory says "
                             f"{wanted!r}: nothing written ({back})")
        return product

    def _write(self, image: Image) -> str:
        for attempt in range(1, FLASH_ATTEMPTS + 1):
            try:
                self.flasher.write(image)
                return f"attempt {attempt}"
            except InfraError as exc:
                if isinstance(exc, TimeoutError) or attempt == FLASH_ATTEMPTS:
                    raise InfraError(f"{exc} (attempt {attempt} of {FLASH_ATTEMPTS})") from exc
                log.warning("%s: flash %s failed (%s); again", self.name, image.partition, exc)
        raise AssertionError("unreachable")

    def _check_build(self) -> str | None:
        build = read_build(self.adb, self.provisioning)
        if self.provisioning.expected_build is None:
            return build
        prop, value = self.provisioning.expected_build
        if build != value:
            raise InfraError(f"{prop} is {build!r} after the flash, expected {value!r}")
        return build


class _Steps:
    """Runs the named steps of one flash and records each (name, seconds, ok, message)."""

    def __init__(self, name: str, report: dict[str, Any]) -> None:
        self.name = name
        self.report = report

    def run(self, step: str, action: Callable[[], T]) -> T:
        began = time.monotonic()
        try:
            value = action()
        except (InfraError, *ADB_ERRORS) as exc:
            message = f"{type(exc).__name__}: {exc}" if not isinstance(exc, InfraError) else str(exc)
            self._record(step, began, False, message)
            self.report["error"] = f"step '{step}': {message}"[:600]
            log.error("%s: flash failed at step '%s': %s", self.name, step, message)
            raise FlashError(f"{self.name}: flash failed at step '{step}': {message}"[:800],
                             step, self.report) from exc
        self._record(step, began, True, value if isinstance(value, str) else "")
        return value

    def _record(self, step: str, began: float, ok: bool, message: str) -> None:
        seconds = round(time.monotonic() - began, 3)
        self.report["steps"].append({"step": step, "seconds": seconds, "ok": ok,
                                     "message": message[:300]})
        log.info("%s: flash step '%s' %s in %.2f s", self.name, step, "ok" if ok else "failed", seconds)


def _checked(image: Image) -> dict[str, Any]:
    """The image's record once it exists, is not empty and has its sha256 (when given)."""
    try:
        size = image.path.stat().st_size if image.path.is_file() else None
    except OSError:
        size = None
    if size is None:
        raise InfraError(f"image for {image.partition}: {image.path}: no such file")
    if size == 0:
        raise InfraError(f"image for {image.partition}: {image.path}: empty")
    digest = hashlib.sha256()
    with image.path.open("rb") as data:
        while chunk := data.read(1 << 20):
            digest.update(chunk)
    sha256 = digest.hexdigest()
    if image.sha256 is not None and sha256 != image.sha256:
        raise InfraError(f"image for {image.partition}: {image.path}: sha256 {sha256[:16]}..., "
                         f"the inventory says {image.sha256[:16]}...")
    return {"partition": image.partition, "file": image.path.name, "bytes": size, "sha256": sha256}
