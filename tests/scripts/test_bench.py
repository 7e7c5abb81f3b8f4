"""scripts/bench.py's minimal client (the baseline hil is measured against) does the same
three operations as hil on the same board, on connections kept from case to case as hil's
are (one sync connection, one kept shell), with the same outputs."""

from __future__ import annotations

import importlib.util
import posixpath
import sys
from pathlib import Path

import pytest

from hil.board.adb import AdbBoard
from hil.board.preflight import VIRTUAL_RUNNER
from hil.cases import load_suite
from hil.lower.build import build_artifact
from hil.virtual.transport import STREAMS_LOG

pytestmark = pytest.mark.slow  # a lowering

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench.py"


def _bench_module():
    spec = importlib.util.spec_from_file_location("hil_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["hil_bench"] = module
    spec.loader.exec_module(module)
    return module


def test_the_minimal_client_runs_a_case_as_hil_does(adb_server, board_device, virtual_board, tmp_path) -> None:
    bench = _bench_module()
    case = next(c for c in load_suite("smoke") if c.id == "add")
    artifact = build_artifact(case, "xnnpack", "E9955", tmp_path / "add")
    board = AdbBoard("bench", virtual_board.address, board_device, "bench-run", VIRTUAL_RUNNER, 60)
    board.prepare()
    client = bench.MinimalClient(adb_server.socket_path, virtual_board.address)
    streams = virtual_board.root / "run" / STREAMS_LOG
    before = len(streams.read_text().splitlines())
    case_dir = posixpath.join(board.workdir, "minimal")
    try:
        seconds = client.case(board, artifact, case_dir)
        assert set(seconds) == {"push", "exec", "pull"}
        client.case(board, artifact, posixpath.join(board.workdir, "minimal-2"))
        assert streams.read_text().splitlines()[before:] == ["sync", "shell,v2"]  # two cases
        pulled = client.pull([posixpath.join(case_dir, "out", "output_0.bin")])
        execution = board.run(artifact, "hil", 1, 0)
        assert execution.outputs[0] == next(iter(pulled.values()))
        status, stderr = client.shell(f"{bench.RUNNER_PATH} --help")  # what board_costs times
        assert status == 1 and b"VIRTUAL" in stderr
        status, _ = client.shell("exit 7")  # a subshell's exit: the kept shell goes on
        assert status == 7 and client.shell("true") == (0, b"")
    finally:
        client.close()
        board.cleanup()
