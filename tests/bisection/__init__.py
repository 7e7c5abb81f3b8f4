"""`hil bisect` on virtual boards: firmware builds, runner commits and wheels made here, the
nights they are bisected between run by `hil run` itself.

Helpers shared by the bisection tests: the boards' inventory, the firmware build folders (the
test rig's way: a `system` image whose `hil.virtual.fault=` lines the board arms after boot,
hil/virtual/images.py), a night's run, and `hil bisect` in this process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
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


def inventory(path: Path, boards: list[VirtualBoardProcess], build: Path | None = None) -> Path:
    """An inventory of `boards` (network adb, fastboot over TCP, power through the control
    FIFO) whose known-good images are those of the build folder `build` (None: no images)."""
    entries = []
    for index, board in enumerate(boards):
        entry: dict[str, Any] = board_entry(f"b{index}", board)
        entry.update(power={"cycle": power_command(board)})
        if build is not None:
            expected = (build / "expected_build").read_text().strip().split("=", 1)
            entry.update(fastboot=board.fastboot, product=PRODUCT, images={"system": str(build / "system.img")},
                         expected_build={expected[0]: expected[1]})
        entries.append(entry)
    return write_inventory(path, entries)


def night(boards: list[VirtualBoardProcess], build: Path | None, out: Path, **options: Any) -> Path:
    """A night on `build`'s firmware (flashed with --provision; None: as the board is): `hil
    run` of SUITE on the first board; its results.json."""
    options.setdefault("provision", build is not None)
    run_in_process(inventory(out.parent / f"{out.name}.yaml", boards[:1], build), out,
                   cases=tuple(load_suite(str(SUITE))), **options)
    return out / "results.json"


BUILD_PY = """\
# The runner build of a throwaway repository (tests/bisection): a virtual runner stand-in
# (hil/virtual/runner_build.py) with this commit's settings.txt, and its sidecar.
import hashlib, json, os, subprocess, sys
from pathlib import Path
from hil.virtual.runner_build import stand_in
if Path("BROKEN").exists():
    sys.exit("this commit does not build")
settings = [line.strip() for line in Path("settings.txt").read_text().splitlines() if line.strip()]
out = Path(os.environ["HIL_RUNNER_OUT"])
runner = out / "enn_executor_runner"
runner.write_bytes(stand_in(settings))
runner.chmod(0o755)
head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
sidecar = {"profile": "hil", "sha256": hashlib.sha256(runner.read_bytes()).hexdigest(), "commit": head,
           "built_by": "build.py"}
(out / "enn_executor_runner.profile.json").write_text(json.dumps(sidecar))
"""
BUILD_COMMAND = f"{sys.executable} build.py"


def runner_repo(root: Path, count: int, settings: Callable[[int], list[str]], broken: tuple[int, ...] = ()
                ) -> tuple[Path, list[str]]:
    """A throwaway git repository of `count` commits; commit N (1-based) holds settings.txt
    with `settings(N)` (the runner build's fault settings) and, when N is in `broken`, a file
    that makes its build fail. Its commits, oldest first."""
    git = ["git", "-C", str(root), "-c", "user.name=hil", "-c", "user.email=hil@localhost"]
    root.mkdir(parents=True)
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (root / "build.py").write_text(BUILD_PY)
    commits = []
    for number in range(1, count + 1):
        (root / "settings.txt").write_text("".join(f"{spec}\n" for spec in settings(number)))
        (root / "BROKEN").unlink(missing_ok=True)
        if number in broken:
            (root / "BROKEN").write_text("")
        (root / "change.txt").write_text(f"change {number}\n")
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", f"change {number}"], check=True)
        commits.append(subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                                      check=True).stdout.strip())
    return root, commits


def built_runner(repo: Path, commit: str, out: Path) -> Path:
    """The runner of `commit`, built as `hil bisect --runner-build` builds it."""
    worktree = out / "src"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(worktree), commit], check=True)
    (out / "runner").mkdir(parents=True)
    subprocess.run([sys.executable, "build.py"], cwd=worktree, check=True,
                   env=dict(os.environ, HIL_RUNNER_OUT=str(out / "runner")))
    subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(worktree)], check=True)
    return out / "runner" / "enn_executor_runner"


def bisect(*args: str) -> tuple[int, dict[str, Any]]:
    """`hil bisect ARGS` in this process: its exit code and bisect.json."""
    argv = list(args)
    code = main(["bisect", *argv])
    out = Path(argv[argv.index("--out") + 1])
    return code, json.loads((out / "bisect.json").read_text())
