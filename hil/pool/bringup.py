"""Bring one board up for the pool: start it (virtual) or reach it, read its build and flash
its known-good images when it differs (`--provision`, hil/provision), preflight it, open its
console, install the runner, learn its runner profile. The lease is taken before (the pool's).

InfraError means the board is not used; UsageError is the user's to fix (a real board and no
`--runner`).
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adbutils import AdbDevice

from hil import lifeline
from hil.board.adb import AdbBoard
from hil.board.inventory import InventoryEntry
from hil.board.preflight import VIRTUAL_RUNNER, connect_keeping_server, inspect_board
from hil.board.recovery import BoardFrozen, Recovery, Rung, Step
from hil.board.servers import BoardServers
from hil.errors import InfraError, UsageError
from hil.paths import safe_name
from hil.runner.profiles import VIRTUAL_PROFILE_PROPERTY, BoardRunner, choose_profile, runner_identity
from hil.virtual.offhost import DEVICE_TIME_PROPERTY

log = logging.getLogger(__name__)

BUILD_PROPERTY = "ro.build.fingerprint"
"""The build a board without an inventory `expected_build` is recorded by."""


def virtual_runner(runner: Path | None) -> Path:
    """What a virtual board runs: hil's own runner front, or `--runner` when it is a test rig's
    stand-in (hil/virtual/runner_build.py: a runner build that behaves in its own way)."""
    from hil.virtual.runner_build import is_stand_in

    if runner is not None and runner.is_file() and is_stand_in(runner.read_bytes()):
        return runner
    return VIRTUAL_RUNNER


@dataclass(frozen=True)
class PoolOptions:
    """How the pool brings boards up and judges their health (from `hil run`'s options)."""

    chipset: str
    run_id: str
    """Names the run's folder on every board."""
    out_dir: Path
    """Console logs go to `out_dir/console/<board>.log`."""
    runner: Path | None = None
    """The Android runner for real boards; virtual boards bring their own."""
    timeout_s: float = 120.0
    idle_timeout_s: float = 30.0
    boot_timeout_s: float = 120.0
    runner_profile: str | None = None
    virtual_link: str = "none"
    virtual_device_time: str | None = None
    adb_server: str | None = None
    board_wait_s: float = 0.0
    provision: bool = False
    """`--provision`: flash a board with images whose build is not the expected one."""
    flash_timeout_s: float = 300.0
    """Limit of one image's flash."""


@dataclass
class LiveBoard:
    """A board that came up: how to drive it, bring it back, and what its runner runs."""

    board: AdbBoard
    recovery: Recovery
    runner: BoardRunner
    record: dict[str, Any]
    """Its entry in results.json's `run.boards`."""


def bring_up(
    entry: InventoryEntry,
    options: PoolOptions,
    servers: BoardServers,
    on_stop: Callable[[Callable[[], Any]], None],
) -> LiveBoard:
    """Bring `entry` up. `on_stop(callback)` registers what the pool must undo at its end
    (a virtual board's process and folder)."""
    name = entry.name
    idle_s = options.idle_timeout_s
    adb = servers.server_for(entry)
    began = time.perf_counter()
    if entry.virtual:
        from hil.virtual.launcher import start_virtual_board

        root = Path(tempfile.mkdtemp(prefix=f"hil-{name}-"))
        extra = ["--link", options.virtual_link]
        if options.runner_profile:
            extra += ["--runner-profile", options.runner_profile]
        if options.virtual_device_time:
            extra += ["--device-time", options.virtual_device_time]
        on_stop(lambda: shutil.rmtree(root, ignore_errors=True))
        lifeline.remove_with(root)  # and after a kill -9 of hil, by its watcher
        # warm: the executor's import is the board's start-up, not its first case's time
        process = start_virtual_board(root, options.chipset, name, extra, wait_warm=True)
        on_stop(process.stop)
        entry = dataclasses.replace(entry, adb=process.address, console=process.console, power=process)
    address = entry.adb
    keeper = servers.keeper_for(adb)
    cycled: list[Step] = []
    try:
        device = connect_keeping_server(entry, adb, keeper, address, idle_s)
    except BoardFrozen as exc:
        if entry.power is None:
            raise
        device, cycled = _power_cycled(entry, options, servers, exc)
    probe = AdbBoard(name, address, device, options.run_id, VIRTUAL_RUNNER, options.timeout_s, idle_s)
    flashes, build = _provision(entry, options, probe, servers)
    report = inspect_board(probe, entry, options.chipset, console=False)
    if report.problems:
        raise InfraError(f"preflight: {'; '.join(report.problems)}")
    runner = virtual_runner(options.runner) if report.virtual else options.runner
    if runner is None:
        raise UsageError(
            f"--runner: {name} is a real board: pass the enn_executor_runner built for "
            "Android (scripts/build-enn.sh --build android, or $HIL_RUNNER in the exynos image)"
        )
    console = _open_console(entry, options)
    board = AdbBoard(name, address, probe.device, options.run_id, runner, options.timeout_s, idle_s,
                     console)  # probe.device: a flash reconnected it
    try:
        info = board.prepare()
    except InfraError:
        if console is not None:
            console.close()
        raise
    recovery = Recovery(
        board, servers.keeper_for(adb), adb.connect, adb.disconnect, network=entry.network,
        power=entry.power, expected_chipset=report.chipset, idle_s=idle_s,
        boot_s=options.boot_timeout_s,
    )
    recovery.flashes.extend(flashes)
    recovery.history.extend(cycled)
    if entry.provisioning is not None and entry.provisioning.flashable:
        recovery.reflash = _reflash(entry, options, recovery)
    choice = choose_profile(
        options.runner_profile, entry.runner_profile,
        info.properties.get(VIRTUAL_PROFILE_PROPERTY) if info.virtual else None,
        None if info.virtual else runner,
    )
    record = {"name": info.name, "adb": info.adb, "chipset": info.chipset, "virtual": info.virtual,
              "properties": info.properties, "console": entry.console if console is not None else None,
              "runner_pushes": board.runner_pushes, "runner_profile": choice.record(),
              "start_s": round(time.perf_counter() - began, 3)}
    record["runner"] = runner_identity(runner)
    if build is not None:
        record.update(build=build, flashes=flashes)
    else:  # no expected build: what the board reports all the same (`hil bisect`'s tuple)
        reported = info.properties.get(BUILD_PROPERTY)
        record["build"] = {"property": BUILD_PROPERTY, "expected": None, "before": reported,
                           "after": reported, "differed": False}
    if cycled:
        record["recovery"] = [step.record() for step in cycled]
    if info.properties.get(DEVICE_TIME_PROPERTY):  # the off-host measuring mode: not a measurement
        record["device_time"] = info.properties[DEVICE_TIME_PROPERTY]
    log.info("%s: ready (%s, chipset %s, runner profile %s%s)", name, address, info.chipset,
             choice.profile.name, ", VIRTUAL" if info.virtual else "")
    return LiveBoard(board, recovery, BoardRunner(name, choice, info.virtual), record)


def _power_cycled(entry: InventoryEntry, options: PoolOptions, servers: BoardServers,
                  why: BoardFrozen) -> tuple[AdbDevice, list[Step]]:
    """A board with power control found frozen as it comes up (since an earlier run, say):
    power-cycled once and waited for (`--boot-timeout`), as the POWER_CYCLE rung of its ladder
    would in the run, so that it is not left out of this run and every later one. Its device
    and the step (results.json `run.boards[].recovery`, its message saying why); an InfraError
    naming both when it is still not back. Only a board found frozen: one that cannot be
    reached at all may be unplugged or switched off, and is not waited for a boot timeout."""
    log.warning("%s: power cycle", why)  # why names the board
    device = servers.server_for(entry).client.device(serial=entry.adb)
    board = AdbBoard(entry.name, entry.adb, device, options.run_id, VIRTUAL_RUNNER,
                     options.timeout_s, options.idle_timeout_s)
    recovery = _adb_side(entry, options, board, servers)
    back = recovery.recover(Rung.POWER_CYCLE) is Rung.HEALTHY
    step = recovery.history[0]
    if not back:
        raise InfraError(f"{why}; power cycle: {step.message}")
    step.message = f"at bring-up: {why}"[:300]
    return board.device, [step]


def _adb_side(entry: InventoryEntry, options: PoolOptions, board: AdbBoard,
              servers: BoardServers) -> Recovery:
    adb = servers.server_for(entry)
    return Recovery(board, servers.keeper_for(adb), adb.connect, adb.disconnect,
                    network=entry.network, power=entry.power, idle_s=options.idle_timeout_s,
                    boot_s=options.boot_timeout_s)


def _provision(entry: InventoryEntry, options: PoolOptions, probe: AdbBoard,
               servers: BoardServers) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The board's build before the run (results.json `build`), and with `--provision` its
    flash when that build is not the expected one: (the flash records, the build record).
    FlashError (the pool quarantines the board) when the flash fails."""
    from hil.provision import Provisioner, build_record, flasher_for, needs_flash, read_build

    provisioning = entry.provisioning
    if provisioning is None or provisioning.expected_build is None:
        return [], None
    adb = _adb_side(entry, options, probe, servers)
    before = read_build(adb, provisioning)
    if not (options.provision and needs_flash(provisioning, before)):
        return [], build_record(provisioning, before, before)
    flasher = flasher_for(provisioning, options.flash_timeout_s)
    report = Provisioner(entry.name, provisioning, flasher, adb, entry.power,
                         options.boot_timeout_s).flash("provision", before)
    return [report], build_record(provisioning, before, report["after"])


def _reflash(entry: InventoryEntry, options: PoolOptions, recovery: Recovery) -> Callable[[], dict[str, Any]]:
    """The REFLASH rung of the board's ladder: its images flashed again, then the runner and the
    run's folder put back (a flash may have wiped /data)."""
    from hil.provision import Provisioner, flasher_for, read_build

    provisioning = entry.provisioning
    assert provisioning is not None

    def reflash() -> dict[str, Any]:
        flasher = flasher_for(provisioning, options.flash_timeout_s)
        provisioner = Provisioner(entry.name, provisioning, flasher, recovery, entry.power,
                                  options.boot_timeout_s, after_boot=lambda: _prepare(recovery.board))
        return provisioner.flash("recovery", read_build(recovery, provisioning))

    return reflash


def _prepare(board: AdbBoard) -> None:
    board.prepare()


def _open_console(entry: InventoryEntry, options: PoolOptions) -> Any:
    """The board's console, or None (none configured, or it cannot be opened: a warning)."""
    from hil.board.console import SerialConsole

    if not entry.console:
        return None
    log_path = options.out_dir / "console" / f"{safe_name(entry.name)}.log"
    try:
        return SerialConsole(entry.console, log_path, entry.console_baud).open()
    except InfraError as exc:
        log.warning("%s: running without a console: %s", entry.name, exc)
        return None
