"""The runner goes to a board once per session, and again only when its sha256 changes;
everything hil names on the board is a plain name inside its folder."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from hil.board.adb import AdbBoard
from hil.board.commands import safe_name
from hil.board.invocation import RUNNER_PATH
from hil.board.preflight import VIRTUAL_RUNNER


def test_runner_is_pushed_once_per_session_and_again_only_after_it_changed(
    board_device, virtual_board, tmp_path: Path
) -> None:
    runner = tmp_path / "enn_executor_runner"
    runner.write_bytes(VIRTUAL_RUNNER.read_bytes() + f"\n# {tmp_path.name} v1\n".encode())
    try:
        first = AdbBoard("b1", virtual_board.address, board_device, "push-count-1", runner, 30)
        first.prepare()
        first.prepare()  # the same session prepares again (e.g. after a recovery)
        assert first.runner_pushes == 1

        second = AdbBoard("b1", virtual_board.address, board_device, "push-count-2", runner, 30)
        second.prepare()  # a new session, the same runner: nothing to push
        assert second.runner_pushes == 0

        runner.write_bytes(runner.read_bytes() + b"# v2\n")
        third = AdbBoard("b1", virtual_board.address, board_device, "push-count-3", runner, 30)
        third.prepare()
        third.prepare()
        assert third.runner_pushes == 1
        assert third.runner_sha256() == hashlib.sha256(runner.read_bytes()).hexdigest()
        installed = virtual_board.root / "fs" / RUNNER_PATH.lstrip("/")
        assert installed.read_bytes() == runner.read_bytes()
        for board in (first, second, third):
            board.cleanup()
            assert not (virtual_board.root / "fs" / board.workdir.lstrip("/")).exists()
    finally:  # leave the real virtual runner for the other tests
        AdbBoard("b1", virtual_board.address, board_device, "push-restore", VIRTUAL_RUNNER,
                 30).prepare()


@pytest.mark.parametrize("name", ["../etc", "a/b", "x$(touch /tmp/pwned)", "a b", "", ".hidden",
                                  "-rf", "ü", "a;b"])
def test_names_that_could_leave_the_workdir_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="unsafe"):
        safe_name(name, "case slot")
