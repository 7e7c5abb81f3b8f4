"""`hil bisect` on virtual boards: firmware builds, runner commits and wheels made here, the
nights they are bisected between run by `hil run` itself.

Helpers shared by the bisection tests: the boards' inventory, the firmware build folders (the
test rig's way: a `system` image whose `hil.virtual.fault=` lines the board arms after boot,
hil/virtual/images.py), a night's run, and `hil bisect` in this process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hil.cases import load_suite
from hil.cli import main
from hil.virtual.launcher import VirtualBoardProcess
from tests.faults import FIXTURES, board_entry, power_command, run_in_process, write_inventory

SUITE = FIXTURES / "bisect.yaml"
"""One case (linear, relu, linear): what every bisection here runs."""
CASE = "bisect.fp32.mlp"
PRODUCT = "s5e9955"


def fingerprint(number: int) -> str:
    return f"samsung/hil_bisect/e9955:15/B{number:03d}/{number}:user/release-keys"


def firmware_builds(root: Path, count: int, faults: dict[int, list[str]]) -> Path:
    """`root/build-NN` for NN in 1..count: a `system.img` whose fingerprint is NN's, with the
    fault lines `faults[NN]` (the rig's firmware setting), and an `expected_build` file."""
    for number in range(1, count + 1):
        folder = root / f"build-{number:02d}"
        folder.mkdir(parents=True)
        lines = [f"ro.build.fingerprint={fingerprint(number)}"]
        lines += [f"hil.virtual.fault={spec}" for spec in faults.get(number, [])]
        (folder / "system.img").write_text("\n".join(lines) + "\n" + "#" * 4096 + "\n")
        (folder / "expected_build").write_text(f"ro.build.fingerprint={fingerprint(number)}\n")
    return root


def inventory(path: Path, boards: list[VirtualBoardProcess], build: Path) -> Path:
    """An inventory of `boards` (network adb, fastboot over TCP, power through the control
    FIFO) whose known-good images are those of the build folder `build`."""
    expected = (build / "expected_build").read_text().strip().split("=", 1)
    entries = []
    for index, board in enumerate(boards):
        entry: dict[str, Any] = board_entry(f"b{index}", board)
        entry.update(fastboot=board.fastboot, product=PRODUCT, power={"cycle": power_command(board)},
                     images={"system": str(build / "system.img")},
                     expected_build={expected[0]: expected[1]})
        entries.append(entry)
    return write_inventory(path, entries)


def night(boards: list[VirtualBoardProcess], build: Path, out: Path, **options: Any) -> Path:
    """A night on `build`'s firmware (flashed with --provision): `hil run` of SUITE on the
    first board; its results.json."""
    options.setdefault("provision", True)
    run_in_process(inventory(out.parent / f"{out.name}.yaml", boards[:1], build), out,
                   cases=tuple(load_suite(str(SUITE))), **options)
    return out / "results.json"


def bisect(*args: str) -> tuple[int, dict[str, Any]]:
    """`hil bisect ARGS` in this process: its exit code and bisect.json."""
    argv = list(args)
    code = main(["bisect", *argv])
    out = Path(argv[argv.index("--out") + 1])
    return code, json.loads((out / "bisect.json").read_text())
