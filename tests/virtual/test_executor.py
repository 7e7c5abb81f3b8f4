"""The warm executor and the runner front: runner execs through the unix socket, as the
virtual board serves them (the runner's own contract is tests/virtual/test_runner.py)."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from hil.runner.profiles import PROFILES
from hil.virtual import runner_front
from hil.virtual.executor import WarmExecutor
from hil.virtual.runner import BANNER

from . import TwoInputs

WORKDIR = "/data/local/tmp/t"
TIMING_RE = re.compile(rb"(\d+) inference took (\d+\.\d{6}) ms, avg (\d+\.\d{6}) ms$", re.M)


@dataclass(frozen=True)
class Board:
    fs_root: Path
    workdir: Path
    inputs: tuple[torch.Tensor, torch.Tensor]
    module: TwoInputs

    def outputs(self) -> list[np.ndarray]:
        return [np.fromfile(self.workdir / "out" / f"output_{i}.bin", dtype=np.float32) for i in range(2)]


@pytest.fixture(scope="module")
def lowered() -> tuple[bytes, TwoInputs]:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    module = TwoInputs().eval()
    exported = torch.export.export(module, (torch.randn(2, 4), torch.randn(2, 3)))
    program = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch()
    return program.buffer, module


@pytest.fixture
def board(tmp_path: Path, lowered: tuple[bytes, TwoInputs]) -> Board:
    fs_root = tmp_path / "root"
    workdir = fs_root / WORKDIR.lstrip("/")
    (workdir / "out").mkdir(parents=True)
    (workdir / "model.pte").write_bytes(lowered[0])
    inputs = (torch.randn(2, 4), torch.randn(2, 3))
    for i, tensor in enumerate(inputs):
        (workdir / f"input_{i}.bin").write_bytes(tensor.numpy().tobytes())
    return Board(fs_root, workdir, inputs, lowered[1])


def assert_outputs_match(board: Board, inputs: tuple[torch.Tensor, ...]) -> None:
    with torch.no_grad():
        expected = board.module(*inputs)
    for got, want in zip(board.outputs(), expected, strict=True):
        np.testing.assert_allclose(got, want.numpy().reshape(-1), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------- through the front


@pytest.fixture
def socket_path() -> Iterator[Path]:
    # Short path: unix socket addresses are limited to 108 bytes.
    folder = Path(tempfile.mkdtemp(prefix="hil-exec-"))
    yield folder / "executor.sock"
    shutil.rmtree(folder)


def run_front(socket_path: Path, *argv: str) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, HIL_EXECUTOR_SOCKET=str(socket_path), HIL_DEVICE_CWD=WORKDIR)
    return subprocess.run(
        [sys.executable, "-I", "-S", runner_front.__file__, *argv],
        env=env,
        capture_output=True,
        timeout=60,
    )


@pytest.mark.slow
def test_front_end_to_end_through_warm_executor(board: Board, socket_path: Path) -> None:
    with WarmExecutor(board.fs_root, socket_path) as executor:
        # Sent at once: the request waits for warm-up.
        ok = run_front(socket_path, "--input", "input_0.bin input_1.bin", "--output_path", "out")
        assert ok.returncode == 0, ok.stderr
        assert ok.stderr.startswith(BANNER.encode()) and TIMING_RE.search(ok.stderr)
        assert_outputs_match(board, board.inputs)
        assert executor.wait_warm(0)

        refused = WarmExecutor(board.fs_root, socket_path.with_name("u.sock"), profile=PROFILES["upstream"])
        with refused:
            load = run_front(socket_path.with_name("u.sock"), "--output_path", "out")
        assert load.returncode == -signal.SIGABRT
        assert b"Backend XnnpackBackend is not registered." in load.stderr

        aborted = run_front(socket_path, "--input", "input_0.bin")
        assert aborted.returncode == -signal.SIGABRT
        assert b"Please check the number of given input binary files" in aborted.stderr

        unknown = run_front(socket_path, "--bogus")
        assert unknown.returncode == 1
        assert b"ERROR: unknown command line flag 'bogus'" in unknown.stderr

        runs = 10
        start = time.perf_counter()
        for _ in range(runs):
            assert run_front(socket_path, "--output_path=out").returncode == 0
        per_exec_ms = (time.perf_counter() - start) / runs * 1000
        print(f"\nper-exec wall time through the runner front: {per_exec_ms:.1f} ms")


def test_front_without_vendor_library_dies_by_sigsegv(tmp_path: Path, socket_path: Path) -> None:
    with WarmExecutor(tmp_path, socket_path, vendor_lib=False):
        assert run_front(socket_path, "--help").returncode == -signal.SIGSEGV


def test_front_without_executor_names_the_socket_and_exits_1(socket_path: Path) -> None:
    result = run_front(socket_path)
    assert result.returncode == 1
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and str(socket_path) in lines[0]


@pytest.mark.slow
def test_killed_front_stops_its_run_and_executor_keeps_serving(board: Board, socket_path: Path) -> None:
    with WarmExecutor(board.fs_root, socket_path) as executor:
        executor.wait_warm()
        env = dict(os.environ, HIL_EXECUTOR_SOCKET=str(socket_path), HIL_DEVICE_CWD=WORKDIR)
        long_run = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-S",
                runner_front.__file__,
                "--num_executions=10000000",
                "--output_path=out",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)
        long_run.terminate()
        assert long_run.wait(timeout=10) == -signal.SIGTERM

        start = time.perf_counter()
        assert run_front(socket_path).returncode == 0
        assert time.perf_counter() - start < 10
        assert not (board.workdir / "out" / "output_0.bin").exists()


def test_a_front_killed_mid_run_has_shown_its_progress(board: Board, socket_path: Path) -> None:
    # the real runner's stderr is unbuffered: a runner killed at its deadline has shown its
    # lines up to "Start 1st inference."; the front relays them as they are written
    with WarmExecutor(board.fs_root, socket_path) as executor:
        executor.wait_warm()
        env = dict(os.environ, HIL_EXECUTOR_SOCKET=str(socket_path), HIL_DEVICE_CWD=WORKDIR)
        long_run = subprocess.Popen(
            [sys.executable, "-I", "-S", runner_front.__file__, "--num_executions=10000000",
             "--output_path=out"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        assert long_run.stderr is not None
        seen = b""
        deadline = time.monotonic() + 300  # a hang guard, not a measure: a buffered log never comes
        try:
            while b"Start inference.\n" not in seen:  # the run is now in its N timed runs
                ready, _, _ = select.select([long_run.stderr], [], [], max(0.0, deadline - time.monotonic()))
                assert ready, f"no progress shown while the runner runs: {seen!r}"
                chunk = os.read(long_run.stderr.fileno(), 4096)
                assert chunk, f"the front ended before its progress showed: {seen!r}"
                seen += chunk
        finally:
            long_run.terminate()
            seen += long_run.stderr.read()
            long_run.wait(timeout=30)
    lines = [line.split("] ", 1)[-1] for line in seen.decode().splitlines()]
    assert lines[0] == BANNER
    for marker in ("Model file model.pte is loaded.", "Method loaded.", "Start 1st inference.",
                   "Start inference."):
        assert marker in lines, (marker, lines)
    assert not any("inference took" in line for line in lines)


def test_front_request_is_json_the_executor_decodes() -> None:
    argv = ["--input", 'a "b"\\c\n\t', "é€😀", os.fsdecode(b"\xff\xfe.bin"), ""]
    request = runner_front.encode_request(argv, "/data/local/tmp/ü", 42, ("slow,on=exec,factor=1.2",))
    assert int.from_bytes(request[:4], "big") == len(request) - 4
    decoded = json.loads(request[4:])
    assert decoded == {"argv": argv, "cwd": "/data/local/tmp/ü", "pid": 42, "build": ["slow,on=exec,factor=1.2"]}
    assert os.fsencode(decoded["argv"][3]) == b"\xff\xfe.bin"


_LEAN_IMPORT = """
import sys
import numpy as np
import torch
from hil.virtual.host_runtime import import_runtime
runtime = import_runtime().get()
leaked = sorted(name for name in sys.modules if name.startswith("executorch.exir"))
assert not leaked, leaked
method = runtime.load_program(sys.argv[1]).load_method("forward")
x, y = (torch.from_numpy(np.load(path)) for path in sys.argv[2:4])
print(method.execute([x, y])[0].numpy().tolist())
"""


def test_the_board_imports_the_runtime_without_the_exporter_and_runs_a_program(
    lowered: tuple[bytes, TwoInputs], tmp_path: Path
) -> None:
    """The board's lean import (host_runtime.py) leaves no `executorch.exir` module behind (a
    later import runs the real package) and its runtime computes what the module does."""
    data, module = lowered
    (tmp_path / "m.pte").write_bytes(data)
    x, y = torch.randn(2, 4), torch.randn(2, 3)
    np.save(tmp_path / "x.npy", x.numpy())
    np.save(tmp_path / "y.npy", y.numpy())
    done = subprocess.run(
        [sys.executable, "-c", _LEAN_IMPORT, str(tmp_path / "m.pte"), str(tmp_path / "x.npy"),
         str(tmp_path / "y.npy")], capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    got = np.array(json.loads(done.stdout))
    np.testing.assert_allclose(got, module(x, y)[0].detach().numpy(), rtol=1e-5, atol=1e-6)
