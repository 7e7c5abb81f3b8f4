"""`hil virtual-board`: run one virtual board until SIGTERM or SIGINT.

Prints one line to stdout once it listens:
`hil-virtual-board ready 127.0.0.1:PORT chipset=E9955 root=DIR fastboot=tcp:127.0.0.1:FPORT
console=/dev/pts/N runner_profile=P [device_time=T] (VIRTUAL board: ...)` (one line), where
`fastboot=` is the endpoint the fastboot client uses while the board is in its bootloader
(`bootloader.py`) and device_time the off-host measuring mode (`offhost.py`).
and a second one, `hil-virtual-board warm`, once its executor has imported ExecuTorch's host
runtime (seconds under load): a runner exec before that waits for it. `hil run` waits for
that line too, so that the warm-up is charged to the board's start, not to its first case.
Everything else goes to stderr through `logging`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from hil.adbkey import read_keys
from hil.errors import InfraError, UsageError
from hil.runner.profiles import DEFAULT_VIRTUAL_PROFILE, PROFILES
from hil.virtual.auth import Authority
from hil.virtual.console import VirtualConsole
from hil.virtual.device import CHIPSETS, Device, soc_model
from hil.virtual.faults import FaultPlan, parse_fault
from hil.virtual.images import PARTITIONS, FlashStore, ImageError
from hil.virtual.link import LINKS, Link
from hil.virtual.offhost import DEVICE_TIME_PROPERTY, parse_device_time
from hil.virtual.server import EMULATOR_PORTS, LISTEN_HOST, VirtualBoard

log = logging.getLogger(__name__)

READY_PREFIX = "hil-virtual-board ready "
WARM_LINE = "hil-virtual-board warm"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the virtual board's options to a (sub-command) parser."""
    parser.add_argument(
        "--port", type=int, default=0,
        help="TCP port on 127.0.0.1; 0 picks a free one outside adb's emulator range "
        "5555-5585 (default: 0)",
    )
    parser.add_argument(
        "--fastboot-port", type=int, default=0,
        help="TCP port on 127.0.0.1 of the board's bootloader (fastboot listens there only "
        "while the board is in it: `adb reboot bootloader`); 0 picks a free one (default: 0)",
    )
    parser.add_argument(
        "--image", action="append", default=[], metavar="PARTITION=FILE",
        help="an image on the board's PARTITION when it starts, as if flashed before (its "
        "build follows: docs/explanation/virtual-board.md, 'Its bootloader'); repeatable",
    )
    parser.add_argument(
        "--chipset", default="E9955",
        help=f"chipset the board reports: {', '.join(sorted(CHIPSETS))} (default: E9955)",
    )
    parser.add_argument(
        "--root", type=Path, default=None,
        help="board folder: fs/ is the device's /, run/ its sockets and logs "
        "(default: a new temporary folder, removed when the board exits)",
    )
    parser.add_argument(
        "--serial", default="hil-virtual", help="ro.serialno (default: hil-virtual)"
    )
    parser.add_argument(
        "--link", default="none", metavar="|".join(LINKS),
        help="shape bandwidth and latency like a USB cable (default: none)",
    )
    parser.add_argument(
        "--reboot-seconds", type=float, default=2.0,
        help="how long a reboot keeps the board off the network (default: 2.0)",
    )
    parser.add_argument(
        "--shutdown-seconds", type=float, default=0.0,
        help="how long a requested reboot keeps the board on adb before it goes down, as a "
        "real board's shutdown does (default: 0; a power cut is always at once)",
    )
    parser.add_argument(
        "--console", type=Path, default=None, metavar="PATH",
        help="make PATH a symlink to the board's UART (a pty; its /dev/pts path is printed "
        "on start either way)",
    )
    parser.add_argument(
        "--fault", action="append", default=[], metavar="SPEC",
        help="inject a fault, e.g. drop,on=push | freeze | crash,signal=ABRT | hang | "
        "wrong-chipset (see hil/virtual/faults.py); repeatable; also at run time: "
        "`echo 'fault SPEC' > ROOT/run/control`",
    )
    parser.add_argument(
        "--runner-profile", default=DEFAULT_VIRTUAL_PROFILE, metavar="|".join(PROFILES),
        help="the runner binary the board imitates: upstream (ENN + portable kernels, what "
        "backends/samsung/build.sh builds) refuses XNNPACK programs and quantized kernels; "
        f"hil runs the host flows too (default: {DEFAULT_VIRTUAL_PROFILE})",
    )
    parser.add_argument(
        "--device-time", default=None, metavar="measured|MS",
        help="the off-host measuring mode (for measuring hil itself): a program+inputs runs "
        "on the host runtime once, later execs replay its outputs and sleep a modelled device "
        "time per execution: the latency its first run measured (measured) or MS ms; the "
        f"board reports it as {DEVICE_TIME_PROPERTY} (default: off)",
    )
    parser.add_argument(
        "--trusted-key", action="append", default=[], type=Path, metavar="FILE",
        help="also accept the adb keys in FILE (a .pub such as ~/.android/adbkey.pub, or an "
        "adb_keys file: one key a line, read again at every connection); the board always "
        "accepts hil's own key (hil/adbkey.py) and asks every other host for one: it shows "
        "`unauthorized` in `adb devices` until its key is trusted; repeatable",
    )
    parser.add_argument(
        "--no-vendor-lib", action="store_true",
        help="no libenn_public_api_cpp.so on the board: the runner segfaults, preflight fails",
    )


