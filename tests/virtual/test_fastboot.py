"""The virtual board's bootloader speaks AOSP's fastboot protocol over TCP well enough for
Debian's real `fastboot` client, keeps what it flashes and boots the build it was given; its
faults behave as faults.py says. Real processes: the board, the adb server, the client."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import adbutils
import pytest

from hil.adbserver import AdbServer
from hil.errors import UsageError
from hil.virtual.faults import Fault, parse_fault
from hil.virtual.images import WRITE_BLOCK, FlashStore, ImageError, build_properties, unsparse
from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board
from tests.adb_lab import device_state, wait_for

# in CI (scripts/setup installs fastboot) a missing client fails the module instead
pytestmark = pytest.mark.skipif(shutil.which("fastboot") is None and not os.environ.get("CI"),
                                reason="Debian's fastboot is not installed (scripts/setup installs it)")

FINGERPRINT = "samsung/hil_virtual/hil_virtual:15/HIL.TEST1/42:user/release-keys"
FACTORY = "acme/factory/factory:15/F1/1:user/release-keys"
"""The build of the system image the module's board starts with (`--image`)."""


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtualBoardProcess]:
    """One E9955 board with short reboots for the whole module, started with a system image."""
    root = tmp_path_factory.mktemp("board-fastboot")
    system = root / "factory-system.img"
    system.write_text(f"ro.build.fingerprint={FACTORY}\n")
    args = ["--reboot-seconds", "0.2", "--image", f"system={system}"]
    with start_virtual_board(root / "board", "E9955", "hil-test-fastboot", args) as b:
        yield b


@pytest.fixture
def device(adb_server: AdbServer, board: VirtualBoardProcess) -> adbutils.AdbDevice:
    """The board without faults, on adb and booted (a power cycle when a test left it
    elsewhere)."""
    board.control("fault clear", applied_within=5.0)
    if device_state(adb_server.client.device(board.address)) == "device":
        return _on_adb(adb_server, board)
    board.control("power cycle", applied_within=5.0)
    return _on_adb(adb_server, board, fresh=True)


@pytest.fixture
def bootloader(adb_server: AdbServer, board: VirtualBoardProcess) -> None:
    """The board without faults, in its bootloader (where the test before may have left it:
    the tests that only need the bootloader share one visit)."""
    board.control("fault clear", applied_within=5.0)
    if _answers(board):
        return
    if device_state(adb_server.client.device(board.address)) == "device":
        device = _on_adb(adb_server, board)
    else:
        board.control("power cycle", applied_within=5.0)
        device = _on_adb(adb_server, board, fresh=True)
    _to_bootloader(adb_server, board, device)


def _on_adb(adb_server: AdbServer, board: VirtualBoardProcess, fresh: bool = False
            ) -> adbutils.AdbDevice:
    """The board, booted, on adb; `fresh`: forget its old connection first (the adb server
    retries a lost one only after a back-off of seconds)."""
    if fresh:
        adb_server.disconnect(board.address)
    # hang guards, not measures (a loaded CI machine took over 20 s to boot the board again);
    # the per-test limit (pyproject.toml) bounds the test as a whole
    device = adb_server.connect(board.address, timeout=120.0)
    wait_for(lambda: device.shell("getprop sys.boot_completed") == "1", 60.0, "boot completed")
    return device


def _endpoint(board: VirtualBoardProcess) -> tuple[str, int]:
    assert board.fastboot is not None and board.fastboot.startswith("tcp:127.0.0.1:")
    return "127.0.0.1", int(board.fastboot.rsplit(":", 1)[1])


def _answers(board: VirtualBoardProcess) -> bool:
    """Whether fastboot listens and answers the handshake (a hung bootloader does not)."""
    try:
        with socket.create_connection(_endpoint(board), timeout=1.0) as sock:
            sock.sendall(b"FB01")
            return sock.recv(4) == b"FB01"
    except OSError:
        return False


def _listens(board: VirtualBoardProcess) -> bool:
    try:
        socket.create_connection(_endpoint(board), timeout=2.0).close()
    except (ConnectionRefusedError, ConnectionResetError):  # reset: the last listener closing
        return False
    return True


def _to_bootloader(adb_server: AdbServer, board: VirtualBoardProcess,
                   device: adbutils.AdbDevice, via_shell: bool = False) -> None:
    """`adb reboot bootloader` (`via_shell`: `adb shell reboot bootloader`), then wait until
    fastboot listens."""
    if via_shell:
        device.shell("reboot bootloader", timeout=10)
    else:
        connection = device.open_transport()
        connection.send_command("reboot:bootloader")
        connection.check_okay()
    wait_for(lambda: device_state(device) != "device", 5.0, "the board to leave adb")
    adb_server.disconnect(board.address)
    wait_for(lambda: _listens(board), 5.0, "fastboot to listen")


