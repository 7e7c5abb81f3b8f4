"""The virtual board's bootloader speaks AOSP's fastboot protocol over TCP well enough for
Debian's real `fastboot` client, keeps what it flashes and boots the build it was given; its
faults behave as faults.py says. Real processes: the board, the adb server, the client."""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import adbutils
import pytest

from hil.adbserver import AdbServer
from hil.virtual.images import build_properties
from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board

# in CI (scripts/setup installs fastboot) a missing client fails the module instead
pytestmark = pytest.mark.skipif(shutil.which("fastboot") is None and not os.environ.get("CI"),
                                reason="Debian's fastboot is not installed (scripts/setup installs it)")

FINGERPRINT = "samsung/hil_virtual/hil_virtual:15/HIL.TEST1/42:user/release-keys"


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtualBoardProcess]:
    """One E9955 board with short reboots for the whole module."""
    root = tmp_path_factory.mktemp("board-fastboot")
    with start_virtual_board(root, "E9955", "hil-test-fastboot", ["--reboot-seconds", "0.2"]) as b:
        yield b


@pytest.fixture
def device(adb_server: AdbServer, board: VirtualBoardProcess) -> Iterator[adbutils.AdbDevice]:
    """The board on adb, booted; afterwards without faults and back on adb (a power cycle
    when a test left it elsewhere)."""
    yield _on_adb(adb_server, board)
    board.control("fault clear", applied_within=5.0)
    if _state(adb_server.client.device(board.address)) != "device":
        board.control("power cycle", applied_within=5.0)
        _on_adb(adb_server, board)


def _wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _state(device: adbutils.AdbDevice) -> str:
    try:
        return device.get_state()
    except adbutils.AdbError as exc:
        return str(exc)


def _on_adb(adb_server: AdbServer, board: VirtualBoardProcess) -> adbutils.AdbDevice:
    device = adb_server.connect(board.address, timeout=20.0)
    _wait_for(lambda: device.shell("getprop sys.boot_completed") == "1", 10.0, "boot completed")
    return device


def _endpoint(board: VirtualBoardProcess) -> tuple[str, int]:
    assert board.fastboot is not None and board.fastboot.startswith("tcp:127.0.0.1:")
    return "127.0.0.1", int(board.fastboot.rsplit(":", 1)[1])


def _listens(board: VirtualBoardProcess) -> bool:
    try:
        socket.create_connection(_endpoint(board), timeout=2.0).close()
    except ConnectionRefusedError:
        return False
    return True


def _to_bootloader(adb_server: AdbServer, board: VirtualBoardProcess,
                   device: adbutils.AdbDevice) -> None:
    """`adb reboot bootloader`, then wait until fastboot listens."""
    connection = device.open_transport()
    connection.send_command("reboot:bootloader")
    connection.check_okay()
    _wait_for(lambda: _state(device) != "device", 5.0, "the board to leave adb")
    adb_server.disconnect(board.address)
    _wait_for(lambda: _listens(board), 5.0, "fastboot to listen")


def _fastboot(board: VirtualBoardProcess, *args: str) -> subprocess.CompletedProcess[str]:
    assert board.fastboot is not None
    return subprocess.run(["fastboot", "-s", board.fastboot, *args], capture_output=True,
                          text=True, timeout=30)


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


def test_no_fastboot_while_on_adb(device: adbutils.AdbDevice, board: VirtualBoardProcess) -> None:
    assert not _listens(board)


def test_raw_handshake_framing_and_failures(
    adb_server: AdbServer, board: VirtualBoardProcess, device: adbutils.AdbDevice
) -> None:
    _to_bootloader(adb_server, board, device)
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


