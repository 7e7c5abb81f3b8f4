"""A runner pushed to a virtual board (upstream's tests push their Android binary as
`enn_executor_runner` into their own folder) runs as the board's own runner, whatever its
bytes; other files keep theirs."""

from __future__ import annotations

from pathlib import Path

import adbutils

ANDROID_LIKE = b"\x7fELF\x02\x01\x01\x00" + bytes(56) + b"aarch64 stand-in"
FOLDER = "/data/local/tmp/uploaded-runner"


def test_pushed_runner_runs_as_the_boards_runner(board_device: adbutils.AdbDevice, tmp_path: Path) -> None:
    binary = tmp_path / "enn_executor_runner"
    binary.write_bytes(ANDROID_LIKE)
    board_device.sync.push(binary, f"{FOLDER}/enn_executor_runner")
    board_device.sync.push(ANDROID_LIKE, f"{FOLDER}/other.bin")
    result = board_device.shell2(
        f"cd {FOLDER} && chmod +x ./enn_executor_runner && ./enn_executor_runner --model absent.pte",
        v2=True)
    # the runner's contract: a missing model is a failed check (SIGABRT, 134), not exit 126
    # ("Exec format error") as the binary itself would give here
    assert result.returncode == 134, result.output
    assert board_device.sync.read_bytes(f"{FOLDER}/other.bin") == ANDROID_LIKE
    assert "stands as the virtual runner" in board_device.shell("logcat -d")
    assert board_device.shell2(f"rm -rf {FOLDER}", v2=True).returncode == 0
