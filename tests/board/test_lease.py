"""One owner per board. The lease itself (flock: exclusive, described, taken over when its
holder dies) and two whole `hil run`s on one board of a real lab adb server: the second
waits and says who holds the board, their cases never overlap in time, and `kill -9` of
the first hands the board to the second."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hil.board.lease import acquire, board_key, lease_dir, read_holder
from hil.errors import InfraError

REPO = Path(__file__).resolve().parents[2]
SMOKE_CASES = 7


def test_keys_name_the_physical_board() -> None:
    assert board_key("10.0.0.7:5555", None) == board_key("10.0.0.7:5555", "lab-2") == "10.0.0.7:5555"
    assert board_key("R3CX40", None) == board_key("R3CX40", "127.0.0.1") == "localhost/R3CX40"
    assert board_key("R3CX40", "lab-2") == "lab-2/R3CX40"
    assert board_key("127.0.0.1:40001", "lab-2") == "lab-2/127.0.0.1:40001"  # lab-2's loopback


def test_a_held_lease_excludes_and_names_its_holder(tmp_path: Path) -> None:
    first = acquire("localhost/R3CX40", "run-one", 0, folder=tmp_path)
    seen: list[Any] = []
    started = time.monotonic()
    with pytest.raises(InfraError) as busy:
        acquire("localhost/R3CX40", "run-two", 0.5, seen.append, folder=tmp_path)
    assert time.monotonic() - started >= 0.5
    message = str(busy.value)
    assert message.startswith(f"busy: held by run run-one (pid {os.getpid()} on ")
    assert message.endswith("s (--board-wait 0.5)")
    assert [holder.run for holder in seen] == ["run-one"]  # told once, when the wait started
    other = acquire("localhost/R3CX41", "run-two", 0, folder=tmp_path)  # another board: free
    first.release()
    second = acquire("localhost/R3CX40", "run-two", 0, folder=tmp_path)
    assert second.waited_for is None
    second.release()
    other.release()


def test_a_dead_holders_lease_is_taken_over(tmp_path: Path) -> None:
    code = ("import sys, time; from pathlib import Path; from hil.board.lease import acquire; "
            f"acquire('localhost/R3CX40', 'doomed', 0, folder=Path({str(tmp_path)!r})); "
            "print('held', flush=True); time.sleep(600)")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(InfraError, match=f"held by run doomed \\(pid {holder.pid} "):
            acquire("localhost/R3CX40", "mine", 0, folder=tmp_path)
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        lease = acquire("localhost/R3CX40", "mine", 0, folder=tmp_path)  # at once
        (path,) = tmp_path.glob("*.lease")
        assert read_holder(path).run == "mine"
        lease.release()
    finally:
        holder.kill()
        holder.wait()


# -- two whole runs on one board of a lab server (slow) ----------------------------------------

def _start(lab: dict[str, Any], out: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """`hil run` on lab board b1 through lab server one, in the background; stderr to a file."""
    out.mkdir(parents=True)
    err = out.parent / f"{out.name}.stderr"
    with err.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "hil", "run", "--adb-server", lab["one"].address,
             "--board", lab["b1"].address, "--suite", "smoke", "--board-wait", "300",
             "--out", str(out)],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=stderr)
    return process, err


def _wait_for(condition, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _holds_the_lease(process: subprocess.Popen[bytes]) -> bool:
    return any((holder := read_holder(path)) is not None and holder.pid == process.pid
               for path in lease_dir().glob("*.lease"))


def _cases(out: Path) -> list[dict[str, Any]]:
    try:
        return json.loads((out / "results.json").read_text())["cases"]
    except (OSError, ValueError, KeyError):
        return []


@pytest.fixture(scope="module")
def warm(lab: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One plain run first: the smoke suite lowered into the session's artifact cache, so the
    runs below never start lowering workers (a killed run would orphan them)."""
    process, err = _start(lab, tmp_path_factory.mktemp("warm") / "out")
    assert process.wait(timeout=900) == 0, err.read_text()
    return lab


