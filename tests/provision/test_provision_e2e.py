"""Provisioning end to end: Debian's real `fastboot` client flashes a virtual board over TCP
(its bootloader: hil/virtual/bootloader.py), the real adb server and adbutils take it through
`adb reboot bootloader` and back, whole runs (`--provision`) record what happened.

One board for the module (warm, `--reboot-seconds 0.3`); each test leaves it on adb with no
fault (`_restore`). Image set A's system image carries the fingerprint FP_A (the virtual board
reports the `ro.build.fingerprint=` line of its system image), set B's FP_B."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hil.adbserver import AdbServer
from hil.cli import main
from hil.errors import InfraError
from hil.report.summary import render_summary
from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board
from tests.faults import (
    board_entry,
    chain,
    lost_results,
    power_command,
    run_in_process,
    tiny_keys,
    wait_until_warm,
)
from tests.faults import write_inventory as write_entries

pytestmark = pytest.mark.slow

FP_A = "samsung/hil_test_a/e9955:15/HIL.A/1:user/release-keys"
FP_B = "samsung/hil_test_b/e9955:15/HIL.B/2:user/release-keys"
FAST = {"boot_timeout_s": 5.0, "flash_timeout_s": 3.0, "provision": True}
"""Run settings: a bootloader that is not there in 5 s, a download hung for 3 s, is a failure."""


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtualBoardProcess]:
    root = tmp_path_factory.mktemp("provision")
    with start_virtual_board(root / "board", "E9955", "provision-a", ["--reboot-seconds", "0.3"]) as a:
        assert a.fastboot and a.fastboot.startswith("tcp:127.0.0.1:")
        wait_until_warm(a)
        yield a


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with two image sets, each a system image (with its fingerprint line) and a
    vendor image."""
    folder = tmp_path_factory.mktemp("images")
    for name, fingerprint in (("a", FP_A), ("b", FP_B)):
        (folder / f"system_{name}.img").write_bytes(
            f"ro.build.fingerprint={fingerprint}\n".encode() + os.urandom(96 << 10))
        (folder / f"vendor_{name}.img").write_bytes(os.urandom(256 << 10))
    return folder


def _inventory(path: Path, board: VirtualBoardProcess, image_set: str, **extra: Any) -> Path:
    entry = {**board_entry("a", board), "fastboot": board.fastboot, "product": "s5e9955",
             "images": {"system": f"system_{image_set}.img", "vendor": f"vendor_{image_set}.img"},
             "flash_order": ["vendor", "system"],
             "expected_build": {"ro.build.fingerprint": FP_A if image_set == "a" else FP_B}, **extra}
    return write_entries(path, [entry])


