"""What a run asks a labgrid lab for: `--board labgrid:...`, inventory `labgrid:` entries, the
coordinator's address, and how a place's resources become a board (no coordinator needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hil.board.labgrid_spec import parse_labgrid_spec
from hil.errors import UsageError
from hil.pool.labgrid import (
    LabgridPower,
    LabgridSource,
    _Want,
    board_sources,
    coordinator_address,
    holder_alive,
    matches,
)


def test_a_spec_is_tags_and_a_count() -> None:
    spec = parse_labgrid_spec("labgrid:soc=e9955,runner_profile=hil*2")
    assert spec.tags == (("runner_profile", "hil"), ("soc", "e9955")) and spec.count == 2
    assert parse_labgrid_spec("labgrid:place=lab1-a").tags == (("name", "lab1-a"),)


@pytest.mark.parametrize("text, problem", [
    ("labgrid:", "at least one tag"),
    ("labgrid:soc", "not KEY=VALUE"),
    ("labgrid:Soc=e9955", "tag key"),
    ("labgrid:soc=e9955*0", r"\*N"),
    ("labgrid:place=a*2", "names one place"),
    ("labgrid:soc=a,soc=b", "given twice"),
])
def test_a_bad_spec_is_one_usage_line(text: str, problem: str) -> None:
    with pytest.raises(UsageError, match=problem):
        parse_labgrid_spec(text)


def test_inventory_entries_ask_for_places(tmp_path: Path) -> None:
    inventory = tmp_path / "boards.yaml"
    inventory.write_text("""
boards:
  - {name: usb-a, adb: R3CX40ABCDE, chipset: E9955}
  - {name: lab1-a, labgrid: {place: lab1-a}, runner_profile: upstream}
  - {name: any-e9955, labgrid: {tags: {soc: e9955}, count: 2}, chipset: E9955}
