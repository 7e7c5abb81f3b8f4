"""The virtual enn_executor_runner against upstream's contract: real ExecuTorch programs run
in-process (`execute_request`), every line, exit code and file checked against what
`examples/samsung/executor_runner/enn_executor_runner.cpp` prints and writes."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from hil.runner.contract import Stage, board_fault, parse_log
from hil.runner.profiles import PROFILES
from hil.runner.pte import read_program_file
from hil.virtual.runner import BANNER, RunnerFaults, RunnerResult, execute_request

from . import TwoInputs

pytestmark = pytest.mark.slow  # lowering the programs takes ~20 s once per module

WORKDIR = "/data/local/tmp/t"
ET_LOG = r"(?P<level>[IEF]) \d{2}:\d{2}:\d{2}\.\d{6} executorch:(?P<where>[\w.]+:\d+)\] (?P<message>.*)"
"""posix.cpp's et_pal_emit_log_message: `%c %02u:%02u:%02u.%06lu executorch:%s:%zu] %s`."""
TIMING = re.compile(r"(\d+) inference took (\d+\.\d{6}) ms, avg (\d+\.\d{6}) ms")
"""enn_executor_runner.cpp:359: `"%d inference took %f ms, avg %f ms"`."""


class Counter(torch.nn.Module):
    """Counts its executions in a mutable buffer: the output after one invocation says how
    many times the runner executed the method (the state lives in the loaded method)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1.0)
        return x * 0.0 + self.calls


class Lookup(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(4, 2)

    def forward(self, index: torch.Tensor) -> torch.Tensor:
        return self.embedding(index)


def _lower(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], partitioner: list, method: str = "forward",
           quantize: bool = False) -> bytes:
    import executorch.kernels.quantized  # noqa: F401 - quantized out variants for A8W8
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    if quantize:
        from hil.lower.quantize import quantize_a8w8

        module = quantize_a8w8(module, inputs, [inputs], True)
    exported = torch.export.export(module, inputs)
    program = to_edge_transform_and_lower({method: exported}, partitioner=partitioner)
    # the Counter's buffer starts at 0 (ExecuTorch leaves mutable buffers uninitialised otherwise)
    config = ExecutorchBackendConfig(passes=[InitializedMutableBufferPass(["calls"])])
    return program.to_executorch(config).buffer


@dataclass(frozen=True)
class Programs:
    xnnpack: bytes
    """TwoInputs, XNNPACK-delegated."""
    counter: bytes
    """Counter, portable kernels only."""
    a8w8: bytes
    """TwoInputs' linear quantized A8W8, portable + quantized kernels."""
    encode: bytes
    """Counter whose only method is called `encode`."""
    lookup: bytes
    """Lookup (embedding), portable."""
    module: TwoInputs


@pytest.fixture(scope="module")
def programs() -> Programs:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    torch.manual_seed(0)
    module = TwoInputs().eval()
    two = (torch.randn(2, 4), torch.randn(2, 3))
    linear = torch.nn.Sequential(torch.nn.Linear(4, 3)).eval()
    return Programs(
        xnnpack=_lower(module, two, [XnnpackPartitioner()]),
        counter=_lower(Counter(), (torch.ones(2),), []),
        a8w8=_lower(linear, (torch.randn(2, 4),), [], quantize=True),
        encode=_lower(Counter(), (torch.ones(2),), [], method="encode"),
        lookup=_lower(Lookup().eval(), (torch.tensor([1, 2]),), []),
        module=module,
    )


@dataclass(frozen=True)
class Board:
    fs_root: Path
    workdir: Path

    def run(self, *argv: str, profile: str = "hil", vendor_lib: bool = True,
            faults: RunnerFaults | None = None) -> RunnerResult:
        result = execute_request(list(argv), WORKDIR, fs_root=self.fs_root, profile=PROFILES[profile],
                                 vendor_lib=vendor_lib, faults=faults)
        assert result.stderr.startswith(BANNER.encode() + b"\n")
        return result

    def put(self, name: str, data: bytes) -> None:
        (self.workdir / name).write_bytes(data)

    def output(self, index: int, dtype: type = np.float32) -> np.ndarray:
        return np.fromfile(self.workdir / "out" / f"output_{index}.bin", dtype=dtype)


@pytest.fixture
def board(tmp_path: Path, programs: Programs) -> Board:
    fs_root = tmp_path / "root"
    workdir = fs_root / WORKDIR.lstrip("/")
    (workdir / "out").mkdir(parents=True)
    result = Board(fs_root, workdir)
    result.put("model.pte", programs.xnnpack)
    result.put("counter.pte", programs.counter)
    result.put("a8w8.pte", programs.a8w8)
    result.put("encode.pte", programs.encode)
    result.put("lookup.pte", programs.lookup)
    return result