def _stored(board: VirtualBoardProcess) -> dict[str, str]:
    """sha256 of every partition the board has stored (its flash storage)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((board.root / "flash").glob("*.img"))}


def _on_adb_now(board: VirtualBoardProcess) -> bool:
    """Its adb port listens (off adb, in its bootloader, hung or rebooting, it does not)."""
    host, port = board.address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=0.5).close()
    except OSError:
        return False
    return True


def _on_adb(server: AdbServer, board: VirtualBoardProcess) -> bool:
    if not _on_adb_now(board):  # in its bootloader, hung, rebooting: nothing listens
        return False
    try:
        server.disconnect(board.address)
        device = server.connect(board.address, timeout=3.0)
        return device.shell2("getprop sys.boot_completed", timeout=5, v2=True).stdout.strip() == "1"
    except (InfraError, OSError, EOFError):
        return False


@pytest.fixture
def restore(adb_server: AdbServer, board: VirtualBoardProcess) -> Iterator[None]:
    """After the test: no fault, and the board on adb (power-cycled out of a bootloader)."""
    yield
    board.control("fault clear", applied_within=30)
    if not _on_adb(adb_server, board):
        board.control("power cycle", applied_within=30)
        deadline = time.monotonic() + 60
        while not _on_adb(adb_server, board):
            assert time.monotonic() < deadline, "the board did not come back on adb"
            time.sleep(0.2)


def _record(doc: dict[str, Any]) -> dict[str, Any]:
    return next(b for b in doc["run"]["boards"] if b["name"] == "a")


def test_provision_flashes_two_images_with_fastboot_and_the_board_reports_the_build(
        board: VirtualBoardProcess, images: Path, tmp_path: Path, restore: None) -> None:
    inventory = _inventory(images / "inventory-a.yaml", board, "a")
    run, doc = run_in_process(inventory, tmp_path / "out", **FAST)
    entry = _record(doc)
    assert [c["verdict"] for c in doc["cases"]] == ["PASS"] * 3
    assert entry["properties"]["ro.build.fingerprint"] == FP_A  # what the board says after it
    assert entry["build"]["before"] != FP_A and entry["build"]["after"] == FP_A
    assert entry["build"]["differed"] is True
    (flash,) = entry["flashes"]
    assert (flash["why"], flash["method"], flash["endpoint"]) == ("provision", "fastboot", board.fastboot)
    assert flash["written"] == ["vendor", "system"] and flash["error"] is None
    assert [s["step"] for s in flash["steps"]] == [
        "check images", "reboot bootloader", "wait fastboot", "getvar product", "flash vendor",
        "flash system", "reboot", "wait adb", "check build"]
    stored = _stored(board)
    for partition in ("system", "vendor"):
        assert stored[f"{partition}.img"] == hashlib.sha256(
            (images / f"{partition}_a.img").read_bytes()).hexdigest()
    suite = ET.parse(tmp_path / "out" / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["board.build.after"] == FP_A and properties["board.build.differed"] == "true"
    assert properties["board.flash.0"].startswith("provision: check images ")
    assert "flash system " in properties["board.flash.0"]
    assert f"build differed on **a**: ro.build.fingerprint was `{entry['build']['before']}`" in (
        render_summary(doc))


def test_a_board_already_at_the_build_flashes_nothing(
        board: VirtualBoardProcess, images: Path, tmp_path: Path, restore: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    inventory = _inventory(images / "inventory-a.yaml", board, "a")
    if _stored(board).get("system.img") is None:  # run alone: put set A on first
        assert main(["flash", "--inventory", str(inventory)]) == 0
    before = {p.name: p.stat().st_mtime_ns for p in (board.root / "flash").glob("*.img")}
    _, doc = run_in_process(inventory, tmp_path / "out", **FAST)
    entry = _record(doc)
    assert [c["verdict"] for c in doc["cases"]] == ["PASS"] * 3
    assert entry["build"] == {"property": "ro.build.fingerprint", "expected": FP_A, "before": FP_A,
                              "after": FP_A, "differed": False}
    assert entry["flashes"] == []
    assert {p.name: p.stat().st_mtime_ns for p in (board.root / "flash").glob("*.img")} == before
    assert "build differed" not in render_summary(doc)
    capsys.readouterr()
    assert main(["flash", "--if-needed", "--inventory", str(inventory)]) == 0
    assert capsys.readouterr().out.strip().endswith(f"already at the expected build {FP_A!r}: nothing flashed")


FAULTS = [
    ("fault flash-fail,partition=vendor", "flash vendor", r"FAILED \(remote: .*\(attempt 3 of 3\)"),
    ("fault download-hang", "flash vendor", r"no answer within 3 s"),
    ("fault no-bootloader", "wait fastboot", r"not in fastboot within 5 s"),
    ("fault wrong-product,product=s5e9965", "getvar product",
     r"reports product 's5e9965', the inventory says 's5e9955': nothing written \(board rebooted\)"),
]


@pytest.mark.parametrize(("fault", "step", "message"), FAULTS, ids=[f[0].split()[1] for f in FAULTS])
def test_a_failed_flash_is_an_infrastructure_error_naming_the_step(
        board: VirtualBoardProcess, images: Path, tmp_path: Path, restore: None,
        fault: str, step: str, message: str) -> None:
    inventory = _inventory(images / "inventory-b.yaml", board, "b")  # set B: a flash is due
    stored = _stored(board)
    board.control(fault, applied_within=30)
    run, doc = run_in_process(inventory, tmp_path / "out", **FAST)
    entry = _record(doc)
    assert entry["quarantined"].startswith(f"provisioning failed: a: flash failed at step '{step}'")
    (flash,) = entry["flashes"]
    assert flash["steps"][-1]["step"] == step and not flash["steps"][-1]["ok"]
    assert flash["error"].startswith(f"step '{step}'")
    assert re.search(message, flash["error"]), flash["error"]
    assert entry["build"]["after"] is None
    verdicts = {chain(c) for c in doc["cases"]}
    assert verdicts == {"ERROR_INFRA"}  # never a case failure
    assert all(f"flash failed at step '{step}'" in c["message"] for c in doc["cases"])
    assert lost_results(tiny_keys(), doc, tmp_path / "out" / "junit.xml") == 0
    if step == "getvar product":  # refused before writing anything
        assert flash["written"] == [] and _stored(board) == stored
    assert "quarantined (flash failed)" in render_summary(doc)


def test_an_image_that_is_not_the_one_named_is_refused_before_the_board_leaves_adb(
        board: VirtualBoardProcess, images: Path, tmp_path: Path, restore: None) -> None:
    inventory = _inventory(images / "inventory-b.yaml", board, "b", images={
        "system": {"file": "system_b.img", "sha256": "0" * 64}, "vendor": "vendor_b.img"})
    stored = _stored(board)
    _, doc = run_in_process(inventory, tmp_path / "out", **FAST)
    (flash,) = _record(doc)["flashes"]
    assert [(s["step"], s["ok"]) for s in flash["steps"]] == [("check images", False)]
    assert re.search(r"system_b.img: sha256 [0-9a-f]{16}\.\.\., the inventory says 0{16}", flash["error"])
    assert _stored(board) == stored and _on_adb_now(board)  # never left adb, nothing written
    assert {chain(c) for c in doc["cases"]} == {"ERROR_INFRA"}


def test_hil_flash_takes_a_board_left_in_its_bootloader(
        board: VirtualBoardProcess, images: Path, adb_server: AdbServer, restore: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A board adb cannot reach but that answers on fastboot (a failed flash left it there) is
    flashed all the same; the first step says how it got in."""
    inventory = _inventory(images / "inventory-b.yaml", board, "b")
    device = adb_server.connect(board.address, timeout=10.0)
    connection = device.open_transport(timeout=10.0)
    connection.send_command("reboot:bootloader")
    connection.check_okay()
    connection.close()
    deadline = time.monotonic() + 10
    while _on_adb_now(board):
        assert time.monotonic() < deadline, "the board did not leave adb"
        time.sleep(0.1)
    assert main(["flash", "--inventory", str(inventory), "--idle-timeout", "2", "--boot-timeout", "10"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("a: reboot bootloader: ok")
    assert lines[-1] == f"a: flashed vendor, system; build None -> {FP_B!r}"
    assert _stored(board)["system.img"] == hashlib.sha256((images / "system_b.img").read_bytes()).hexdigest()


def test_a_board_slow_to_shut_down_is_waited_for_not_taken_as_failed(
        tmp_path: Path, images: Path, adb_server: AdbServer, capsys: pytest.CaptureFixture[str]) -> None:
    """Android's shutdown after `adb reboot bootloader` can outlast the idle timeout: the board
    is still `device` 3 s later. hil waits for it up to the boot limit instead of calling the
    reboot failed (and, with no power control, the flash failed)."""
    with start_virtual_board(tmp_path / "board", "E9955", "provision-slow",
                             ["--reboot-seconds", "0.3", "--shutdown-seconds", "3"]) as slow:
        inventory = _inventory(tmp_path / "inventory.yaml", slow, "b")
        (tmp_path / "system_b.img").symlink_to(images / "system_b.img")
        (tmp_path / "vendor_b.img").symlink_to(images / "vendor_b.img")
        code = main(["flash", "--inventory", str(inventory), "--idle-timeout", "1", "--boot-timeout", "20"])
        lines = capsys.readouterr().out.splitlines()
        assert code == 0, lines
        assert re.fullmatch(r"a: reboot bootloader: ok \([\d.]+ s\) adb reboot bootloader", lines[1]), lines
        assert lines[-1].startswith("a: flashed vendor, system; build 'samsung/hil_virtual/")
        assert lines[-1].endswith(f" -> {FP_B!r}")
        assert _stored(slow)["system.img"] == hashlib.sha256((images / "system_b.img").read_bytes()).hexdigest()


@pytest.mark.parametrize("bootloader_command", [True, False], ids=["bootloader-command", "plain-cycle"])
def test_a_board_adb_cannot_reach_is_flashed_through_its_power_control(
        board: VirtualBoardProcess, images: Path, restore: None,
        capsys: pytest.CaptureFixture[str], bootloader_command: bool) -> None:
    """A frozen board (adb's reboot gets no answer, fastboot is not up): the power control's
    `bootloader` command brings it up in fastboot; without one, a plain cycle boots its OS and
    adb's reboot takes it in (a plain cycle alone left the board in Android, and the flash
    failed at `wait fastboot`)."""
    power = {"cycle": power_command(board)}
    if bootloader_command:
        power["bootloader"] = power_command(board, "bootloader")
    inventory = _inventory(images / "inventory-b.yaml", board, "b", power=power)
    board.control("fault freeze,on=now", applied_within=30)
    code = main(["flash", "--inventory", str(inventory), "--idle-timeout", "2", "--boot-timeout", "20"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0, lines
    entered = next(line for line in lines if line.startswith("a: reboot bootloader: "))
    assert entered.startswith("a: reboot bootloader: ok"), entered
    if bootloader_command:
        assert "power-cycled into the bootloader" in entered, entered
    else:
        assert "power-cycled, then adb reboot bootloader" in entered, entered
    assert lines[-1].startswith("a: flashed vendor, system; build ") and lines[-1].endswith(f"-> {FP_B!r}")
    assert _stored(board)["system.img"] == hashlib.sha256((images / "system_b.img").read_bytes()).hexdigest()


def test_a_board_that_lost_its_runner_comes_back_through_the_reflash_rung(
        board: VirtualBoardProcess, images: Path, tmp_path: Path, restore: None) -> None:
    inventory = _inventory(images / "inventory-a.yaml", board, "a")
    armed: list[str] = []

    def after_first(run: Any, record: dict[str, Any]) -> None:
        if not armed:
            armed.append(record["id"])
            board.control("fault broken-vendor", applied_within=30)

    run, doc = run_in_process(inventory, tmp_path / "out", on_record=after_first, **FAST)
    entry = _record(doc)
    chains = sorted(chain(c) for c in doc["cases"])
    assert chains == ["ERROR_INFRA→PASS", "PASS", "PASS"], chains
    assert [(s["step"], s["recovered"]) for s in entry["recovery"]][-1] == ("reflash", True)
    assert entry["flashes"][-1]["why"] == "recovery" and entry["flashes"][-1]["error"] is None
    assert entry["flashes"][-1]["steps"][-1]["step"] == "prepare"
    assert entry["build"]["after"] == FP_A and not entry.get("quarantined")
    assert lost_results(tiny_keys(), doc, tmp_path / "out" / "junit.xml") == 0