""")
    entries, sources = board_sources(str(inventory), [], "127.0.0.1:20408")
    assert [e.name for e in entries] == ["usb-a"]
    (source,) = sources
    assert [(r.label, r.tags, r.count, r.runner_profile) for r in source.requests] == [
        ("lab1-a", (("name", "lab1-a"),), 1, "upstream"),
        ("any-e9955", (("soc", "e9955"),), 2, None),
    ]
    # --board picks: an inventory labgrid entry by name, nothing else of the inventory
    entries, sources = board_sources(str(inventory), ["lab1-a"], "127.0.0.1:20408")
    assert entries == [] and [r.label for r in sources[0].requests] == ["lab1-a"]


def test_labgrid_boards_need_a_coordinator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LG_COORDINATOR", raising=False)
    with pytest.raises(UsageError, match="--labgrid HOST:PORT"):
        board_sources(None, ["labgrid:soc=e9955"], None)
    monkeypatch.setenv("LG_COORDINATOR", "lab-coordinator")
    assert coordinator_address(None) == "lab-coordinator:20408"
    entries, sources = board_sources(None, ["labgrid:soc=e9955*2", "virtual"], None)
    assert [e.virtual for e in entries] == [True] and sources[0].address == "lab-coordinator:20408"
    assert board_sources(None, ["labgrid:soc=e9955"], None)[0] == []  # no virtual board added


def test_a_holder_is_judged_only_on_this_host() -> None:
    assert holder_alive(f"me/alice.hil-{os.getpid()}", "me") is True
    assert holder_alive("me/alice.hil-999999999", "me") is False
    assert holder_alive("other/alice.hil-999999999", "me") is None  # another host: not ours to say
    assert holder_alive("me/alice", "me") is None  # not a hil run


def test_a_place_becomes_a_board() -> None:
    source = LabgridSource("127.0.0.1:20408", [])
    want = _Want(parse_labgrid_spec("labgrid:soc=e9955"), "TOKEN", "lab1-a", True)
    place = {"tags": {"soc": "e9955", "runner_profile": "hil"}, "acquired_resources": [
        ("exp", "g", "RemoteUSBADBDevice", "RemoteUSBADBDevice"),
        ("exp", "g", "NetworkSerialPort", "NetworkSerialPort"),
        ("exp", "g", "NetworkPowerPort", "NetworkPowerPort")]}
    resources = {"exp": {"g": {
        "RemoteUSBADBDevice": {"cls": "RemoteUSBADBDevice",
                               "params": {"host": "10.0.0.2", "port": 5037, "serialno": "R3CX40"}},
        "NetworkSerialPort": {"cls": "NetworkSerialPort", "params": {"host": "10.0.0.2", "port": 4001,
                                                                      "speed": 921600}},
        "NetworkPowerPort": {"cls": "NetworkPowerPort",
                             "params": {"model": "simplerest", "host": "http://pdu/{value}", "index": "3"}},
    }}}
    entry = source.entry_for(want, place, resources)
    assert (entry.name, entry.adb, entry.adb_server) == ("lab1-a", "R3CX40", "10.0.0.2:5037")
    assert entry.console == "rfc2217://10.0.0.2:4001?ign_set_control" and entry.console_baud == 921600
    assert entry.power == LabgridPower("lab1-a", "simplerest", "http://pdu/{value}", "3")
    assert (entry.chipset, entry.runner_profile) == ("E9955", "hil")
    assert entry.labgrid is not None and entry.labgrid["exporter"] == "exp"
    assert matches({"soc": "e9955"}, "lab1-a", (("name", "lab1-a"),))


def test_a_place_with_network_fastboot_gives_the_endpoint_of_the_entrys_images(tmp_path: Path) -> None:
    """As labgrid's exporter publishes an AndroidNetFastboot (remote/exporter.py
    AndroidNetFastbootExport): RemoteAndroidNetFastboot {host, address, port, protocol}."""
    inventory = tmp_path / "lab.yaml"
    inventory.write_text("boards:\n  - {name: p, labgrid: {place: lab1-a}, images: {boot: b.img}, "
                         "product: s5e9955, expected_build: {ro.build.id: B1}}\n")
    _, requests = board_sources(str(inventory), [], "127.0.0.1:20408")
    (request,) = requests[0].requests
    source = LabgridSource("127.0.0.1:20408", [request])
    place = {"tags": {}, "acquired_resources": [
        ("exp", "g", "NetworkADBDevice", "NetworkADBDevice"),
        ("exp", "g", "RemoteAndroidNetFastboot", "RemoteAndroidNetFastboot")]}
    resources = {"exp": {"g": {
        "NetworkADBDevice": {"cls": "NetworkADBDevice", "params": {"host": "10.0.0.2", "port": 5555}},
        "RemoteAndroidNetFastboot": {"cls": "RemoteAndroidNetFastboot", "params": {
            "host": "exp-host", "address": "10.0.0.7", "port": 5554, "protocol": "tcp"}},
    }}}
    entry = source.entry_for(_Want(request, "TOKEN", "lab1-a", True), place, resources)
    assert entry.provisioning is not None and entry.provisioning.fastboot == "tcp:10.0.0.7:5554"
    assert [image.partition for image in entry.provisioning.images] == ["boot"]
    del resources["exp"]["g"]["RemoteAndroidNetFastboot"]
    place["acquired_resources"].pop()
    bare = source.entry_for(_Want(request, "TOKEN", "lab1-a", True), place, resources)
    assert bare.provisioning is not None and bare.provisioning.fastboot == ""  # its flash says so


def test_the_action_passes_a_labgrid_spec_whole(tmp_path: Path) -> None:
    """action.yml's "Choose the boards" step: commas split plain boards, a labgrid spec stays
    whole, and its '*' is no glob even beside files that would match."""
    import subprocess

    import yaml

    action = yaml.safe_load((Path(__file__).resolve().parents[2] / "action.yml").read_text())
    step = next(s for s in action["runs"]["steps"] if s.get("id") == "plan")
    (tmp_path / "labgrid:soc=e9955,chipset=e9955xx2").write_text("")  # what a glob would find
    output = tmp_path / "output"
    env = dict(os.environ, BOARDS="labgrid:soc=e9955,chipset=e9955*2 R3CX40,10.0.0.7:5555",
               LABGRID_TAGS="soc=e9965", INVENTORY="", ON_NO_BOARD="fail",
               ACCESS="host-adb", JUNIT="hil-out/junit.xml", TIMEOUT_MINUTES="60",  # the step's other inputs
               GITHUB_OUTPUT=str(output), GITHUB_STEP_SUMMARY=str(tmp_path / "summary"))
    subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                   cwd=tmp_path, env=env, check=True, timeout=30)
    assert "boards=labgrid:soc=e9955,chipset=e9955*2 R3CX40 10.0.0.7:5555 labgrid:soc=e9965\n" \
        in output.read_text()


def test_the_container_gets_the_coordinator_not_the_host_name() -> None:
    """hil replicate: LG_COORDINATOR and LG_USERNAME by name; LG_HOSTNAME never (a container's
    PIDs are its own: it must not judge another container's holder dead)."""
    from hil.container import RunSpec

    names = RunSpec(image="img:1", args=("run",), workspace=Path("/ws")).env_names
    assert {"LG_COORDINATOR", "LG_USERNAME"} <= set(names) and "LG_HOSTNAME" not in names