def lines(result: RunnerResult) -> list[tuple[str, str, str]]:
    """(level, file:line, message) of every ET_LOG line of the runner's stderr."""
    found = []
    for line in result.stderr.decode().splitlines()[1:]:
        match = re.fullmatch(ET_LOG, line)
        assert match, f"not an ET_LOG line: {line!r}"
        found.append((match["level"], match["where"], match["message"]))
    return found


@pytest.mark.parametrize(("runs", "warmups"), [(1, 0), (5, 2)])
def test_order_of_work_lines_timing_and_statistics_are_upstreams(board: Board, runs: int, warmups: int) -> None:
    result = board.run("--model", "counter.pte", "--output_path", "out", "--num_executions", str(runs),
                       "--warm_up", str(warmups), "--dump_statistics")
    assert (result.exit_code, result.signal) == (0, None), result.stderr
    logged = lines(result)
    timing = logged[-1]
    # the runner's own lines, in upstream's order and at upstream's source lines
    assert [(level, where, message) for level, where, message in logged[:-1]] == [
        ("I", "enn_executor_runner.cpp:175", "Model file counter.pte is loaded."),
        ("I", "enn_executor_runner.cpp:184", "Using method forward"),
        *[("I", "enn_executor_runner.cpp:231", m) for _, _, m in logged[2:-6]],
        ("I", "enn_executor_runner.cpp:262", "Method loaded."),
        ("I", "enn_executor_runner.cpp:285", "Input list not provided. Inputs prepared with default values set."),
        ("I", "enn_executor_runner.cpp:317", f"Perform {warmups} inference for warming up"),
        ("I", "enn_executor_runner.cpp:324", "Start 1st inference."),
        ("I", "enn_executor_runner.cpp:334", "Start inference."),
    ]
    assert all(re.fullmatch(r"Setting up planned buffer \d+, size \d+\.", m) for _, _, m in logged[2:-6])
    assert timing[:2] == ("I", "enn_executor_runner.cpp:359")
    match = TIMING.fullmatch(timing[2])
    assert match, timing
    count, total, avg = int(match[1]), float(match[2]), float(match[3])
    assert count == runs  # the timing line covers the N runs only, not the 1st
    assert avg == pytest.approx(total / runs, abs=2e-6)
    # the output comes from the last of warm-ups + the 1st run + N runs
    assert board.output(0).tolist() == [float(warmups + 1 + runs)] * 2
    # statistics.txt: four %f lines in the current folder, avg over the 1st and the N runs
    text = (board.workdir / "statistics.txt").read_text()
    assert re.fullmatch(r"init: \d+\.\d{6}\nload: \d+\.\d{6}\n1st: \d+\.\d{6}\navg: \d+\.\d{6}\n", text), text
    stats = dict(line.split(": ") for line in text.splitlines())
    assert float(stats["avg"]) == pytest.approx((float(stats["1st"]) + total) / (runs + 1), abs=2e-6)
    log = parse_log(result.stderr.decode())
    assert (log.stage, log.method, log.timing, log.fatal) == (Stage.TIMED, "forward", (runs, total, avg), None)


