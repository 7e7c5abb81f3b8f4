"""hil as a client of a lab's adb servers (real adb servers started by the test, virtual
boards `adb connect`ed to them beforehand, as a lab does): it starts none, kills none,
disconnects only what it connected itself; boards on several servers share one run; a
server that is down is a problem of its boards only."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hil.adbaddress import server_choice
from hil.adbserver import LabAdbServer
from hil.board.inventory import InventoryEntry, from_specs, load_inventory
from hil.board.servers import BoardServers
from hil.board.spec import parse_boards
from hil.errors import InfraError, UsageError
from tests.adb_lab import dead_server_address

REPO = Path(__file__).resolve().parents[2]


def hil(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hil", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


# -- fast: which server a board belongs to -------------------------------------------------

def test_board_specs_and_inventory_name_the_server(tmp_path: Path) -> None:
    specs = parse_boards(["R3CX40@lab-host-2:5037", "10.0.0.7:5555@127.0.0.1:5038", "R3CX41"])
    assert [(s.adb, s.adb_server) for s in specs] == [
        ("R3CX40", "lab-host-2:5037"), ("10.0.0.7:5555", "127.0.0.1:5038"), ("R3CX41", None)]
    assert [e.name for e in from_specs(specs)] == [
        "R3CX40@lab-host-2:5037", "10.0.0.7:5555@127.0.0.1:5038", "R3CX41"]
    with pytest.raises(UsageError, match="is not an adb server HOST:PORT"):
        parse_boards(["R3CX40@nowhere"])
    inventory = tmp_path / "boards.yaml"
    inventory.write_text(yaml.safe_dump({"boards": [
        {"name": "a", "adb": "R3CX40", "chipset": "E9955", "adb_server": "lab-host-2:5037"},
        {"name": "b", "adb": "R3CX40", "chipset": "E9955", "adb_server": "lab-host-3:5037"}]}))
    assert [e.adb_server for e in load_inventory(inventory)] == ["lab-host-2:5037", "lab-host-3:5037"]
    inventory.write_text(yaml.safe_dump({"boards": [
        {"name": "a", "adb": "R3CX40", "chipset": "E9955", "adb_server": "lab-host-2"}]}))
    with pytest.raises(UsageError, match=r"boards\[0\] \(a\).*adb_server.*not an adb server HOST:PORT"):
        load_inventory(inventory)


def test_usb_boards_never_go_to_a_private_server() -> None:
    servers = BoardServers()
    usb = InventoryEntry(name="u", adb="R3CX40")
    network = InventoryEntry(name="n", adb="10.0.0.7:5555")
    virtual = InventoryEntry(name="v", adb="", virtual=True)
    assert servers.address_for(usb) == "127.0.0.1:5037"  # the host's own server
    assert servers.address_for(network) is None  # hil's private server connects it
    assert servers.address_for(virtual) is None
    lab = BoardServers("lab:5039")
    assert lab.address_for(usb) == lab.address_for(network) == "lab:5039"
    assert lab.address_for(virtual) is None  # a virtual board hil starts stays private
    named = InventoryEntry(name="x", adb="R3CX40", adb_server="other:5037")
    assert lab.address_for(named) == "other:5037"
    own = BoardServers(server_choice(None, {"HIL_ADB_SERVER": "own"}))  # --access usb
    assert own.address_for(usb) is own.address_for(network) is None
    assert server_choice(None, {"ANDROID_ADB_SERVER_PORT": "5038"}) == "127.0.0.1:5038"
    assert server_choice("lab:1", {"HIL_ADB_SERVER": "own"}) == "lab:1"  # the flag wins
    with pytest.raises(UsageError, match="HIL_ADB_SERVER: 'nope' is not an adb server"):
        server_choice(None, {"HIL_ADB_SERVER": "nope"})


def test_a_lab_server_that_does_not_answer_is_an_infra_error_and_is_never_started() -> None:
    address = dead_server_address()
    with pytest.raises(InfraError, match=f"no adb server answers at {address}.*hil does not start"):
        BoardServers(address).server_for(InventoryEntry(name="u", adb="R3CX40"))
    with pytest.raises(InfraError, match="never starts or restarts a server it does not own"):
        LabAdbServer(address).restart()
    port = int(address.rpartition(":")[2])
    with pytest.raises(OSError):  # still nothing listens there: hil started no server
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


# -- whole runs through real lab servers (slow) --------------------------------------------

@pytest.mark.slow
def test_run_through_the_lab_server_passes_and_leaves_it_as_it_was(lab, tmp_path: Path) -> None:
    one, b1 = lab["one"], lab["b1"]
    pid = one.pid
    assert one.devices() == {b1.address: "device"}
    done = hil("run", "--adb-server", one.address, "--board", b1.address, "--suite", "smoke",
               "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert {c["verdict"] for c in results["cases"]} == {"PASS"} and len(results["cases"]) == 7
    (board,) = results["run"]["boards"]
    assert board["adb_server"] == one.address and results["run"]["usable_boards"] == 1
    assert one.pid == pid and one.alive()  # the same server process, still answering
    assert one.devices() == {b1.address: "device"}  # and the lab's board still connected


@pytest.mark.slow
def test_boards_on_two_servers_share_one_run(lab, tmp_path: Path) -> None:
    one, two, b1, b2 = lab["one"], lab["two"], lab["b1"], lab["b2"]
    for board in (b1, b2):
        board.control("fault slow,delay=0.02")  # each case takes a while: both boards get some
    inventory = tmp_path / "boards.yaml"
    inventory.write_text(yaml.safe_dump({"boards": [
        {"name": "on-one", "adb": b1.address, "adb_server": one.address, "chipset": "E9955"},
        {"name": "on-two", "adb": b2.address, "adb_server": two.address, "chipset": "E9955"},
        {"name": "on-dead", "adb": "R3CX40DEAD", "adb_server": dead_server_address(),
         "chipset": "E9955"},
    ]}))
    try:
        done = hil("run", "--inventory", str(inventory), "--suite", "smoke",
                   "--out", str(tmp_path / "out"))
    finally:
        for board in (b1, b2):
            board.control("fault clear")
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    cases = results["cases"]
    assert {c["verdict"] for c in cases} == {"PASS"} and len(cases) == 7
    assert {c["board"] for c in cases} == {"on-one", "on-two"}  # spread over both servers
    print("cases per board:", {b: sum(c["board"] == b for c in cases) for b in ("on-one", "on-two")})
    boards = {b["name"]: b for b in results["run"]["boards"]}
    assert boards["on-one"]["adb_server"] == one.address
    assert boards["on-two"]["adb_server"] == two.address
    assert "no adb server answers at" in boards["on-dead"]["error"]  # its own problem only
    assert results["run"]["usable_boards"] == 2
    assert one.devices() == {b1.address: "device"} and two.devices() == {b2.address: "device"}


@pytest.mark.slow
def test_hil_disconnects_only_the_boards_it_connected(lab, tmp_path: Path) -> None:
    one, two, b1, b2 = lab["one"], lab["two"], lab["b1"], lab["b2"]
    done = hil("run", "--adb-server", one.address, "--board", b1.address, "--board", b2.address,
               "--suite", str(REPO / "tests" / "fixtures" / "tiny.yaml"), "--flow", "portable",
               "--out", str(tmp_path / "out"))  # tiny/portable: the fault tests' cached artifacts
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert {c["board"] for c in results["cases"]} <= {b1.address, b2.address}
    assert one.devices() == {b1.address: "device"}  # b2 (hil's own connection) is gone again
    assert two.devices() == {b2.address: "device"}  # the other server was never touched


@pytest.mark.slow
def test_hil_boards_says_which_server_and_what_it_sees(lab) -> None:
    one, b1 = lab["one"], lab["b1"]
    done = hil("boards", "--adb-server", one.address, "--board", b1.address)
    assert done.returncode == 0, done.stdout + done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("adb server:")]
    assert line == (f"adb server: the lab's adb server {one.address} (used as a client: not "
                    f"started, not stopped by hil); boards: {b1.address}; sees 1: {b1.address} device")
    doctor = hil("doctor", "--adb-server", one.address, "--require", "adb", timeout=120)
    assert doctor.returncode == 0, doctor.stdout
    assert (f"hil uses the lab's adb server {one.address} as a client for every board it does "
            f"not start (protocol ") in doctor.stdout
    assert f"sees 1: {b1.address} device" in doctor.stdout
    down = hil("doctor", "--adb-server", dead_server_address(), "--require", "adb", timeout=120)
    assert down.returncode == 3
    assert "does not answer" in down.stdout and "ssh -N -L" in down.stdout


def _hil_env(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """hil with adb's and labgrid's variables as given (the test's own removed)."""
    import os

    environment = {k: v for k, v in os.environ.items()
                   if k not in ("ADB_SERVER_SOCKET", "HIL_ADB_SERVER", "LG_COORDINATOR")
                   and not k.startswith("ANDROID_ADB_SERVER")}
    return subprocess.run([sys.executable, "-m", "hil", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**environment, **env})


def test_hil_boards_alone_lists_what_the_default_server_sees(lab) -> None:
    """No argument: the boards of the server adb itself would use (its own variables), the
    coordinator named or said to be unset; exit 0, or 2 when a server does not answer."""
    one, b1 = lab["one"], lab["b1"]
    for variables in ({"ANDROID_ADB_SERVER_PORT": str(one.port)},
                      {"ADB_SERVER_SOCKET": f"tcp:127.0.0.1:{one.port}"}):
        done = _hil_env("boards", **variables)
        assert done.returncode == 0, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        source = "ADB_SERVER_SOCKET" if "ADB_SERVER_SOCKET" in variables else "ANDROID_ADB_SERVER_ADDRESS/PORT"
        assert lines[0] == f"adb server {one.address} ({source}): 1 board(s)"
        assert lines[1].split() == ["serial", "state"] and lines[2].split() == [b1.address, "device"]
        assert lines[-1] == "labgrid coordinator: none set (--labgrid HOST:PORT or LG_COORDINATOR)"
    down = dead_server_address()
    done = _hil_env("boards", "--adb-server", down, LG_COORDINATOR=dead_server_address())
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"no adb server answers at {down}" in done.stderr
    assert "labgrid coordinator 127.0.0.1:" in done.stdout  # named, and its places tried
