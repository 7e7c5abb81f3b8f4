"""A case's measurements through the real adb path on the virtual board: every metric of
`latency_ms`, the program's memory and the runner's peak RSS (`time -v`), the board's state,
and what a `slow,on=exec` or a `hot` fault does to them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hil.board.adb import AdbBoard
from hil.board.commands import device_command
from hil.board.invocation import INVOCATION_MARKER, SHELL_REQUEST_BUDGET
from hil.board.preflight import VIRTUAL_RUNNER
from hil.cases import load_suite
from hil.latency_plan import NoiseControl
from hil.lower.build import build_artifact
from hil.runner.pte import read_program_file

pytestmark = pytest.mark.slow  # a lowering and a dozen runner invocations


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory):
    case = next(c for c in load_suite("smoke") if c.id == "linear")
    return build_artifact(case, "xnnpack", "E9955", tmp_path_factory.mktemp("latency") / "linear")


@pytest.fixture
def board(board_device, virtual_board) -> Iterator[AdbBoard]:
    board = AdbBoard("metrics", virtual_board.address, board_device, "metrics-run", VIRTUAL_RUNNER, 60)
    board.prepare()
    yield board
    virtual_board.control("fault clear", applied_within=30)
    board.cleanup()


def test_a_case_has_every_metric_with_the_runners_meaning(board, artifact, tmp_path: Path) -> None:
    assert board.measures_rss  # the virtual board's `time -v`
    execution = board.run(artifact, "c0", iterations=6, warmup=2)
    assert execution.exit_code == 0, execution.stderr
    latency = execution.latency_ms
    for key in ("init", "load", "first", "p50", "p90", "p99", "mean", "trimmed", "std", "cv"):
        assert isinstance(latency[key], float), key
    assert latency["n"] == len(latency["samples"]) == 6 and latency["warmup"] == 2
    assert latency["min"] <= latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["max"]
    assert latency["unstable"] in (True, False) and latency["cv_limit"] == 0.10
    info = read_program_file(artifact.pte)
    memory = execution.memory
    assert memory["planned_bytes"] == sum(info.planned_buffers) > 0
    assert memory["delegate_bytes"] > 0  # the XNNPACK payload, weights included
    assert memory["program_bytes"] == memory["planned_bytes"] + memory["constant_bytes"] + memory["delegate_bytes"]
    assert memory["peak_rss_kib"] > 10_000  # the process that ran it: the host runtime is in it
    assert execution.stderr.count("Max RSS (KiB): ") == 6
    state = execution.board_state
    assert state["hottest_c"] == 38.0 and state["cooldown"]["waited_s"] == 0
    assert state["cpufreq"]["policy0"]["governor"] == "schedutil"


def test_a_slow_runner_grows_every_sample_by_the_delay(board, virtual_board, artifact, tmp_path: Path) -> None:
    virtual_board.control("fault slow,on=exec,delay=0.02", applied_within=30)
    execution = board.run(artifact, "c1", iterations=3, warmup=0)
    assert execution.exit_code == 0, execution.stderr
    assert min(execution.latency_ms["samples"]) >= 20.0
    assert execution.latency_ms["first"] >= 20.0


def test_a_hot_board_that_does_not_cool_makes_the_case_unstable(
    board, virtual_board, artifact, tmp_path: Path
) -> None:
    virtual_board.control("fault hot,temp=75,seconds=0", applied_within=30)
    noise = NoiseControl(cooldown_c=45.0, cooldown_max_s=1, cv_limit=10.0)  # only the heat counts
    execution = board.run(artifact, "c2", iterations=2, warmup=0, noise=noise)
    assert execution.exit_code == 0, execution.stderr
    assert execution.board_state["cooldown"] == {
        "threshold_c": 45.0, "max_wait_s": 1, "waited_s": 1, "start_c": 75.0, "end_c": 75.0,
        "cooled": False}
    assert execution.latency_ms["unstable"] is True
    assert execution.latency_ms["unstable_reasons"] == [
        "board still at 75 °C after waiting 1 s (cool-down threshold 45 °C)"]


def test_a_thousand_invocations_fit_one_shell_request(board, artifact, tmp_path: Path) -> None:
    """`--iterations 1000` unrolled was a 600 KB command, past the adb server's 64 KiB service
    request (`AdbError: closed`, ERROR_INFRA, a healthy board quarantined): the run shell now
    loops on the board, one latency sample per invocation still. The run below has 200: past
    the budget unrolled as well, at a fifth of a thousand invocations' minute of CPU."""
    chain = board.run_chain("/data/local/tmp/x", ["a.bin"], 1000, 0, NoiseControl())
    assert len(device_command(*chain)) < SHELL_REQUEST_BUDGET
    looped = board.run_chain(f"{board.workdir}/c200", [f"{board.workdir}/c200/input_0.bin"], 200, 0,
                             NoiseControl())
    assert looped[-1][:2] == ["sh", "-c"]  # 200 unrolled would not fit either
    execution = board.run(artifact, "c200", iterations=200, warmup=0)
    assert execution.exit_code == 0, execution.stderr[-2000:]
    assert execution.latency_ms["n"] == len(execution.latency_ms["samples"]) == 200
    assert execution.stderr.count(INVOCATION_MARKER) == 200
    assert board.shell(["true"]).returncode == 0  # the board is fine afterwards


def test_a_failing_invocation_ends_a_looped_run_with_its_status(board, artifact, tmp_path: Path,
                                                                 virtual_board) -> None:
    """The loop stops at the first invocation that fails and passes its exit status on, as the
    unrolled `&&` chain does."""
    case_dir = f"{board.workdir}/c40"  # the folder board.run uses: the chain is looped there
    looped = board.run_chain(case_dir, [f"{case_dir}/input_0.bin"], 40, 0, NoiseControl())
    assert looped[-1][:2] == ["sh", "-c"]
    virtual_board.control("fault crash,after=30")
    execution = board.run(artifact, "c40", iterations=40, warmup=0)
    assert execution.exit_code == 139
    assert execution.stderr.count(INVOCATION_MARKER) == 31
