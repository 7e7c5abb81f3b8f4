"""A board's cases share two adb connections: its sync connection (up, the watchdog's
probes, down) and its kept shell (each case's run shell)."""

from pathlib import Path

import numpy as np
import pytest

from hil.board.adb import AdbBoard
from hil.board.preflight import VIRTUAL_RUNNER
from hil.board.sync import pull_files, push_files
from hil.board.watchdog import PROBE_AFTER_S
from hil.cases import load_suite
from hil.lower.build import build_artifact
from hil.virtual.transport import STREAMS_LOG


def streams(board_root: Path) -> list[str]:
    log = board_root / "run" / STREAMS_LOG
    return log.read_text().splitlines() if log.exists() else []


def test_many_files_go_up_and_down_in_one_connection_each(board_device, virtual_board, tmp_path):
    files = []
    for i, size in enumerate((0, 1, 70_000, 300_001)):
        path = tmp_path / f"f{i}.bin"
        path.write_bytes(np.random.default_rng(i).bytes(size))
        files.append((path, f"/data/local/tmp/sync-test/sub/f{i}.bin", 0o644))
    before = len(streams(virtual_board.root))
    assert push_files(board_device, files) == 0 + 1 + 70_000 + 300_001
    remotes = [remote for _, remote, _ in files]
    pulled = pull_files(board_device, remotes)
    assert streams(virtual_board.root)[before:] == ["sync", "sync"]
    for local, remote, _ in files:
        assert pulled[remote] == local.read_bytes()


def test_a_missing_file_is_none_and_the_rest_still_arrive(board_device, tmp_path):
    path = tmp_path / "present.bin"
    path.write_bytes(b"present")
    push_files(board_device, [(path, "/data/local/tmp/sync-test/present.bin", 0o644)])
    pulled = pull_files(
        board_device,
        ["/data/local/tmp/sync-test/absent.bin", "/data/local/tmp/sync-test/present.bin"],
    )
    assert pulled == {
        "/data/local/tmp/sync-test/absent.bin": None,
        "/data/local/tmp/sync-test/present.bin": b"present",
    }


@pytest.mark.slow
def test_a_case_is_one_connection_and_the_runner_goes_up_once(
    adb_server, board_device, virtual_board, tmp_path
):
    """The board's sync connection and its kept shell are kept from case to case: a case
    opens no connection. Connections cut since the last case (the adb server dropped them: a
    reconnect of the recovery ladder does the same) are replaced, and the case passes."""
    case = next(c for c in load_suite("smoke") if c.id == "add")
    artifact = build_artifact(case, "xnnpack", "E9955", tmp_path / "artifact")
    board = AdbBoard("rt", virtual_board.address, board_device, "rt-run", VIRTUAL_RUNNER, 60)
    board.prepare()
    before = len(streams(virtual_board.root))
    for i in range(3):
        execution = board.run(artifact, f"c{i}", iterations=1, warmup=0)
        assert execution.exit_code == 0, execution.stderr
        assert all(path is not None for path in execution.outputs)
    opened = streams(virtual_board.root)[before:]
    assert opened == ["sync", "shell,v2"]
    adb_server.disconnect(virtual_board.address)  # every connection to the board is cut
    board.device = adb_server.connect(virtual_board.address, timeout=30)
    execution = board.run(artifact, "after", iterations=1, warmup=0)
    assert execution.exit_code == 0, execution.stderr
    assert streams(virtual_board.root)[before + len(opened):] == ["sync", "shell,v2"]
    board.cleanup()


@pytest.mark.slow
def test_a_long_case_is_probed_on_its_own_sync_connection(
    adb_server, board_device, virtual_board, tmp_path
):
    """The watchdog probes a runner that runs longer than PROBE_AFTER_S (a STAT every
    second) through the case's sync connection: no connection of its own per probe."""
    case = next(c for c in load_suite("smoke") if c.id == "add")
    artifact = build_artifact(case, "xnnpack", "E9955", tmp_path / "artifact")
    board = AdbBoard("rt", virtual_board.address, board_device, "rt-run", VIRTUAL_RUNNER, 60,
                     idle_timeout_s=2)
    board.prepare()
    virtual_board.control(f"fault slow,on=exec,delay={2.5 * PROBE_AFTER_S:g}", applied_within=30)
    before = len(streams(virtual_board.root))
    execution = board.run(artifact, "long", iterations=1, warmup=0)
    assert execution.exit_code == 0, execution.stderr
    assert execution.timings_s["exec"] > 2 * PROBE_AFTER_S  # long enough for probes
    assert all(path is not None for path in execution.outputs)
    assert streams(virtual_board.root)[before:] == ["sync", "shell,v2"]  # the board's first case
    virtual_board.control("fault clear", applied_within=30)
    board.cleanup()


@pytest.mark.slow
def test_iterations_give_one_latency_sample_each(board_device, virtual_board, tmp_path):
    case = next(c for c in load_suite("smoke") if c.id == "linear")
    artifact = build_artifact(case, "xnnpack", "E9955", tmp_path / "artifact")
    board = AdbBoard("it", virtual_board.address, board_device, "it-run", VIRTUAL_RUNNER, 60)
    board.prepare()
    execution = board.run(artifact, "c0", iterations=5, warmup=2)
    assert execution.exit_code == 0, execution.stderr
    assert len(execution.latency_ms["samples"]) == 5
    assert execution.latency_ms["avg"] == pytest.approx(np.mean(execution.latency_ms["samples"]))
    board.cleanup()