def _fastboot(board: VirtualBoardProcess, *args: str) -> subprocess.CompletedProcess[str]:
    assert board.fastboot is not None
    return subprocess.run(["fastboot", "-s", board.fastboot, *args], capture_output=True,
                          text=True, timeout=30)


def _digest(images: dict[str, bytes]) -> str:
    """The sha256 of `PARTITION SHA256\\n` lines, partitions sorted (the rule
    docs/explanation/virtual-board.md states)."""
    lines = "".join(f"{name} {hashlib.sha256(images[name]).hexdigest()}\n" for name in sorted(images))
    return hashlib.sha256(lines.encode()).hexdigest()


def _sparse(raw_block: bytes, fill: bytes, fill_blocks: int, skip_blocks: int) -> bytes:
    """An Android sparse image (AOSP system/core/libsparse/sparse_format.h) of 4 KiB blocks:
    one raw block, `fill_blocks` filled with `fill`, `skip_blocks` don't-care."""
    blocks = 1 + fill_blocks + skip_blocks
    header = struct.pack("<IHHHHIIII", 0xED26FF3A, 1, 0, 28, 12, 4096, blocks, 3, 0)
    return (header + struct.pack("<HHII", 0xCAC1, 0, 1, 12 + 4096) + raw_block
            + struct.pack("<HHII", 0xCAC2, 0, fill_blocks, 16) + fill
            + struct.pack("<HHII", 0xCAC3, 0, skip_blocks, 12))