def test_real_client_flashes_two_images_and_the_board_boots_their_build(
    adb_server: AdbServer, board: VirtualBoardProcess, device: adbutils.AdbDevice, tmp_path: Path
) -> None:
    _to_bootloader(adb_server, board, device)
    assert _fastboot(board, "getvar", "product").stderr.startswith("product: s5e9955")
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
    incremental = build_properties(images, "hil_virtual", "hil_virtual")["ro.build.version.incremental"]
    assert device.shell("getprop ro.build.version.incremental") == incremental

    _to_bootloader(adb_server, board, device)  # an image set without a build.prop: derived
    system.write_bytes(b"another system\n")
    assert _fastboot(board, "flash", "system", str(system)).returncode == 0
    assert _fastboot(board, "reboot-bootloader").returncode == 0
    _wait_for(lambda: _listens(board), 5.0, "the bootloader again")
    assert _fastboot(board, "reboot").returncode == 0
    device = _on_adb(adb_server, board)
    images["system"] = system.read_bytes()
    expected = build_properties(images, "hil_virtual", "hil_virtual")["ro.build.fingerprint"]
    assert device.shell("getprop ro.build.fingerprint") == expected != FINGERPRINT


def test_flash_fail_fault_fails_only_its_partition(
    adb_server: AdbServer, board: VirtualBoardProcess, device: adbutils.AdbDevice, tmp_path: Path
) -> None:
    board.control("fault flash-fail,partition=vendor", applied_within=5.0)
    _to_bootloader(adb_server, board, device)
    image = tmp_path / "vendor.img"
    image.write_bytes(b"vendor v2\n")
    failed = _fastboot(board, "flash", "vendor", str(image))
    assert failed.returncode != 0 and "flash write failure" in failed.stderr
    assert not (board.root / "flash" / "vendor.img").exists()
    assert _fastboot(board, "flash", "dtbo", str(image)).returncode == 0


def test_wrong_product_fault(
    adb_server: AdbServer, board: VirtualBoardProcess, device: adbutils.AdbDevice
) -> None:
    _to_bootloader(adb_server, board, device)
    board.control("fault wrong-product", applied_within=5.0)
    assert _fastboot(board, "getvar", "product").stderr.startswith("product: s5e9965")
    board.control("fault clear wrong-product", applied_within=5.0)
    board.control("fault wrong-product,product=universal1234", applied_within=5.0)
    assert _fastboot(board, "getvar", "product").stderr.startswith("product: universal1234")


def test_no_bootloader_fault_leaves_the_board_nowhere_until_power_cycled(
    adb_server: AdbServer, board: VirtualBoardProcess, device: adbutils.AdbDevice
) -> None:
    board.control("fault no-bootloader", applied_within=5.0)
    connection = device.open_transport()
    connection.send_command("reboot:bootloader")
    connection.check_okay()
    _wait_for(lambda: "fault no-bootloader" in _board_log(board), 5.0, "the fault")
    assert not _listens(board)
    board.control("power cycle", applied_within=5.0)
    _on_adb(adb_server, board)


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
    _wait_for(lambda: "download-hang: stopped at 2048 of 4096" in _board_log(board), 5.0, "the hang")
    later = _Raw(board)
    later.sock.settimeout(0.5)
    with pytest.raises(TimeoutError):
        later.handshake()  # a hung bootloader answers no one
    host.sock.close()
    later.sock.close()
    board.control("power cycle", applied_within=5.0)
    _on_adb(adb_server, board)


def test_broken_vendor_fault_is_cured_by_flashing_vendor(
    adb_server: AdbServer, board: VirtualBoardProcess, device: adbutils.AdbDevice, tmp_path: Path
) -> None:
    lib = "/vendor/lib64/libenn_public_api_cpp.so"
    board.control("fault broken-vendor", applied_within=5.0)
    assert "No such file" in device.shell(f"ls {lib} 2>&1")
    device.shell("reboot", timeout=10)  # a reboot does not cure it
    _wait_for(lambda: _state(device) != "device", 5.0, "the board to reboot")
    adb_server.disconnect(board.address)
    device = _on_adb(adb_server, board)
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