def test_outputs_are_raw_bytes_of_method_0(board: Board, programs: Programs) -> None:
    inputs = (torch.randn(2, 4), torch.randn(2, 3))
    for i, tensor in enumerate(inputs):
        board.put(f"input_{i}.bin", tensor.numpy().tobytes())
    result = board.run("--input", "input_0.bin input_1.bin", "--output_path=out")
    assert result.exit_code == 0, result.stderr
    with torch.no_grad():
        expected = programs.module(*inputs)
    np.testing.assert_allclose(board.output(0), expected[0].numpy().ravel(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(board.output(1), expected[1].numpy().ravel(), rtol=1e-5, atol=1e-5)


def test_method_0_runs_whatever_its_name(board: Board) -> None:
    result = board.run("--model", "encode.pte", "--output_path", "out")
    assert result.exit_code == 0, result.stderr
    assert ("I", "enn_executor_runner.cpp:184", "Using method encode") in lines(result)


def test_without_input_inputs_are_zero_filled(board: Board) -> None:
    assert board.run("--output_path", "out").exit_code == 0
    assert board.output(0).tolist() == [0.0] * 6  # relu(bias) * 0
    assert board.output(1).tolist() == [0.0]


def test_nothing_written_without_output_path(board: Board) -> None:
    assert board.run().exit_code == 0
    assert list((board.workdir / "out").iterdir()) == []
    assert not (board.workdir / "statistics.txt").exists()


def test_missing_model_aborts_in_the_file_loader(board: Board) -> None:
    result = board.run("--model", "missing.pte")
    assert (result.exit_code, result.signal, result.shell_status) == (None, signal.SIGABRT, 134)
    level, where, message = lines(result)[-1]
    assert (level, where) == ("F", "enn_executor_runner.cpp:163")
    assert message == "In function main(), assert failed (loader.ok()): FileDataLoader::from() failed: 0x22"
    assert parse_log(result.stderr.decode()).reason.startswith("FileDataLoader::from() failed: 0x22 (AccessFailed)")


def test_program_that_does_not_parse_exits_1(board: Board) -> None:
    board.put("bad.pte", b"not a flatbuffer" * 8)
    result = board.run("--model=bad.pte")
    assert (result.exit_code, result.signal) == (1, None)
    assert lines(result) == [("E", "enn_executor_runner.cpp:172", "Failed to parse model file bad.pte")]
    assert str(board.fs_root).encode() not in result.stderr


def test_upstream_profile_refuses_an_xnnpack_delegate_at_load(board: Board) -> None:
    result = board.run("--output_path", "out", profile="upstream")
    assert result.shell_status == 134
    assert lines(result)[-2:] == [
        ("E", "method.cpp:85", "Backend XnnpackBackend is not registered."),
        ("F", "enn_executor_runner.cpp:257",
         "In function main(), assert failed (method.ok()): Loading of method forward failed with status 0x20"),
    ]
    log = parse_log(result.stderr.decode())
    assert log.stage is Stage.PROGRAM_LOADED and log.status == 0x20
    assert board.run("--output_path", "out", profile="hil").exit_code == 0


def test_upstream_profile_refuses_quantized_kernels_at_load(board: Board) -> None:
    result = board.run("--model", "a8w8.pte", "--output_path", "out", profile="upstream")
    assert result.shell_status == 134
    logged = lines(result)
    missing = [m for level, where, m in logged if where == "method.cpp:822"]
    assert missing and all(re.fullmatch(r"Missing operator: \[\d+\] quantized_decomposed::\w+\.\w+", m)
                           for m in missing)
    # one line per KernelCall instruction (method.cpp), not per distinct operator
    info = read_program_file(board.workdir / "a8w8.pte")
    assert missing == [f"Missing operator: [{i}] {info.operators[i]}" for i in info.kernel_calls
                       if info.operators[i].startswith("quantized_decomposed::")]
    assert len(missing) > len(set(missing))
    assert logged[-2][2].startswith(f"There are {len(missing)} instructions don't have corresponding operator")
    assert logged[-1][2].endswith("Loading of method forward failed with status 0x14")
    assert "OperatorMissing" in parse_log(result.stderr.decode()).reason
    assert board.run("--model", "a8w8.pte", "--output_path", "out", profile="hil").exit_code == 0


def test_upstream_profile_runs_a_portable_fp32_program_as_the_hil_profile_does(board: Board) -> None:
    (board.workdir / "upstream").mkdir()  # the runner writes into an existing folder, as upstream's
    upstream = board.run("--model", "counter.pte", "--output_path", "upstream", profile="upstream")
    assert (upstream.exit_code, upstream.signal) == (0, None), upstream.stderr
    outputs = np.fromfile(board.workdir / "upstream" / "output_0.bin", dtype=np.float32).tolist()
    ours = board.run("--model", "counter.pte", "--output_path", "out", profile="hil")
    assert (ours.exit_code, ours.signal) == (0, None), ours.stderr
    assert outputs == board.output(0).tolist() == [2.0, 2.0]  # the 1st run and 1 timed run
    # the same order of work at the same upstream source lines, only the timing's figures differ
    assert [entry[:2] for entry in lines(upstream)] == [entry[:2] for entry in lines(ours)]
    assert [m for _, _, m in lines(upstream)[:-1]] == [m for _, _, m in lines(ours)[:-1]]


def test_failed_execution_aborts_after_the_timing_line(board: Board) -> None:
    board.put("bad_index.bin", np.array([1, 9], dtype=np.int64).tobytes())  # 9 >= 4 embeddings
    result = board.run("--model", "lookup.pte", "--input", "bad_index.bin", "--output_path", "out")
    assert result.shell_status == 134
    logged = lines(result)
    assert TIMING.fullmatch(logged[-2][2])  # the line comes first, then the status check
    assert logged[-1][:2] == ("F", "enn_executor_runner.cpp:365")
    assert re.fullmatch(r"In function main\(\), assert failed \(status == Error::Ok\): "
                        r"Execution of method forward failed with status 0x[0-9a-f]+", logged[-1][2])
    assert not (board.workdir / "out" / "output_0.bin").exists()
    assert parse_log(result.stderr.decode()).stage is Stage.TIMED


def test_input_checks_abort_as_upstream(board: Board) -> None:
    board.put("input_0.bin", torch.randn(2, 4).numpy().tobytes())
    board.put("short.bin", b"\0" * 20)
    count = board.run("--input", "input_0.bin")
    assert count.shell_status == 134 and lines(count)[-1][:2] == ("F", "enn_executor_runner.cpp:289")
    assert "Please check the number of given input binary files" in lines(count)[-1][2]
    size = board.run("--input", "input_0.bin short.bin")
    assert size.shell_status == 134 and lines(size)[-1][2].endswith("Given inputs size is invalid")
    missing = board.run("--input", "input_0.bin nope.bin")
    assert lines(missing)[-1] == ("F", "enn_executor_runner.cpp:73",
                                  "In function read(), assert failed: input_file.is_open()")
    for result in (count, size, missing):
        assert parse_log(result.stderr.decode()).stage is Stage.METHOD_LOADED


def test_unwritable_output_folder_aborts_in_save_output(board: Board) -> None:
    for result in (board.run("--output_path", "no_such_dir"),
                   board.run("--output_path", "out", faults=RunnerFaults(outputs_unwritable=True))):
        assert result.shell_status == 134
        level, where, message = lines(result)[-1]
        assert (level, where) == ("F", "enn_executor_runner.cpp:113")
        assert message.startswith("In function saveOutput(), assert failed (fout.is_open()): "
                                  "Directory or have no visit permission: ")


def test_crash_fault_dies_while_executing(board: Board) -> None:
    result = board.run("--output_path", "out", faults=RunnerFaults(crash_signal=signal.SIGSEGV))
    assert (result.signal, result.shell_status) == (signal.SIGSEGV, 139)
    assert lines(result)[-1][2] == "Start 1st inference."
    assert parse_log(result.stderr.decode()).stage is Stage.FIRST_INFERENCE


def test_flags_are_parsed_as_gflags_does(board: Board, tmp_path: Path) -> None:
    unknown = board.run("--bogus=3")
    assert (unknown.exit_code, unknown.signal) == (1, None)
    assert b"ERROR: unknown command line flag 'bogus'\n" in unknown.stderr
    extra = board.run("stray", "more")
    assert extra.exit_code == 1
    assert lines(extra) == [("E", "enn_executor_runner.cpp:154", "Extra commandline args: stray more")]
    negative = board.run("--num_executions=-1")  # DEFINE_uint32
    assert negative.exit_code == 1
    assert b"illegal value '-1' specified for uint32 flag 'num_executions'" in negative.stderr
    assert board.run("--model").exit_code == 1
    for flag, written in (("-dump_statistics", True), ("--dump_statistics=1", True),
                          ("--nodump_statistics", False)):
        (board.workdir / "statistics.txt").unlink(missing_ok=True)
        assert board.run(flag).exit_code == 0
        assert (board.workdir / "statistics.txt").exists() == written


def test_without_vendor_library_enn_says_so_twice_then_it_segfaults_before_anything(board: Board) -> None:
    # enn_api_implementation.cpp: ET_LOG "Lib load failed." (68), ENN_LOG_ERROR "Failed to load
    # enn api library. <dlerror>" (47, logging.cpp's format), then EnnInitialize is null
    for argv in (["--help"], ["--bogus"], []):
        result = board.run(*argv, vendor_lib=False)
        assert (result.exit_code, result.signal, result.shell_status) == (None, signal.SIGSEGV, 139)
        lines = result.stderr.decode().splitlines()
        assert lines[0] == BANNER and len(lines) == 3
        assert re.fullmatch(r"E \d\d:\d\d:\d\d\.\d{6} executorch:enn_api_implementation\.cpp:68\] "
                            r"Lib load failed\.", lines[1])
        assert lines[2] == ('[ERROR][Exynos ExecuTorch]Failed to load enn api library. dlopen failed: '
                            'library "libenn_public_api_cpp.so" not found')
        assert "board is not usable for ENN" in board_fault(parse_log(result.stderr.decode()), 139)


def test_paths_escaping_fs_root_are_missing_files(board: Board, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "model.pte").write_bytes((board.workdir / "model.pte").read_bytes())
    (board.workdir / "evil.pte").symlink_to(outside / "model.pte")
    (board.workdir / "evil_out").symlink_to(outside)
    # ".." stops at the device root: fs_root/model.pte, which does not exist
    assert board.run("--model", "../../../../../../../model.pte").shell_status == 134
    assert board.run("--model", "evil.pte").shell_status == 134
    assert board.run("--output_path", "evil_out").shell_status == 134
    assert not (outside / "output_0.bin").exists()