class _Raw:
    """A raw TCP fastboot host: handshake, framed packets."""

    def __init__(self, board: VirtualBoardProcess, handshake: bytes = b"FB01") -> None:
        self.sock = socket.create_connection(_endpoint(board), timeout=5.0)
        self.sock.sendall(handshake)

    def handshake(self) -> bytes:
        return self._exactly(4)

    def send(self, packet: bytes) -> None:
        self.sock.sendall(struct.pack(">Q", len(packet)) + packet)

    def reply(self) -> bytes:
        (size,) = struct.unpack(">Q", self._exactly(8))
        return self._exactly(size)

    def _exactly(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionResetError("closed")
            data += chunk
        return data


def test_on_adb_no_fastboot_and_the_build_of_the_images_it_started_with(
    device: adbutils.AdbDevice, board: VirtualBoardProcess
) -> None:
    assert not _listens(board)
    assert device.shell("getprop ro.build.fingerprint") == FACTORY


def test_raw_handshake_framing_and_failures(board: VirtualBoardProcess, bootloader: None) -> None:
    host = _Raw(board)
    assert host.handshake() == b"FB01"
    host.send(b"getvar:version")
    assert host.reply() == b"OKAY0.4"
    host.send(b"getvar:none")
    assert host.reply().startswith(b"FAIL")
    host.send(b"powerdown")
    assert host.reply() == b"FAILunknown command"
    host.send(b"flash:nonexistent")
    assert host.reply() == b"FAILpartition 'nonexistent' does not exist"
    host.send(b"download:00000000")  # U-Boot: "Expected nonzero image size"
    assert host.reply() == b"FAILexpected nonzero image size"
    host.send(b"getvar:all")
    infos = []
    while (answer := host.reply()).startswith(b"INFO"):
        infos.append(answer)
    assert answer == b"OKAY"
    assert b"INFOproduct:s5e9955" in infos and b"INFOserialno:hil-test-fastboot" in infos
    host.sock.close()
    bad = _Raw(board, b"XY01")
    with pytest.raises(ConnectionResetError):
        bad.handshake()  # a malformed handshake: the board disconnects
    bad.sock.close()


def test_flash_fail_fault_fails_only_its_partition(
    board: VirtualBoardProcess, bootloader: None, tmp_path: Path
) -> None:
    board.control("fault flash-fail,partition=vendor", applied_within=5.0)
    image = tmp_path / "vendor.img"
    image.write_bytes(b"vendor v2\n")
    failed = _fastboot(board, "flash", "vendor", str(image))
    assert failed.returncode != 0 and "flash write failure" in failed.stderr
    assert not (board.root / "flash" / "vendor.img").exists()
    assert _fastboot(board, "flash", "dtbo", str(image)).returncode == 0


def test_wrong_product_fault(board: VirtualBoardProcess, bootloader: None) -> None:
    board.control("fault wrong-product", applied_within=5.0)
    assert _fastboot(board, "getvar", "product").stderr.startswith("product: s5e9965")
    board.control("fault clear wrong-product", applied_within=5.0)
    board.control("fault wrong-product,product=universal1234", applied_within=5.0)
    assert _fastboot(board, "getvar", "product").stderr.startswith("product: universal1234")


def test_real_client_flashes_two_images_and_the_board_boots_their_build(
    adb_server: AdbServer, board: VirtualBoardProcess, bootloader: None, tmp_path: Path
) -> None:
    assert _fastboot(board, "getvar", "product").stderr.startswith("product: s5e9955")
    for stale in (board.root / "flash").glob("*.img"):  # what earlier tests flashed
        assert _fastboot(board, "erase", stale.stem).returncode == 0
    assert not list((board.root / "flash").glob("*.img"))
    boot = tmp_path / "boot.img"
    boot.write_bytes(bytes(range(256)) * 1000)
    system = tmp_path / "system.img"
    system.write_bytes(f"ro.build.fingerprint={FINGERPRINT}\nro.build.id=HIL.TEST1\n".encode())
    for partition, image in (("boot", boot), ("system", system)):
        flashed = _fastboot(board, "flash", partition, str(image))
        assert flashed.returncode == 0, flashed.stderr
    assert (board.root / "flash" / "boot.img").read_bytes() == boot.read_bytes()
    assert _fastboot(board, "reboot").returncode == 0
    device = _on_adb(adb_server, board)
    assert device.shell("getprop ro.build.fingerprint") == FINGERPRINT
    assert device.shell("getprop ro.build.id") == "HIL.TEST1"
    images = {"boot": boot.read_bytes(), "system": system.read_bytes()}
    assert device.shell("getprop ro.build.version.incremental") == _digest(images)[:12]

    # an image set without a build.prop: its build is derived; the system image goes sparse
    _to_bootloader(adb_server, board, device, via_shell=True)
    raw = b"another system\n".ljust(4096, b"\0") + b"\xa5" * 8192 + bytes(4096)
    system.write_bytes(_sparse(raw[:4096], b"\xa5" * 4, 2, 1))
    assert _fastboot(board, "flash", "system", str(system)).returncode == 0
    assert (board.root / "flash" / "system.img").read_bytes() == raw
    assert _fastboot(board, "reboot-bootloader").returncode == 0
    # its 0.2 s down first: the bootloader going down still listens for a few ms, and a
    # `reboot` it takes then is lost
    wait_for(lambda: not _listens(board), 5.0, "the bootloader to go down")
    wait_for(lambda: _listens(board), 5.0, "the bootloader again")
    assert _fastboot(board, "reboot").returncode == 0
    device = _on_adb(adb_server, board)
    images["system"] = raw
    digest = _digest(images)  # the rule the virtual board's page states, computed here on its own
    expected = f"samsung/hil_virtual/hil_virtual:15/HIL.{digest[:8]}/{digest[:12]}:user/release-keys"
    assert device.shell("getprop ro.build.fingerprint") == expected
    assert build_properties(images, "hil_virtual", "hil_virtual")["ro.build.fingerprint"] == expected


def test_no_bootloader_fault_leaves_the_board_nowhere_until_power_cycled(
    adb_server: AdbServer, board: VirtualBoardProcess, device: adbutils.AdbDevice
) -> None:
    board.control("fault no-bootloader", applied_within=5.0)
    connection = device.open_transport()
    connection.send_command("reboot:bootloader")
    connection.check_okay()
    wait_for(lambda: "fault no-bootloader" in _board_log(board), 5.0, "the fault")
    assert not _listens(board)
    board.control("power cycle", applied_within=5.0)
    _on_adb(adb_server, board, fresh=True)


def test_download_hang_fault_hangs_the_bootloader_until_power_cycled(
    adb_server: AdbServer, board: VirtualBoardProcess, device: adbutils.AdbDevice
) -> None:
    board.control("fault download-hang", applied_within=5.0)
    _to_bootloader(adb_server, board, device)
    host = _Raw(board)
    assert host.handshake() == b"FB01"
    host.send(b"download:00001000")
    assert host.reply() == b"DATA00001000"
    host.send(bytes(0x800))
    host.send(bytes(0x800))
    wait_for(lambda: "download-hang: stopped at 2048 of 4096" in _board_log(board), 5.0, "the hang")
    later = _Raw(board)
    later.sock.settimeout(0.5)
    with pytest.raises(TimeoutError):
        later.handshake()  # a hung bootloader answers no one
    host.sock.close()
    later.sock.close()
    board.control("power bootloader", applied_within=5.0)  # the key held: a bootloader again
    wait_for(lambda: _answers(board), 5.0, "a bootloader that answers")


def test_broken_vendor_fault_is_cured_by_flashing_vendor(
    adb_server: AdbServer, board: VirtualBoardProcess, device: adbutils.AdbDevice, tmp_path: Path
) -> None:
    lib = "/vendor/lib64/libenn_public_api_cpp.so"
    board.control("fault broken-vendor", applied_within=5.0)
    assert "No such file" in device.shell(f"ls {lib} 2>&1")
    device.shell("reboot", timeout=10)  # a reboot does not cure it
    wait_for(lambda: device_state(device) != "device", 5.0, "the board to reboot")
    device = _on_adb(adb_server, board, fresh=True)
    assert "No such file" in device.shell(f"ls {lib} 2>&1")
    _to_bootloader(adb_server, board, device)
    image = tmp_path / "vendor.img"
    image.write_bytes(b"known-good vendor\n")
    assert _fastboot(board, "flash", "vendor", str(image)).returncode == 0
    assert _fastboot(board, "reboot").returncode == 0
    device = _on_adb(adb_server, board)
    assert device.shell(f"ls {lib}") == lib


def _board_log(board: VirtualBoardProcess) -> str:
    return board.log_path.read_text(errors="replace")


def test_bootloader_fault_specs_parse_and_refuse_bad_fields() -> None:
    assert parse_fault("flash-fail,partition=vendor") == Fault("flash-fail", on="flash", path="vendor", times=0)
    assert parse_fault("flash-fail,times=1").times == 1
    assert parse_fault("broken-vendor").path == "vendor"
    assert parse_fault("wrong-product,product=erd9955").product == "erd9955"
    assert parse_fault("download-hang") == Fault("download-hang", on="download")
    for spec, field in (("flash-fail,partition=a/b", "partition="), ("no-bootloader,x=1", "'x=1'"),
                        ("wrong-product,product=", "product=")):
        with pytest.raises(UsageError, match=field):
            parse_fault(spec)


@pytest.mark.parametrize("option", [["--fastboot-port", "5560"], ["--image", "nope=/etc/hostname"]])
def test_bad_bootloader_options_are_usage_errors(tmp_path: Path, option: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hil.virtual.main", "--root", str(tmp_path / "b"), *option],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 3
    assert f"{option[0]} {option[1]}:" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "b").exists()


def test_a_sparse_image_keeps_what_its_dont_care_blocks_cover() -> None:
    previous = bytes(range(256)) * 80  # 20 KiB: the partition's old contents
    sparse = _sparse(b"\x01" * 4096, b"\xa5\xa5\xa5\xa5", 2, 2)
    written = unsparse(sparse, previous)
    assert written == b"\x01" * 4096 + b"\xa5" * 8192 + previous[12288:16384] + previous[16384:].ljust(4096, b"\0")
    with pytest.raises(ImageError, match="truncated"):
        unsparse(sparse[:40])
    # sizes checked before anything is expanded: a 4 TiB FILL is refused, not built
    huge = _sparse(b"\x01" * 4096, b"\xa5\xa5\xa5\xa5", 1 << 30, 0)
    with pytest.raises(ImageError, match="too large for the partition"):
        unsparse(huge, limit=1 << 20)
    lying = bytearray(huge)
    struct.pack_into("<I", lying, 16, 3)  # the header says 3 blocks; a chunk says 2**30
    with pytest.raises(ImageError, match="chunks exceed its blocks"):
        unsparse(bytes(lying))


def test_a_power_cut_mid_write_leaves_the_new_head_over_the_old_tail(tmp_path: Path) -> None:
    store = FlashStore(tmp_path)
    old = b"\x11" * (3 * WRITE_BLOCK)
    new = b"\x22" * (3 * WRITE_BLOCK + 10)
    store.flash("vendor", old)
    before = store.build("n", "d", "b")["ro.build.fingerprint"]
    looks = iter([False, False, True])  # the power goes during the third block
    with pytest.raises(ImageError, match=rf"power cut while writing 'vendor' \({2 * WRITE_BLOCK} of"):
        store.flash("vendor", new, cut=lambda: next(looks))
    assert store.path("vendor").read_bytes() == new[: 2 * WRITE_BLOCK] + old[2 * WRITE_BLOCK :]
    torn = store.build("n", "d", "b")["ro.build.fingerprint"]
    assert store.flash("vendor", new) == len(new)  # a whole flash mends it
    assert store.path("vendor").read_bytes() == new
    assert len({before, torn, store.build("n", "d", "b")["ro.build.fingerprint"]}) == 3
    with pytest.raises(ImageError, match=r"\(0 of 1 bytes"):  # cut before anything: nothing written
        store.flash("boot", b"\x33", cut=lambda: True)
    assert not store.path("boot").exists()
