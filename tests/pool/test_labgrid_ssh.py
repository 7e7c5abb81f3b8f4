"""labgrid's ssh paths, against a real sshd: a place's network fastboot runs on its exporter's
host, as labgrid's AndroidFastbootDriver runs it (`ssh HOST -- fastboot ...`), and an isolated
exporter's place (`labgrid-exporter --isolated`) is reached through its proxy, as labgrid's
client reaches it (port forwards over ssh).

The exporter's host is a network namespace of its own (tests/pool/exporter_host.py) holding a
real sshd (tests/sshd_lab.py: a key made here, reached through an `ssh` wrapper on PATH) and two
real exporters of a real coordinator on the test's host:

```
lab-fb   (plain)       place fb:  NetworkADBDevice {127.0.0.1, the board's adb port}   reachable here
                                  AndroidNetFastboot {127.0.0.1, F}                     only there
lab-iso  (--isolated)  place iso: NetworkADBDevice {127.0.0.1, A}                       only there
                                  RawSerialPort (the board's UART: ser2net, started there)
                                  NetworkPowerPort simplerest http://127.0.0.1:P/...     only there
                                  AndroidNetFastboot {127.0.0.1, F}                     only there
```

A, F and P answer only inside the namespace (relays to the one virtual board's adb, fastboot
and power switch): from the test's host nothing answers there, so only hil's ssh paths reach
them. What is not tested here: a lab across real hosts.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from hil.board import labgrid_ssh
from hil.board.console import SerialConsole
from hil.board.images import Image
from hil.board.inventory import load_lab_inventory
from hil.interrupts import Stop
from hil.lower.cache import default_cache_dir
from hil.pool.labgrid import LabgridSource
from hil.provision.fastboot import FastbootFlasher, NoAnswer
from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board
from tests.faults import wait_until_warm
from tests.pool.exporter_host import ExporterHost
from tests.pool.labgrid_lab import (
    Processes,
    power_endpoint,
    ser2net_available,
    start_coordinator,
    start_exporter,
)
from tests.sshd_lab import LoopbackSshd, free_port, sshd_available

pytestmark = [
    pytest.mark.slow,
    # scripts/setup installs both; in CI (CI set) a missing one fails the module instead
    pytest.mark.skipif(not (sshd_available() and ser2net_available()) and not os.environ.get("CI"),
                       reason="sshd or ser2net not installed (scripts/setup installs them)"),
]

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "fixtures" / "tiny.yaml"
SERIAL = "lab-ssh"
FP_A = "samsung/hil_ssh_a/e9955:15/HIL.A/1:user/release-keys"
FP_B = "samsung/hil_ssh_b/e9955:15/HIL.B/2:user/release-keys"


class SshLab:
    """The coordinator here; the exporter's host (namespace, sshd, two exporters) there."""

    def __init__(self, root: Path) -> None:
        assert sshd_available(), "no /usr/sbin/sshd (scripts/setup installs openssh-server)"
        assert ser2net_available(), "no ser2net (scripts/setup installs it)"
        self.root = root
        self.processes = Processes()
        self.host: ExporterHost | None = None
        self.sshd: LoopbackSshd | None = None
        self.board: VirtualBoardProcess = start_virtual_board(
            root / "board", "E9955", SERIAL, ["--console", str(root / "uart"), "--reboot-seconds", "0.3"])
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        board = self.board
        assert board.console and board.fastboot and board.fastboot.startswith("tcp:127.0.0.1:")
        board_port = int(board.address.rsplit(":", 1)[1])
        fastboot_port = int(board.fastboot.rsplit(":", 1)[1])
        power = urlsplit(power_endpoint(self.processes, board))
        assert power.port is not None
        self.address = start_coordinator(self.processes, self.root, {
            "fb": ("lab-fb", "fb", {"soc": "e9955", "access": "ssh"}),
            "iso": ("lab-iso", "iso", {"soc": "e9955", "access": "isolated"})})
        coordinator_port = int(self.address.rsplit(":", 1)[1])
        self.adb_port, self.fastboot_port, self.power_port, ssh_port = (free_port() for _ in range(4))
        self.host = ExporterHost([ssh_port], {coordinator_port: coordinator_port, self.adb_port: board_port,
                                              self.fastboot_port: fastboot_port, self.power_port: power.port})
        self.sshd = LoopbackSshd(self.root / "sshd", port=ssh_port, netns_pid=self.host.pid)
        fastboot = {"address": "127.0.0.1", "port": self.fastboot_port, "protocol": "tcp"}
        prefix = self.host.nsenter_argv([])
        start_exporter(self.processes, self.root, self.address, "lab-fb", {"fb": {
            "NetworkADBDevice": {"host": "127.0.0.1", "port": board_port},  # #1564's TCP shape
            "AndroidNetFastboot": dict(fastboot)}}, prefix=prefix)
        start_exporter(self.processes, self.root, self.address, "lab-iso", {"iso": {
            "NetworkADBDevice": {"host": "127.0.0.1", "port": self.adb_port},
            "RawSerialPort": {"port": board.console, "speed": 115200},
            "NetworkPowerPort": {"model": "simplerest", "index": 0,
                                 "host": f"http://127.0.0.1:{self.power_port}{power.path}"},
            "AndroidNetFastboot": dict(fastboot)}}, isolated=True, prefix=prefix)
        wait_until_warm(board)

    def env(self, lease_dir: Path) -> dict[str, str]:
        """A hil run's environment: the ssh wrapper first on PATH, no LG_* of the caller."""
        assert self.sshd is not None
        base = {k: v for k, v in os.environ.items() if not k.startswith(("LG_", "ANDROID_ADB_SERVER"))}
        return self.sshd.env({**base, "HIL_LEASE_DIR": str(lease_dir), "HIL_CACHE_DIR": str(default_cache_dir())})

    def stop(self) -> None:
        if self.board.process.poll() is None:
            self.board.process.send_signal(signal.SIGTERM)
        self.processes.stop()
        if self.sshd is not None:
            self.sshd.stop()
        if self.host is not None:
            self.host.stop()
        self.board.stop()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshLab]:
    the_lab = SshLab(tmp_path_factory.mktemp("labgrid-ssh"))
    try:
        yield the_lab
    finally:
        the_lab.stop()


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("images")
    for name, fingerprint in (("a", FP_A), ("b", FP_B)):
        (folder / f"system_{name}.img").write_bytes(
            f"ro.build.fingerprint={fingerprint}\n".encode() + os.urandom(64 << 10))
        (folder / f"vendor_{name}.img").write_bytes(os.urandom(128 << 10))
    return folder