@pytest.fixture
def slow_b1(warm: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """b1 answers every adb message 0.1 s late (each case takes seconds) until cleared."""
    warm["b1"].control("fault slow,delay=0.1")
    yield warm
    warm["b1"].control("fault clear")


def _second_waits_for_first(lab: dict[str, Any], tmp_path: Path) -> tuple[Any, ...]:
    first, first_err = _start(lab, tmp_path / "first")
    _wait_for(lambda: _holds_the_lease(first) and _cases(tmp_path / "first"),
              "the first run to hold b1 and finish a case")
    # slower still (about 30 s a case) until the test clears it: the first run must still
    # hold b1 when the second, starting on a loaded machine, asks for it (with fewer adb
    # messages a case, 0.1 s each no longer kept it busy that long)
    lab["b1"].control("fault clear slow", applied_within=30)
    lab["b1"].control("fault slow,delay=1", applied_within=30)
    second, second_err = _start(lab, tmp_path / "second")
    _wait_for(lambda: "busy, held by run" in second_err.read_text(), "the second run to wait")
    return first, first_err, second, second_err


@pytest.mark.slow
def test_a_second_run_waits_for_the_board_and_never_overlaps(slow_b1, tmp_path: Path) -> None:
    first, first_err, second, second_err = _second_waits_for_first(slow_b1, tmp_path)
    slow_b1["b1"].control("fault clear")
    assert first.wait(timeout=600) == 0, first_err.read_text()
    assert second.wait(timeout=600) == 0, second_err.read_text()
    one = json.loads((tmp_path / "first" / "results.json").read_text())
    two = json.loads((tmp_path / "second" / "results.json").read_text())
    assert len(one["cases"]) == len(two["cases"]) == SMOKE_CASES
    assert {c["verdict"] for c in one["cases"] + two["cases"]} == {"PASS"}
    # who held it, said while waiting and recorded with the board
    line = next(line for line in second_err.read_text().splitlines() if "busy, held by" in line)
    assert f"held by run {one['run']['id']} (pid {first.pid} on " in line
    assert "waiting up to 300 s (--board-wait)" in line
    (board,) = two["run"]["boards"]
    assert board["lease"]["waited_for"].startswith(f"run {one['run']['id']} (pid {first.pid} ")
    assert board["lease"]["waited_s"] > 0
    # no case of one overlaps a case of the other (ISO 8601 UTC stamps sort as time)
    assert max(c["finished"] for c in one["cases"]) < min(c["started"] for c in two["cases"])
    print(f"second run waited {board['lease']['waited_s']} s; first's last case finished "
          f"{max(c['finished'] for c in one['cases'])}, second's first started "
          f"{min(c['started'] for c in two['cases'])}")


@pytest.mark.slow
def test_kill_9_of_the_holder_hands_the_board_to_the_waiting_run(slow_b1, tmp_path: Path) -> None:
    first, _, second, second_err = _second_waits_for_first(slow_b1, tmp_path)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    killed_at = time.monotonic()
    slow_b1["b1"].control("fault clear")
    _wait_for(lambda: _holds_the_lease(second), "the second run to take the board", timeout=30)
    took_s = time.monotonic() - killed_at
    assert second.wait(timeout=600) == 0, second_err.read_text()
    one = json.loads((tmp_path / "first" / "results.json").read_text())
    two = json.loads((tmp_path / "second" / "results.json").read_text())
    assert one["run"]["status"] == "running"  # the first never finished: it was killed
    assert 1 <= len(one["cases"]) < SMOKE_CASES
    assert len(two["cases"]) == SMOKE_CASES and {c["verdict"] for c in two["cases"]} == {"PASS"}
    assert max(c["finished"] for c in one["cases"]) < min(c["started"] for c in two["cases"])
    print(f"board taken over {took_s:.2f} s after kill -9 of the holder")
