"""The off-host measuring mode (hil/virtual/offhost.py): a program+inputs pair runs on the host
runtime once; later execs write the same bytes and sleep the modelled device time."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import torch

from hil.errors import UsageError
from hil.runner.profiles import PROFILES
from hil.virtual.offhost import OffHost, parse_device_time
from hil.virtual.program_cache import ProgramCache
from hil.virtual.runner import RunnerResult, execute_request

from . import TwoInputs

WORKDIR = "/data/local/tmp/t"
TIMING = re.compile(r"(\d+) inference took (\d+\.\d{6}) ms, avg (\d+\.\d{6}) ms")


@pytest.fixture(scope="module")
def program() -> bytes:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    exported = torch.export.export(TwoInputs().eval(), (torch.randn(2, 4), torch.randn(2, 3)))
    return to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch().buffer


class Board:
    """A board's filesystem and its executor's state: the program cache and the replay store."""

    def __init__(self, root: Path, program: bytes, device_time: str | None) -> None:
        self.root = root
        self.program = program
        self.offhost = OffHost(device_time) if device_time else None
        self.programs = ProgramCache(by_content=self.offhost is not None)
        self.cases = 0

    def run(self, inputs: tuple[torch.Tensor, ...], runs: int = 1) -> tuple[RunnerResult, list[bytes]]:
        """One runner exec in a new case folder (the program pushed again, as hil does)."""
        self.cases += 1
        case = f"c{self.cases}"
        folder = self.root / WORKDIR.lstrip("/") / case
        (folder / "out").mkdir(parents=True)
        (folder / "model.pte").write_bytes(self.program)
        for i, tensor in enumerate(inputs):
            (folder / f"input_{i}.bin").write_bytes(tensor.numpy().tobytes())
        argv = ["--model", "model.pte", "--input", "input_0.bin input_1.bin", "--output_path", "out",
                "--num_executions", str(runs)]
        result = execute_request(argv, f"{WORKDIR}/{case}", fs_root=self.root, profile=PROFILES["hil"],
                                 programs=self.programs, offhost=self.offhost)
        assert result.exit_code == 0, result.stderr.decode()
        return result, [(folder / "out" / f"output_{i}.bin").read_bytes() for i in range(2)]


def test_replayed_outputs_are_the_real_runs_bit_for_bit_and_the_runtime_runs_once_per_pair(
    tmp_path: Path, program: bytes
) -> None:
    torch.manual_seed(1)
    first, second = (torch.randn(2, 4), torch.randn(2, 3)), (torch.randn(2, 4), torch.randn(2, 3))
    real = Board(tmp_path / "real", program, None)
    offhost = Board(tmp_path / "offhost", program, "0")
    want_first, want_second = real.run(first)[1], real.run(second)[1]

    outputs = [offhost.run(first)[1] for _ in range(3)]
    assert outputs == [want_first] * 3
    assert (offhost.offhost.runtime_runs, offhost.offhost.replays) == (1, 2)
    # new inputs: the runtime runs again, then that pair replays too
    assert offhost.run(second)[1] == want_second
    assert offhost.run(second)[1] == want_second
    assert (offhost.offhost.runtime_runs, offhost.offhost.replays) == (2, 3)
    # a replay prints what the runner prints: the same log lines, in order
    lines = [re.sub(r"\d{2}:\d{2}:\d{2}\.\d{6}|\d+\.\d{6}", "T", line)
             for line in offhost.run(first)[0].stderr.decode().splitlines()]
    assert lines == [re.sub(r"\d{2}:\d{2}:\d{2}\.\d{6}|\d+\.\d{6}", "T", line)
                     for line in real.run(first)[0].stderr.decode().splitlines()]


def test_device_time_is_slept_not_spent_on_cpu(tmp_path: Path, program: bytes) -> None:
    board = Board(tmp_path, program, "150")
    inputs = (torch.randn(2, 4), torch.randn(2, 3))
    board.run(inputs)  # the real run
    wall, cpu = time.monotonic(), time.thread_time()
    result, _ = board.run(inputs, runs=5)  # replayed: the 1st run and 5 timed ones, 150 ms each
    wall, cpu = time.monotonic() - wall, time.thread_time() - cpu
    assert board.offhost.replays == 1
    assert wall >= 6 * 0.150
    assert cpu < wall / 3  # a sleep: the CPU is the runner's bookkeeping only
    runs, total, avg = TIMING.search(result.stderr.decode()).groups()
    assert int(runs) == 5 and float(total) >= 5 * 150 and float(avg) >= 150


def test_measured_replays_the_latency_of_the_first_real_run(tmp_path: Path, program: bytes) -> None:
    board = Board(tmp_path, program, "measured")
    inputs = (torch.randn(2, 4), torch.randn(2, 3))
    board.run(inputs, runs=3)
    (replay,) = board.offhost._programs[next(iter(board.offhost._programs))].by_inputs.values()
    assert replay.execution_ms > 0
    result, _ = board.run(inputs, runs=3)
    _, total, avg = TIMING.search(result.stderr.decode()).groups()
    assert float(avg) >= replay.execution_ms and float(total) >= 3 * replay.execution_ms


@pytest.mark.parametrize("text", ["fast", "-1", "nan", ""])
def test_a_bad_device_time_is_a_usage_error_naming_the_option(text: str) -> None:
    with pytest.raises(UsageError, match="--virtual-device-time"):
        parse_device_time(text, "--virtual-device-time")
    assert parse_device_time("measured") == "measured" and parse_device_time("50.0") == "50"


def test_a_full_store_runs_the_host_runtime_again_and_stays_right(tmp_path: Path, program: bytes) -> None:
    # the store is bounded in bytes (a model's outputs are megabytes): past it, a new pair is
    # not kept, and each of its execs runs the host runtime with the same outputs
    torch.manual_seed(2)
    inputs = (torch.randn(2, 4), torch.randn(2, 3))
    want = Board(tmp_path / "real", program, None).run(inputs)[1]
    full = Board(tmp_path / "full", program, "0")
    full.offhost = OffHost("0", max_bytes=8)  # smaller than any pair's inputs
    assert [full.run(inputs)[1] for _ in range(2)] == [want, want]
    assert (full.offhost.runtime_runs, full.offhost.replays) == (2, 0)
