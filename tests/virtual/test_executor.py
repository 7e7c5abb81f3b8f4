"""The virtual enn_executor_runner: a real ExecuTorch program run through the warm executor."""

from __future__ import annotations

import json
import os
import re
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

from hil.virtual import runner_front
from hil.virtual.executor import BANNER, RunnerResult, WarmExecutor, execute_request

WORKDIR = "/data/local/tmp/t"
TIMING_RE = re.compile(rb"^(\d+) inference took (\d+\.\d{6}) ms, avg (\d+\.\d{6}) ms$", re.M)


class TwoInputs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.relu(self.linear(x)) * y, x.sum()


@dataclass(frozen=True)
class Lowered:
    pte: bytes
    module: TwoInputs


@dataclass(frozen=True)
class Board:
    fs_root: Path
    workdir: Path
    inputs: tuple[torch.Tensor, torch.Tensor]
    module: TwoInputs

    def run(self, *argv: str, vendor_lib: bool = True) -> RunnerResult:
        result = execute_request(list(argv), WORKDIR, fs_root=self.fs_root, vendor_lib=vendor_lib)
        assert result.stderr.startswith(BANNER.encode() + b"\n")
        return result

    def outputs(self) -> list[np.ndarray]:
        return [np.fromfile(self.workdir / "out" / f"output_{i}.bin", dtype=np.float32) for i in range(2)]


@pytest.fixture(scope="module")
def lowered() -> Lowered:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    module = TwoInputs().eval()
    exported = torch.export.export(module, (torch.randn(2, 4), torch.randn(2, 3)))
    program = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch()
    return Lowered(program.buffer, module)


@pytest.fixture
def board(tmp_path: Path, lowered: Lowered) -> Board:
    fs_root = tmp_path / "root"
    workdir = fs_root / WORKDIR.lstrip("/")
    (workdir / "out").mkdir(parents=True)
    (workdir / "model.pte").write_bytes(lowered.pte)
    inputs = (torch.randn(2, 4), torch.randn(2, 3))
    for i, tensor in enumerate(inputs):
        (workdir / f"input_{i}.bin").write_bytes(tensor.numpy().tobytes())
    return Board(fs_root, workdir, inputs, lowered.module)


def assert_outputs_match(board: Board, inputs: tuple[torch.Tensor, ...]) -> None:
    with torch.no_grad():
        expected = board.module(*inputs)
    for got, want in zip(board.outputs(), expected, strict=True):
        np.testing.assert_allclose(got, want.numpy().reshape(-1), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_outputs_written_as_raw_bytes_match_eager_torch(board: Board) -> None:
    result = board.run("--model", "model.pte", "--input", "input_0.bin input_1.bin", "--output_path=out")
    assert (result.exit_code, result.signal, result.shell_status) == (0, None, 0)
    assert_outputs_match(board, board.inputs)


@pytest.mark.slow
def test_without_input_flag_inputs_are_ones(board: Board) -> None:
    result = board.run("--output_path", "/data/local/tmp/t/out")
    assert result.exit_code == 0
    assert_outputs_match(board, (torch.ones(2, 4), torch.ones(2, 3)))


@pytest.mark.slow
def test_nothing_written_without_output_path(board: Board) -> None:
    assert board.run().exit_code == 0
    assert list((board.workdir / "out").iterdir()) == []
    assert not (board.workdir / "statistics.txt").exists()


@pytest.mark.slow
def test_timing_line_counts_timed_runs_and_avg_excludes_the_first(board: Board) -> None:
    result = board.run("--num_executions=4", "--warm_up", "2")
    match = TIMING_RE.search(result.stderr)
    assert match, result.stderr
    count, total, avg = int(match[1]), float(match[2]), float(match[3])
    assert count == 4
    assert 0 < avg <= total


@pytest.mark.slow
def test_single_execution_avg_is_that_run(board: Board) -> None:
    match = TIMING_RE.search(board.run().stderr)
    assert match and match[1] == b"1" and match[2] == match[3]


@pytest.mark.slow
def test_dump_statistics_writes_four_ms_lines_in_the_current_folder(board: Board) -> None:
    result = board.run("--dump_statistics", "--num_executions", "3", "--output_path=out")
    assert result.exit_code == 0
    lines = (board.workdir / "statistics.txt").read_text().splitlines()
    assert [line.split(": ")[0] for line in lines] == ["init", "load", "1st", "avg"]
    assert all(re.fullmatch(r"\w+: \d+\.\d{6}", line) for line in lines), lines
    assert not (board.workdir / "out" / "statistics.txt").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("flag", "written"),
    [
        ("-dump_statistics", True),
        ("--dump_statistics=true", True),
        ("--dump_statistics=1", True),
        ("--dump_statistics=false", False),
        ("--nodump_statistics", False),
    ],
)
def test_bool_flag_forms(board: Board, flag: str, written: bool) -> None:
    assert board.run(flag).exit_code == 0
    assert (board.workdir / "statistics.txt").exists() == written


