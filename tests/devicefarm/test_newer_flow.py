"""hil's `devicefarm-cli` driven as upstream's newer `EDBTestManager` drives it (ExecuTorch
`backends/samsung/test/utils/runtime_executor.py`, newer than the 1.5.1 wheel): `program.pte`,
the runner and the inputs in one `inputs.tar`, pushed with one `-U`, unpacked and run by one
`-E`, the outputs pulled with one `-D`; every call an argument list (no shell), in a session of
its own, its process group killed at a time limit. The flow's steps are written here in the
project's words (no release ships that file yet)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from hil.devicefarm.session import slug
from hil.virtual.launcher import VirtualBoardProcess
from tests.adb_lab import wait_for
from tests.board_files import aarch64_elf
from tests.devicefarm.conftest import Small, cli_env, df, poll_assigned
from tests.processes import host_pid

pytestmark = pytest.mark.slow

WORKDIR = "/data/local/tmp/enn-executorch-test"
LIMIT_S = 300
"""Upstream's per-call limit (`COMMAND_TIMEOUT_SECONDS`)."""
GONE = "went away before its reply"
"""What the holder logs when a caller leaves before its reply."""


def edb(env: dict[str, str], *args: str, limit_s: float = LIMIT_S) -> subprocess.CompletedProcess[bytes]:
    """One `devicefarm-cli` call as the newer flow makes it: an argument list, a session of its
    own, and at the limit its whole process group killed."""
    process = subprocess.Popen(["devicefarm-cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True, env=env)
    try:
        stdout, stderr = process.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.fixture(scope="module")
def session(cli_path: Path, lab_board: VirtualBoardProcess,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    env = cli_env(cli_path, "ci-newer-flow", lab_board.address, tmp_path_factory.mktemp("sessions"))
    assert df(env, "-Q").returncode == 0
    poll_assigned(env)
    yield env
    df(env, "-d")


def test_the_newer_flow_runs_one_tar_and_one_command_bit_exact(session: dict[str, str], tmp_path: Path) -> None:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime

    torch.manual_seed(0)
    inputs = (torch.randn(1, 3, 8, 8), torch.randn(2, 3))
    program = to_edge_transform_and_lower(torch.export.export(Small().eval(), inputs),
                                          partitioner=[XnnpackPartitioner()]).to_executorch()
    files = tmp_path / "files"
    files.mkdir()
    (files / "program.pte").write_bytes(program.buffer)
    runner = files / "enn_executor_runner"  # what upstream's Android build would bundle
    runner.write_bytes(aarch64_elf(b"aarch64 stand-in"))
    runner.chmod(0o755)
    names = ["program.pte", "enn_executor_runner"]
    for index, tensor in enumerate(inputs):
        tensor.numpy().tofile(files / f"input_{index}.bin")
        names.append(f"input_{index}.bin")
    bundle = files / "inputs.tar"
    with tarfile.open(bundle, "w") as tar:
        for name in names:
            tar.add(files / name, arcname=name, recursive=False)
    output = f"{WORKDIR}/output"
    command = (f"cd {WORKDIR} && tar -xf inputs.tar && mkdir -p {output} && chmod 777 {output} && "
               f'chmod +x ./enn_executor_runner && ./enn_executor_runner --model program.pte '
               f'--input "input_0.bin input_1.bin" --output_path {output}')

    calls = [
        edb(session, "-E", f"rm -rf {WORKDIR} && mkdir -p {WORKDIR}"),
        edb(session, "-U", str(bundle), WORKDIR),
        edb(session, "-E", command),
        edb(session, "-D", output, str(tmp_path / "output")),
    ]
    for call in calls:
        assert call.returncode == 0, (call.args, call.stdout, call.stderr)

    expected = Runtime.get().load_program(program.buffer).load_method("forward").execute(list(inputs))
    pulled = sorted((tmp_path / "output" / "output").iterdir())
    assert [path.name for path in pulled] == ["output_0.bin", "output_1.bin"]
    for path, want in zip(pulled, expected, strict=True):
        got = torch.from_numpy(np.fromfile(path, dtype=np.uint8)).view(want.dtype).reshape(want.shape)
        assert torch.equal(got.view(torch.int32), want.view(torch.int32))  # bit for bit


def _pid_on_board(board: VirtualBoardProcess, name: str) -> int:
    """The PID a command wrote into WORKDIR/NAME on the board (read through the board's root),
    once it is there."""
    path = board.root / "fs" / WORKDIR.lstrip("/") / name
    wait_for(lambda: path.is_file() and path.read_text().strip().isdigit(), 60.0, f"{name} on the board")
    return int(path.read_text())


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def test_a_killed_command_is_stopped_on_the_board_and_the_next_one_runs(
    session: dict[str, str], lab_board: VirtualBoardProcess,
) -> None:
    """Upstream kills `devicefarm-cli -E`'s process group at its limit: the holder stops the
    command on the board (its whole session, a runner under `timeout` included) and serves the
    next request at once, instead of running it on to HIL_DEVICEFARM_TIMEOUT_S."""
    assert edb(session, "-E", f"rm -rf {WORKDIR} && mkdir -p {WORKDIR}").returncode == 0
    # the board numbers its processes in its own pid namespace: the runner's host pid is found there
    namespace = edb(session, "-E", "readlink /proc/self/ns/pid").stdout.decode().strip()
    hung = subprocess.Popen(
        ["devicefarm-cli", "-E", f"timeout 600 sh -c 'echo $$ > {WORKDIR}/runner.pid; exec sleep 600'"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, env=session)
    runner: list[int] = []
    try:
        runner.append(host_pid(namespace, _pid_on_board(lab_board, "runner.pid")))
        queued = subprocess.Popen(["devicefarm-cli", "-E", "echo served"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, start_new_session=True, env=session)
        os.killpg(hung.pid, signal.SIGKILL)  # as upstream does at its limit
        hung.communicate()
        stdout, stderr = queued.communicate(timeout=120)  # not behind a command left running
        assert (queued.returncode, stdout) == (0, b"served\n"), stderr
        wait_for(lambda: _gone(runner[0]), 30.0, f"the runner (pid {runner[0]}) to be stopped on the board")
    finally:
        for pid in runner:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(hung.pid, signal.SIGKILL)


def test_a_request_whose_caller_went_away_before_its_turn_never_runs(
    session: dict[str, str], lab_board: VirtualBoardProcess,
) -> None:
    assert edb(session, "-E", f"rm -rf {WORKDIR} && mkdir -p {WORKDIR}").returncode == 0
    first = subprocess.Popen(["devicefarm-cli", "-E", f"echo $$ > {WORKDIR}/first.pid; sleep 600"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, env=session)
    _pid_on_board(lab_board, "first.pid")
    dropped_command = f"touch {WORKDIR}/dropped-ran"
    dropped = subprocess.Popen(["devicefarm-cli", "-E", dropped_command], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True, env=session)
    holder_log = Path(session["HIL_DEVICEFARM_DIR"]) / slug(session["HIL_DEVICEFARM_SESSION"]) / "holder.log"
    try:
        wait_for(lambda: dropped_command in holder_log.read_text(), 60.0, "the holder to queue the request")
        gone_before = holder_log.read_text().count(GONE)
        os.killpg(dropped.pid, signal.SIGKILL)
        dropped.communicate()
        wait_for(lambda: holder_log.read_text().count(GONE) > gone_before, 60.0, "the holder to see the caller gone")
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate()
        after = edb(session, "-E", "echo served", limit_s=120)
        assert (after.returncode, after.stdout) == (0, b"served\n"), after.stderr
        assert not (lab_board.root / "fs" / WORKDIR.lstrip("/") / "dropped-ran").exists()
    finally:
        for process in (first, dropped):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
