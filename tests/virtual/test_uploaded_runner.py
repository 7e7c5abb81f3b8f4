"""What a virtual board executes is decided when it is executed (hil/virtual/exec_guard.py), as a
board's kernel decides it, however the file arrived: an aarch64 `enn_executor_runner` runs as
the board's runner (pushed, or unpacked by the board's own `tar`); what an aarch64 board
refuses is refused (an x86-64 ELF: Exec format error; a file without execute permission:
Permission denied); other files keep their bytes."""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import adbutils

from tests.board_files import aarch64_elf

FOLDER = "/data/local/tmp/uploaded-runner"


ANDROID_RUNNER = aarch64_elf(b"aarch64 stand-in")


def _run(device: adbutils.AdbDevice, command: str) -> adbutils.ShellReturn:
    return device.shell2(f"cd {FOLDER} && {command}", v2=True)


def test_a_pushed_runner_runs_as_the_boards_runner(board_device: adbutils.AdbDevice, tmp_path: Path) -> None:
    binary = tmp_path / "enn_executor_runner"
    binary.write_bytes(ANDROID_RUNNER)
    board_device.sync.push(binary, f"{FOLDER}/enn_executor_runner")
    board_device.sync.push(ANDROID_RUNNER, f"{FOLDER}/other.bin")
    assert board_device.sync.read_bytes(f"{FOLDER}/enn_executor_runner") == ANDROID_RUNNER  # until it runs
    result = _run(board_device, "chmod +x ./enn_executor_runner && ./enn_executor_runner --model absent.pte")
    # the runner's contract: a missing model is a failed check (SIGABRT, 134), not exit 126
    # ("Exec format error") as the binary itself would give here
    assert result.returncode == 134, result.output
    assert board_device.sync.read_bytes(f"{FOLDER}/other.bin") == ANDROID_RUNNER
    assert "stands as the virtual runner" in board_device.shell("logcat -d")
    assert board_device.shell2(f"rm -rf {FOLDER}", v2=True).returncode == 0


def test_a_runner_unpacked_by_the_boards_tar_runs_as_the_boards_runner(
    board_device: adbutils.AdbDevice,
) -> None:
    bundle = io.BytesIO()
    with tarfile.open(fileobj=bundle, mode="w") as tar:
        info = tarfile.TarInfo("enn_executor_runner")
        info.size, info.mode = len(ANDROID_RUNNER), 0o755
        tar.addfile(info, io.BytesIO(ANDROID_RUNNER))
    board_device.sync.push(bundle.getvalue(), f"{FOLDER}/inputs.tar")
    result = _run(board_device, "tar -xf inputs.tar && chmod +x ./enn_executor_runner && "
                                "./enn_executor_runner --model absent.pte")
    assert result.returncode == 134, result.output
    assert board_device.shell2(f"rm -rf {FOLDER}", v2=True).returncode == 0


def test_what_an_aarch64_board_refuses_is_refused(board_device: adbutils.AdbDevice) -> None:
    host_program = Path(shutil.which("true") or "/bin/true").read_bytes()  # an x86-64 ELF here
    board_device.sync.push(host_program, f"{FOLDER}/host-true", mode=0o755)
    foreign = _run(board_device, "./host-true")
    assert foreign.returncode == 126 and "Exec format error" in foreign.stderr
    board_device.sync.push(ANDROID_RUNNER, f"{FOLDER}/enn_executor_runner", mode=0o644)
    not_executable = _run(board_device, "./enn_executor_runner --model absent.pte")
    assert not_executable.returncode == 126 and "Permission denied" in not_executable.stderr
    board_device.sync.push(aarch64_elf(b"another program"), f"{FOLDER}/other-tool", mode=0o755)
    android = _run(board_device, "./other-tool")
    assert android.returncode == 126 and "Exec format error" in android.stderr
    assert "other-tool: an aarch64 program a virtual board cannot execute" in board_device.shell("logcat -d")
    assert board_device.sync.read_bytes(f"{FOLDER}/other-tool") == aarch64_elf(b"another program")
    assert board_device.shell2(f"rm -rf {FOLDER}", v2=True).returncode == 0


def test_scripts_and_the_boards_own_programs_run_as_they_are(board_device: adbutils.AdbDevice) -> None:
    board_device.sync.push(b"#!/system/bin/sh\necho from a script\n", f"{FOLDER}/script.sh", mode=0o755)
    board_device.sync.push(b"", f"{FOLDER}/empty", mode=0o755)
    assert _run(board_device, "./script.sh").stdout == "from a script\n"
    empty = _run(board_device, "./empty")  # no format the kernel knows: the shell runs it as a script
    assert (empty.returncode, empty.stdout) == (0, "")
    assert _run(board_device, "ls -d . && getprop ro.product.cpu.abi").stdout == ".\narm64-v8a\n"
    assert board_device.shell2(f"rm -rf {FOLDER}", v2=True).returncode == 0
