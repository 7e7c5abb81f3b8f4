"""Inventory files: records as written, and one clear line (exit 3) for every mistake."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hil.board.inventory import load_inventory, select_boards
from hil.board.power import CommandPower, SerialRelayPower
from hil.errors import UsageError

REPO = Path(__file__).resolve().parents[2]

GOOD = """
boards:
  - name: e9955-a
    adb: R3CX40ABCDE
    chipset: E9955
    console: /dev/ttyUSB0
    power:
      off: [usbrelay, BITFT_1=0]
      on: "usbrelay BITFT_1=1"
    tags: [lab-a, nightly]
  - name: e9965-b
    adb: 192.168.1.50:5555
    chipset: E9965
    console: socket://127.0.0.1:7000
    console_baud: 921600
    power: {relay: /dev/ttyUSB1, channel: 2}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "boards.yaml"
    path.write_text(text)
    return path


def test_an_inventory_becomes_plain_records(tmp_path: Path) -> None:
    a, b = load_inventory(_write(tmp_path, GOOD))
    assert (a.name, a.adb, a.chipset, a.console, a.tags) == (
        "e9955-a", "R3CX40ABCDE", "E9955", "/dev/ttyUSB0", ("lab-a", "nightly"))
    assert not a.network and b.network
    assert a.power == CommandPower(("usbrelay", "BITFT_1=1"), ("usbrelay", "BITFT_1=0"), None)
    assert b.power == SerialRelayPower("/dev/ttyUSB1", channel=2)
    assert b.console_baud == 921600


@pytest.mark.parametrize(("text", "message"), [
    ("boards: []", r"boards: expected a non-empty list"),
    ("cards: []", r"top level: expected a mapping with only a 'boards' list"),
    ("boards:\n  - {adb: X1, chipset: E9955}", r"boards\[0\]: name: required"),
    ("boards:\n  - {name: 'a b', adb: X1, chipset: E9955}", r"boards\[0\]: name: 'a b'"),
    ("boards:\n  - {name: a, adb: 'x; rm -rf /', chipset: E9955}", r"boards\[0\] \(a\): adb: "),
    ("boards:\n  - {name: a, adb: X1, chipset: E9999}", r"\(a\): chipset: 'E9999'"),
    ("boards:\n  - {name: a, adb: X1, chipset: E9955, colour: red}", r"\(a\): colour: unknown field"),
    ("boards:\n  - {name: a, adb: X1, chipset: E9955, console: 'http://x'}", r"\(a\): console: "),
    ("boards:\n  - {name: a, adb: X1, chipset: E9955, power: {on: [x]}}",
     r"\(a\): power: needs a cycle command, or both on and off"),
    ("boards:\n  - {name: a, adb: X1, chipset: E9955, power: {relay: /dev/x, channel: 9}}",
     r"\(a\): power.channel: expected 1..8"),
    ("boards:\n  - {name: a, adb: X1, chipset: E9955}\n  - {name: a, adb: X2, chipset: E9955}",
     r"boards: name 'a' appears twice"),
    ("boards: [", r"not a readable YAML inventory"),
])
def test_mistakes_name_the_file_entry_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(UsageError, match=message) as caught:
        load_inventory(path)
    assert str(caught.value).startswith(str(path))


def test_cli_reports_a_bad_inventory_in_one_line_with_exit_3(tmp_path: Path) -> None:
    path = _write(tmp_path, "boards:\n  - {name: a, adb: X1, chipset: E9999}")
    for command in (["boards", "--inventory", str(path), "--check"],
                    ["run", "--inventory", str(path)]):
        done = subprocess.run([sys.executable, "-m", "hil", *command], cwd=REPO,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 3, done.stderr
        assert done.stderr.count("\n") == 1 and "chipset: 'E9999'" in done.stderr
        assert "Traceback" not in done.stderr


def test_board_flags_select_from_the_inventory_or_add_boards(tmp_path: Path) -> None:
    inventory = load_inventory(_write(tmp_path, GOOD))
    assert [e.name for e in select_boards(inventory, [])] == ["e9955-a", "e9965-b"]
    assert [e.name for e in select_boards(inventory, ["192.168.1.50:5555"])] == ["e9965-b"]
    chosen = select_boards(inventory, ["e9955-a", "virtual"])
    assert [(e.name, e.virtual) for e in chosen] == [("e9955-a", False), ("virtual-0", True)]
    assert [e.name for e in select_boards([], ["virtual:2"])] == ["virtual-0", "virtual-1"]
    with pytest.raises(UsageError, match="named twice"):
        select_boards(inventory, ["e9955-a", "R3CX40ABCDE"])