def _answers_here(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return False
    return True


def _inventory(folder: Path, place: str, image_set: str) -> Path:
    path = folder / f"inventory-{place}-{image_set}.yaml"
    path.write_text(yaml.safe_dump({"boards": [{
        "name": place, "labgrid": {"place": place}, "chipset": "E9955", "product": "s5e9955",
        "images": {"system": f"system_{image_set}.img", "vendor": f"vendor_{image_set}.img"},
        "flash_order": ["vendor", "system"],
        "expected_build": {"ro.build.fingerprint": FP_A if image_set == "a" else FP_B}}]}))
    return path


def _provision_run(lab: SshLab, images: Path, place: str, image_set: str, out: Path) -> dict[str, Any]:
    """`hil run --labgrid --inventory --provision` of the tiny suite on `place`; its board."""
    done = subprocess.run(
        [sys.executable, "-m", "hil", "run", "--labgrid", lab.address, "--inventory",
         str(_inventory(images, place, image_set)), "--provision", "--suite", str(TINY), "--flow", "portable",
         "--out", str(out)],
        cwd=REPO, env=lab.env(out / "leases"), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (out / "stderr").write_text(done.stderr)
    doc = json.loads((out / "results.json").read_text())
    assert [c["verdict"] for c in doc["cases"]] == ["PASS"] * 3
    (record,) = doc["run"]["boards"]
    (flash,) = record["flashes"]
    assert (flash["method"], flash["endpoint"], flash["error"]) == (
        "fastboot", f"tcp:127.0.0.1:{lab.fastboot_port}", None)
    assert flash["written"] == ["vendor", "system"]
    assert record["build"]["after"] == (FP_A if image_set == "a" else FP_B)
    stored = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (lab.board.root / "flash").glob("*.img")}
    for partition in ("system", "vendor"):
        wanted = hashlib.sha256((images / f"{partition}_{image_set}.img").read_bytes()).hexdigest()
        assert stored[f"{partition}.img"] == wanted, partition
    return record


def test_fastboot_runs_on_the_exporters_host_over_ssh(lab: SshLab, images: Path, tmp_path: Path) -> None:
    """Place fb's fastboot address answers only on its exporter's host: the flash runs there,
    through labgrid's ssh prefix, and the board gets the images."""
    assert not _answers_here(lab.fastboot_port)
    record = _provision_run(lab, images, "fb", "a", tmp_path / "out")
    assert record["labgrid"]["place"] == "fb"
    assert "Starting session: command" in (lab.root / "sshd" / "sshd.log").read_text()


def test_an_isolated_exporters_place_runs_through_its_proxy(lab: SshLab, images: Path, tmp_path: Path) -> None:
    """Place iso's adb, console and fastboot answer only on its exporter's host: hil reaches
    adb and the console through forwards of the proxy (the runner's lines are in the console
    log), and flashes on the proxy host."""
    assert not any(_answers_here(port) for port in (lab.adb_port, lab.fastboot_port, lab.power_port))
    out = tmp_path / "out"
    record = _provision_run(lab, images, "iso", "b", out)
    assert record["labgrid"]["place"] == "iso"
    assert "runner pid" in (out / "console" / "iso.log").read_text(errors="replace"), (out / "stderr").read_text()[-3000:]


def test_an_isolated_exporters_power_and_console_go_through_its_proxy(
        lab: SshLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """labgrid's power driver forwards the simplerest URL through the proxy; the console that
    hil opens (a forward to the exporter's ser2net) shows the board going down."""
    assert lab.sshd is not None
    monkeypatch.setenv("PATH", f"{lab.sshd.bin}:{os.environ['PATH']}")
    monkeypatch.setenv("HIL_LEASE_DIR", str(tmp_path / "leases"))
    source = LabgridSource(lab.address, list(load_lab_inventory(_inventory(tmp_path, "iso", "a"))[1]))
    try:
        (entry,) = source.open(30, Stop())
        assert entry.console is not None and entry.power is not None
        with SerialConsole(entry.console, tmp_path / "console.log", entry.console_baud).open() as console:
            mark = console.mark()
            entry.power.off()
            deadline = time.monotonic() + 60
            while "Restarting system with command 'power off'" not in console.excerpt(mark):
                assert time.monotonic() < deadline, console.excerpt(mark)
                time.sleep(0.1)
        entry.power.on()
        host, port = entry.adb.rsplit(":", 1)
        assert host == "localhost" and int(port) != lab.adb_port  # a forward, not the address
    finally:
        source.close()
    deadline = time.monotonic() + 60
    while not _answers_here(int(lab.board.address.rsplit(":", 1)[1])):  # back on adb
        assert time.monotonic() < deadline, "the board did not power on again"
        time.sleep(0.2)


def _fastboot_in_namespace(pid: int) -> list[int]:
    """PIDs of `fastboot` processes in the network namespace of `pid` (the exporter's host)."""
    namespace = os.readlink(f"/proc/{pid}/ns/net")
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry.name.isdigit() and (entry / "comm").read_text().strip() == "fastboot"
                    and os.readlink(entry / "ns" / "net") == namespace):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_fastboot_past_its_limit_ends_on_the_exporters_host_too(
        lab: SshLab, images: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """hil kills its ssh client at a call's limit; sshd signals nothing to the program of a
    session without a tty, so a fastboot stuck in a download would run on over there. The
    limit holds on the exporter's host as well (coreutils `timeout`, a few seconds later)."""
    assert lab.sshd is not None and lab.host is not None
    monkeypatch.setenv("PATH", f"{lab.sshd.bin}:{os.environ['PATH']}")
    board = lab.board
    flasher = FastbootFlasher(f"tcp:127.0.0.1:{lab.fastboot_port}", flash_s=2.0, via="127.0.0.1")
    try:
        board.control("fault download-hang", applied_within=30)
        board.control("power bootloader", applied_within=30)
        flasher.wait(60)
        with pytest.raises(NoAnswer, match="no answer within 2 s"):
            flasher.write(Image("vendor", images / "vendor_a.img"))
        assert _fastboot_in_namespace(lab.host.pid)  # left running there by the killed ssh
        deadline = time.monotonic() + 60
        while _fastboot_in_namespace(lab.host.pid):  # until the remote `timeout` ends it
            assert time.monotonic() < deadline, "fastboot still runs on the exporter's host"
            time.sleep(0.2)
    finally:
        labgrid_ssh.close()
        board.control("fault clear", applied_within=30)
        board.control("power cycle", applied_within=30)
    deadline = time.monotonic() + 60
    while not _answers_here(int(board.address.rsplit(":", 1)[1])):  # back on adb
        assert time.monotonic() < deadline, "the board did not boot again"
        time.sleep(0.2)
