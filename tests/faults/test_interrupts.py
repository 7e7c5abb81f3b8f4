"""Runs cut short from outside: a board killed with SIGKILL, and the run itself stopped with
SIGTERM. Both leave a valid JUnit and results.json in which no finished case is lost and
none is counted twice."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from junitparser import JUnitXml

from hil.virtual.main import READY_PREFIX
from tests.junit_schema import assert_valid_junit

from . import TINY, environment, gone, tiny_copies, tiny_keys

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # two whole `hil run` processes


class BoardCli:
    """`hil virtual-board` as its own process, reached by the run as HOST:PORT."""

    def __init__(self, root: Path, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hil", "-v", "virtual-board", "--port", "0", "--root", str(root),
             *args],
            cwd=REPO, stdout=subprocess.PIPE, stderr=(root / "board.log").open("wb"),
            start_new_session=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode()
        match = re.match(re.escape(READY_PREFIX) + r"(127\.0\.0\.1:\d+) ", line)
        assert match, line
        self.address = match.group(1)
        self.root = root
        self.log = root / "board.log"
        self.hangs_before = 0

    def hangs(self) -> int:
        """How often the `hang` fault has fired."""
        return self.log.read_text(errors="replace").count("fault hang fires on exec")

    def wait_for_hang(self) -> None:
        """Until the armed `hang` fault has fired: a case is now stuck on the board."""
        deadline = time.monotonic() + 600
        while self.hangs() <= self.hangs_before:
            assert time.monotonic() < deadline, "the hang fault never fired"
            time.sleep(0.1)

    def logcat(self) -> str:
        """The board's logcat so far."""
        return (self.root / "run" / "logcat.txt").read_text(errors="replace")

    def control(self, line: str) -> None:
        (self.root / "run" / "control").write_text(line + "\n")

    def wait_warm(self) -> None:
        deadline = time.monotonic() + 300
        while "virtual executor warm in" not in self.log.read_text(errors="replace"):
            assert time.monotonic() < deadline
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoardCli]:
    """One `hil virtual-board` for the module (the last test kills it)."""
    root = tmp_path_factory.mktemp("board")
    board = BoardCli(root)
    try:
        board.wait_warm()
        yield board
    finally:
        board.stop()


@pytest.fixture
def hanging_board(board: BoardCli) -> BoardCli:
    """The board, its next runner exec but one set to hang: a run is reliably mid-case."""
    board.control("fault clear")
    board.control("fault hang,after=1")
    board.hangs_before = board.hangs()
    return board


def start_run(board: BoardCli, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "hil", "run", "--board", board.address, "--suite", str(TINY),
         "--flow", "portable", "--out", str(out), "--timeout", "120", "--idle-timeout", "3"],
        cwd=REPO, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def wait_for_cases(results: Path, count: int, run: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 600
    while True:
        assert run.poll() is None, run.communicate()[0]
        try:
            if len(json.loads(results.read_text())["cases"]) >= count:
                return
        except (OSError, ValueError):
            pass
        assert time.monotonic() < deadline, "the run never finished its first case"
        time.sleep(0.1)


def valid_junit(path: Path) -> dict[str, str]:
    """testcase name -> `pass` or its failure/error type; asserts the file is valid JUnit."""
    xml = JUnitXml.fromfile(str(path))
    outcome = {}
    for suite in xml:
        for case in suite:
            assert case.name not in outcome, f"{case.name} counted twice"
            outcome[case.name] = case.result[0].type if case.result else "pass"
    assert_valid_junit(path)
    return outcome


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_run_exits_130_with_valid_reports_of_the_finished_cases(
    hanging_board: BoardCli, tmp_path: Path, signum: int
) -> None:
    out = tmp_path / "out"
    run = start_run(hanging_board, out)
    wait_for_cases(out / "results.json", 1, run)
    hanging_board.wait_for_hang()
    run.send_signal(signum)
    output, _ = run.communicate(timeout=120)
    assert run.returncode == 130, output
    results = json.loads((out / "results.json").read_text())
    assert results["run"]["status"] == "interrupted"
    finished = [c["id"] for c in results["cases"]]
    assert finished == [tiny_keys()[0].rsplit(".", 1)[1]]
    assert valid_junit(out / "junit.xml") == {finished[0]: "pass"}
    # the hung runner does not outlive hil (cleanup kills it by its recorded PID; the virtual
    # board also ends it with its shell when the connection closes), and the folder is gone
    board_pid = re.findall(r"enn_executor_runner pid (\d+): start", hanging_board.logcat())[-1]
    # the logcat's pid is the board's own (its pid namespace); the board's log maps it
    hung = int(re.findall(rf"runner pid {board_pid} is host pid (\d+)",
                          hanging_board.log.read_text(errors="replace"))[-1])
    assert gone(hung), f"the hung runner (pid {hung}) is still running after hil exited"
    assert not (hanging_board.root / "fs" / "data" / "local" / "tmp" / "hil" / results["run"]["id"]).exists()


@pytest.fixture(scope="module")
def prelowered() -> None:
    """The tiny cases in the session's artifact cache: a run started after this lowers nothing,
    so a signal sent after its first case lands while a case runs on the board (before, it could
    land while cases were still lowering, and the test passed for the wrong reason)."""
    tiny_copies(len(tiny_keys()))


def test_a_stopped_run_removes_its_folder_from_the_board(
    board: BoardCli, tmp_path: Path, prelowered: None
) -> None:
    """SIGTERM while a case runs: exit 130 and the run's folder gone from the board. It failed
    in full CI runs while the handler raised KeyboardInterrupt inside `Thread.join` (CPython
    3.10-3.12 then marks the live board thread as stopped: python/cpython#90882) and the adb
    server stopped before the board thread had removed the folder (hil/interrupts.py)."""
    board.control("fault clear")
    board.control("fault slow,on=exec,delay=0.3")  # every case lasts over half a second: stopped mid-run
    out = tmp_path / "out"
    try:
        run = start_run(board, out)
        wait_for_cases(out / "results.json", 1, run)
        run.send_signal(signal.SIGTERM)
        output, _ = run.communicate(timeout=120)
    finally:
        board.control("fault clear")
    assert run.returncode == 130, output
    results = json.loads((out / "results.json").read_text())
    assert all(c.get("cache_hit") for c in results["cases"]), "the cases were lowered by the run"
    run_id = results["run"]["id"]
    assert not (board.root / "fs" / "data" / "local" / "tmp" / "hil" / run_id).exists()


def test_board_killed_mid_run_ends_with_exit_2_and_every_case_reported(
    hanging_board: BoardCli, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    run = start_run(hanging_board, out)
    wait_for_cases(out / "results.json", 1, run)
    hanging_board.wait_for_hang()  # the second case is now stuck on the board
    os.kill(hanging_board.process.pid, signal.SIGKILL)
    output, _ = run.communicate(timeout=300)
    assert run.returncode == 2, output
    outcome = valid_junit(out / "junit.xml")
    ids = [key.rsplit(".", 1)[1] for key in tiny_keys()]
    assert sorted(outcome) == sorted(ids)
    assert outcome[ids[0]] == "pass"
    assert outcome[ids[1]] == outcome[ids[2]] == "ERROR_INFRA"
    results = json.loads((out / "results.json").read_text())
    assert results["run"]["status"] == "complete"
    assert [c["id"] for c in results["cases"]].count(ids[1]) == 1
    assert results["totals"] == {"PASS": 1, "ERROR_INFRA": 2}
    board = results["run"]["boards"][0]
    assert board["quarantined"] == "recovery failed"
    assert [step["step"] for step in board["recovery"]] == ["reconnect", "reboot"]
