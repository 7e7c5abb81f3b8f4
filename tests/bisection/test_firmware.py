"""`hil bisect --firmware-builds` on virtual boards flashed by Debian's real `fastboot` client:
32 builds, build 19 the first to compute `relu` wrong (the test rig's firmware setting, a
`hil.virtual.fault=` line in its system image); on one board, on three, killed with SIGKILL and
resumed; a case that fails at random with both builds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hil.virtual.launcher import VirtualBoardProcess
from tests.bisection import CASE, SUITE, bisect, fingerprint, firmware_builds, inventory, night
from tests.faults import environment

pytestmark = pytest.mark.slow

MISCOMPUTE = "miscompute,op=relu"
FLAGS = ("--idle-timeout", "10", "--boot-timeout", "30", "--flash-timeout", "30")


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return firmware_builds(tmp_path_factory.mktemp("firmware"), 32, {n: [MISCOMPUTE] for n in range(19, 33)})


@pytest.fixture(scope="module")
def nights(boards: list[VirtualBoardProcess], builds: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """GOOD on build 1 (passes), BAD on build 32 (computes relu wrong)."""
    root = tmp_path_factory.mktemp("nights")
    good, bad = night(boards, builds / "build-01", root / "good"), night(boards, builds / "build-32", root / "bad")
    assert [c["verdict"] for c in json.loads(good.read_text())["cases"]] == ["PASS"]
    assert [c["verdict"] for c in json.loads(bad.read_text())["cases"]] == ["FAIL_MISMATCH"]
    return good, bad


def _args(nights: tuple[Path, Path], builds: Path, out: Path, *boards: str) -> list[str]:
    return ["--good", str(nights[0]), "--bad", str(nights[1]), "--suite", str(SUITE),
            "--firmware-builds", str(builds), "--out", str(out), *FLAGS, *boards]


@pytest.fixture(scope="module")
def one_board(boards: list[VirtualBoardProcess], builds: Path, nights: tuple[Path, Path],
              tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path]:
    root = tmp_path_factory.mktemp("one-board")
    boards_yaml = inventory(root / "boards.yaml", boards[:1], builds / "build-01")
    code, doc = bisect(*_args(nights, builds, root / "out", "--inventory", str(boards_yaml)))
    return code, doc, root / "out"


def test_32_builds_one_board_names_build_19_in_at_most_6_5_6_runs(one_board: tuple[int, dict[str, Any], Path]) -> None:
    code, doc, out = one_board
    answer = doc["answer"]
    assert (code, answer["kind"], answer["exit_code"]) == (0, "culprit", 0)
    assert (answer["culprit"]["label"], answer["parent"]["label"]) == ("build-19", "build-18")
    assert answer["confidence"] == {"culprit_failed": 3, "culprit_runs": 3, "parent_passed": 3, "parent_runs": 3}
    runs = doc["runs"]["by_phase"]
    assert runs["confirm"] == 6 and runs["search"] <= 5 and runs.get("culprit", 0) <= 6
    assert doc["runs"]["total"] <= 6 + 5 + 6
    assert doc["rounds"]["by_phase"]["search"] <= 5
    assert doc["lowered"] == {"cases": 1, "from_cache": 1, "lowered": 0}  # a firmware bisection lowers nothing
    assert [c["element"] for c in doc["changed"]] == ["firmware"] and doc["cases"]["bisected"] == [CASE]
    # the evidence: every board run's own results.json, the build the board reported after its flash
    rows = {row["label"]: row for row in doc["candidates"]["firmware"]}
    assert (rows["build-19"]["state"], rows["build-18"]["state"]) == ("bad", "good")
    for run in doc["board_runs"]:
        results = json.loads((out / run["results"]).read_text())
        number = int(run["builds"]["firmware"]["label"].split("-")[1])
        assert results["run"]["boards"][0]["build"]["after"] == run["build"] == fingerprint(number)
        assert [c["verdict"] for c in results["cases"]] == (["FAIL_MISMATCH"] if number >= 19 else ["PASS"])
    assert "culprit firmware build-19" in (out / "bisect.md").read_text()
    assert (out / "bisect.png").stat().st_size > 0


def test_three_boards_take_fewer_rounds_than_one(three_boards: list[VirtualBoardProcess], builds: Path,
                                                 nights: tuple[Path, Path], one_board: tuple[int, dict[str, Any], Path],
                                                 tmp_path: Path) -> None:
    boards_yaml = inventory(tmp_path / "boards.yaml", three_boards, builds / "build-01")
    code, doc = bisect(*_args(nights, builds, tmp_path / "out", "--inventory", str(boards_yaml)))
    assert (code, doc["answer"]["culprit"]["label"]) == (0, "build-19")
    assert doc["rounds"]["total"] < one_board[1]["rounds"]["total"]
    assert doc["rounds"]["by_phase"]["search"] <= 3  # log4 of 31 candidates
    searched = [run for run in doc["board_runs"] if run["phase"] == "search"]
    assert len({run["board"] for run in searched}) == 3  # every board took candidates


def test_kill_9_in_the_middle_then_the_same_command_goes_on(builds: Path, nights: tuple[Path, Path],
                                                            one_board: tuple[int, dict[str, Any], Path],
                                                            tmp_path: Path) -> None:
    """On boards the bisection starts itself (`--board virtual:1`): they die with it, and the
    resumed one flashes what it needs on new ones."""
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "hil", "bisect", *_args(nights, builds, out, "--board", "virtual:1",
                                                          "--virtual-reboot-seconds", "0.1")]
    journal = out / "bisect.journal"
    first = subprocess.Popen(argv, env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not journal.is_file() or journal.read_text().count('{"run":') < 8:  # confirmed, 2 searched
            assert first.poll() is None, "the bisection ended before it was killed"
            assert time.monotonic() < deadline, "no 8th board run within 300 s"
            time.sleep(0.1)
        os.kill(first.pid, signal.SIGKILL)
    finally:
        first.wait(30)
    done_before = journal.read_text().count('{"run":')
    again = subprocess.run(argv, env=environment(), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    doc = json.loads((out / "bisect.json").read_text())
    assert doc["answer"]["culprit"]["label"] == "build-19"
    assert doc["runs"]["total"] == one_board[1]["runs"]["total"]  # as many as uninterrupted
    assert doc["runs_made_now"] == doc["runs"]["total"] - done_before  # none made twice
    keys = [json.loads(line)["run"]["key"] for line in journal.read_text().splitlines()[1:]]
    assert len(keys) == len(set(keys)) == doc["runs"]["total"]


def test_a_case_failing_30_percent_with_both_builds_is_not_reproduced(
        boards: list[VirtualBoardProcess], tmp_path: Path) -> None:
    """Both builds compute relu wrong in 30 % of the runner's execs (a seeded draw); GOOD is a
    night it happened to pass, BAD one it happened to fail. The board starts in its bootloader
    (as a bisection killed in the middle of a flash leaves it): it is booted back first."""
    flaky = "miscompute,op=relu,p=0.3,seed=41"
    builds = firmware_builds(tmp_path / "fw", 2, {1: [flaky], 2: [flaky]})
    good = bad = None
    flashed = None
    for attempt in range(30):  # each build flashed once, its nights run on until one fits
        build = builds / f"build-0{1 + (good is not None)}"
        path = night(boards, build, tmp_path / f"night-{attempt}", provision=build != flashed)
        flashed = build
        verdict = json.loads(path.read_text())["cases"][0]["verdict"]
        if good is None and verdict == "PASS":
            good = path
        elif good is not None and verdict == "FAIL_MISMATCH":
            bad = path
            break
    assert good is not None and bad is not None
    boards[0].control("reboot bootloader", applied_within=10)
    host, port = boards[0].fastboot.rsplit(":", 2)[1:]
    _wait_port(host, int(port))
    boards_yaml = inventory(tmp_path / "boards.yaml", boards[:1], builds / "build-01")
    code, doc = bisect("--good", str(good), "--bad", str(bad), "--suite", str(SUITE), "--firmware-builds",
                       str(builds), "--out", str(tmp_path / "out"), "--inventory", str(boards_yaml), *FLAGS)
    answer = doc["answer"]
    assert (code, answer["kind"], answer["culprit"]) == (5, "not_reproduced", None)
    assert "a flaky case is not bisected" in answer["message"]
    assert doc["runs"]["total"] == 6 and doc["candidates"] == {}


def _wait_port(host: str, port: int) -> None:
    import socket

    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, "the board's bootloader never listened"
            time.sleep(0.1)