@pytest.mark.slow
def test_wrong_input_count_aborts(board: Board) -> None:
    result = board.run("--input", "input_0.bin")
    assert (result.exit_code, result.signal, result.shell_status) == (None, signal.SIGABRT, 134)
    assert b"assert failed" in result.stderr
    assert b"Please check the number of given input binary files" in result.stderr


@pytest.mark.slow
def test_wrong_input_size_aborts(board: Board) -> None:
    (board.workdir / "input_1.bin").write_bytes(b"\0" * 20)
    result = board.run("--input", "input_0.bin input_1.bin")
    assert result.signal == signal.SIGABRT
    assert b"Given inputs size is invalid" in result.stderr


@pytest.mark.slow
def test_missing_input_file_aborts(board: Board) -> None:
    assert board.run("--input", "input_0.bin nope.bin").signal == signal.SIGABRT


@pytest.mark.slow
def test_missing_output_folder_aborts(board: Board) -> None:
    result = board.run("--output_path", "no_such_dir")
    assert result.signal == signal.SIGABRT
    assert b"no_such_dir" in result.stderr


@pytest.mark.slow
def test_corrupt_or_missing_program_exits_1(board: Board) -> None:
    (board.workdir / "bad.pte").write_bytes(b"not a flatbuffer" * 8)
    for model in ("bad.pte", "missing.pte"):
        result = board.run(f"--model={model}")
        assert (result.exit_code, result.signal) == (1, None)
        assert f"Failed to parse model file {model}".encode() in result.stderr
        assert str(board.fs_root).encode() not in result.stderr


@pytest.mark.slow
def test_paths_escaping_fs_root_are_missing_files(board: Board, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "model.pte").write_bytes((board.workdir / "model.pte").read_bytes())
    (outside / "input_1.bin").write_bytes((board.workdir / "input_1.bin").read_bytes())
    (board.workdir / "evil.pte").symlink_to(outside / "model.pte")
    (board.workdir / "evil_1.bin").symlink_to(outside / "input_1.bin")
    (board.workdir / "evil_out").symlink_to(outside)

    # ".." stops at the device root: this is fs_root/model.pte, which does not exist.
    assert board.run("--model", "../../../../../../../model.pte").exit_code == 1
    assert board.run("--model", "evil.pte").exit_code == 1
    assert board.run("--input", "input_0.bin evil_1.bin").signal == signal.SIGABRT
    assert board.run("--output_path", "evil_out").signal == signal.SIGABRT
    assert not (outside / "output_0.bin").exists()


def test_unknown_flag_and_extra_args_exit_1(tmp_path: Path) -> None:
    result = execute_request(["--bogus=3"], "/", fs_root=tmp_path)
    assert (result.exit_code, result.signal) == (1, None)
    assert b"ERROR: unknown command line flag 'bogus'\n" in result.stderr
    assert execute_request(["stray"], "/", fs_root=tmp_path).exit_code == 1
    assert execute_request(["--num_executions=x"], "/", fs_root=tmp_path).exit_code == 1
    assert execute_request(["--model"], "/", fs_root=tmp_path).exit_code == 1


def test_without_vendor_library_segfaults_before_parsing_flags(tmp_path: Path) -> None:
    for argv in (["--help"], ["--bogus"], []):
        result = execute_request(argv, "/", fs_root=tmp_path, vendor_lib=False)
        assert (result.exit_code, result.signal, result.shell_status) == (None, signal.SIGSEGV, 139)
        assert result.stderr.startswith(BANNER.encode())


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


def test_front_request_is_json_the_executor_decodes() -> None:
    argv = ["--input", 'a "b"\\c\n\t', "é€😀", os.fsdecode(b"\xff\xfe.bin"), ""]
    request = runner_front.encode_request(argv, "/data/local/tmp/ü", 42)
    assert int.from_bytes(request[:4], "big") == len(request) - 4
    decoded = json.loads(request[4:])
    assert decoded == {"argv": argv, "cwd": "/data/local/tmp/ü", "pid": 42}
    assert os.fsencode(decoded["argv"][3]) == b"\xff\xfe.bin"