def run(args: argparse.Namespace) -> int:
    """Run the board described by parsed `args` until SIGTERM/SIGINT; returns 0.
    Raises UsageError for bad options, InfraError when the board cannot start."""
    soc_model(args.chipset)
    if not 0 <= args.port <= 65535 or args.port in EMULATOR_PORTS:
        raise UsageError(
            f"--port {args.port}: expected 0 or a free port outside adb's emulator "
            "range 5555-5585"
        )
    if not 0 <= args.fastboot_port <= 65535 or args.fastboot_port in EMULATOR_PORTS or (
        args.fastboot_port and args.fastboot_port == args.port
    ):
        raise UsageError(
            f"--fastboot-port {args.fastboot_port}: expected 0 or a free port outside adb's "
            "emulator range 5555-5585, other than --port"
        )
    for option, value in (("--reboot-seconds", args.reboot_seconds),
                          ("--shutdown-seconds", args.shutdown_seconds)):
        if not value >= 0:
            raise UsageError(f"{option} {value}: must be >= 0")
    for path in args.trusted_key:
        if not read_keys(path):
            raise UsageError(f"--trusted-key {path}: no adb public key in it (a .pub file such as "
                             "~/.android/adbkey.pub, or one key a line)")
    images = _read_images(args.image)
    device_time = parse_device_time(args.device_time) if args.device_time is not None else None
    if args.link not in LINKS:
        raise UsageError(f"--link {args.link}: expected one of {', '.join(LINKS)}")
    faults = FaultPlan()
    now = []  # `on=now` faults apply once the board runs
    for spec in args.fault:
        fault = parse_fault(spec)
        if fault.on == "now":
            now.append(spec)
        else:
            faults.add(fault)
    if args.root is not None:
        return _run_board(args, args.root, images, device_time, faults, now)
    root = Path(tempfile.mkdtemp(prefix="hil-virtual-board-"))  # the board's own: gone with it
    try:
        return _run_board(args, root, images, device_time, faults, now)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run_board(args: argparse.Namespace, root: Path, images: dict[str, bytes],
               device_time: str | None, faults: FaultPlan, now: list[str]) -> int:
    for partition, data in images.items():
        try:
            FlashStore(root).flash(partition, data)
        except ImageError as exc:
            raise UsageError(f"--image {partition}=...: {exc}") from None
    device = Device(root, args.chipset, args.serial, vendor_lib=not args.no_vendor_lib,
                    runner_profile=args.runner_profile)
    if device_time is not None:
        device.properties[DEVICE_TIME_PROPERTY] = device_time
    console = VirtualConsole(args.console)
    try:
        board = VirtualBoard(
            device, args.port, args.reboot_seconds, Link(args.link), faults, console,
            fastboot_port=args.fastboot_port, device_time=device_time,
            shutdown_seconds=args.shutdown_seconds, authority=Authority(args.trusted_key),
        )
        asyncio.run(_serve(board, now))
    finally:
        console.close()
    return 0


def _read_images(specs: list[str]) -> dict[str, bytes]:
    """The `--image PARTITION=FILE` options' images by partition; UsageError naming the
    option at fault."""
    images: dict[str, bytes] = {}
    for spec in specs:
        partition, sep, file = spec.partition("=")
        if not sep or not file or partition not in PARTITIONS:
            raise UsageError(f"--image {spec}: expected PARTITION=FILE with PARTITION one of "
                             f"{', '.join(PARTITIONS)}")
        try:
            images[partition] = Path(file).read_bytes()
        except OSError as exc:
            raise UsageError(f"--image {spec}: {exc.strerror}") from None
    return images


async def _serve(board: VirtualBoard, faults_now: list[str]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await board.start()
    except OSError as exc:
        raise InfraError(f"virtual board could not start: {exc}") from exc
    for spec in faults_now:
        board.add_fault(spec)
    device = board.device
    console = f" console={board.console.path}" if board.console is not None else ""
    sys.stdout.write(
        f"{READY_PREFIX}{LISTEN_HOST}:{board.port} chipset={device.chipset} root={device.root}"
        f" fastboot={board.bootloader.endpoint}{console} runner_profile={device.runner_profile.name}"
        f"{' device_time=' + board.device_time if board.device_time else ''} "
        "(VIRTUAL board: ExecuTorch host runtime, no NPU)\n"
    )
    sys.stdout.flush()
    board.when_warm(_announce_warm)
    try:
        await stop.wait()
        log.info("stopping")
    finally:
        await board.stop()


def _announce_warm() -> None:
    try:
        sys.stdout.write(WARM_LINE + "\n")
        sys.stdout.flush()
    except OSError:
        pass  # nobody reads any more (the launcher stops after the ready line unless asked)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `hil virtual-board` (and `python -m hil.virtual.main`)."""
    parser = argparse.ArgumentParser(
        prog="hil virtual-board",
        description="A virtual Exynos board on 127.0.0.1 that the real adb server "
        "connects to (adb connect 127.0.0.1:PORT).",
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return run(args)
    except UsageError as exc:
        log.error("%s", exc)
        return 3
    except InfraError as exc:
        log.error("%s", exc)
        return 2


def _exit_now(code: int) -> None:
    """Exit without tearing the interpreter down: the board has stopped (transports dropped,
    executor closed), and freeing torch's heap object by object took 6-10 s under load,
    past the launcher's SIGTERM grace (`VirtualBoardProcess.stop`): a run on 16 boards spent
    minutes killing them one by one."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit_now(main())
