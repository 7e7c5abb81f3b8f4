"""Quarantine and probation in whole runs (real adb server, virtual boards, ExecuTorch's
runtime): a board whose health check passes after a transient fault takes cases again, at once
after a first quarantine and after its probation after a second; one whose health checks keep
failing stays out and its cases go to the other board; either way the run's `capacity_lost`
says what the recovery cost."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hil.pool import health
from hil.virtual.launcher import VirtualBoardProcess, start_virtual_board
from tests.faults import (
    board_entry,
    lost_results,
    run_in_process,
    tiny_copies,
    wait_until_warm,
    write_inventory,
)

pytestmark = pytest.mark.slow  # two boards and two whole runs: about 20 s

B_CASE_S = 0.4
"""Board B's extra time per inference (a `slow,on=exec` fault): B alone takes the run past
A's probation, so A has cases left when it is back."""
PATIENT = {"timeout_s": 30.0, "idle_timeout_s": 10.0}
"""Deadlines no loaded CI machine reaches: the only infrastructure errors are the faults'."""


@pytest.fixture(scope="module")
def boards(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, VirtualBoardProcess]]:
    root = tmp_path_factory.mktemp("probation")
    with start_virtual_board(root / "a", "E9955", "probation-a") as a, \
         start_virtual_board(root / "b", "E9955", "probation-b") as b:
        for board in (a, b):
            wait_until_warm(board)
        yield {"a": a, "b": b}


@pytest.fixture
def lab(boards: dict[str, VirtualBoardProcess], tmp_path: Path) -> Iterator[Path]:
    """The inventory of A and of B slowed down; every fault cleared afterwards."""
    boards["b"].control(f"fault slow,on=exec,delay={B_CASE_S}")
    try:
        yield write_inventory(tmp_path / "inventory.yaml",
                              [board_entry("a", boards["a"]), board_entry("b", boards["b"])])
    finally:
        for board in boards.values():
            board.control("fault clear", applied_within=30)


def _board(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(b for b in doc["run"]["boards"] if b["name"] == name)


def _assert_capacity_consistent(doc: dict[str, Any]) -> dict[str, Any]:
    lost = doc["run"]["capacity_lost"]
    assert 0 <= lost["board_seconds_out"] <= lost["board_seconds"]
    assert lost["fraction"] == pytest.approx(lost["board_seconds_out"] / lost["board_seconds"], abs=1e-3)
    per_board = sum(b["board_seconds_out"] for b in doc["run"]["boards"])
    assert per_board == pytest.approx(lost["board_seconds_out"], abs=0.5)
    return lost


def test_a_board_whose_health_check_passes_is_back_at_once_then_after_its_probation(
    boards: dict[str, VirtualBoardProcess], lab: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # the policy's own probation (not shortened here): B alone needs three times as long
    cases = tiny_copies(math.ceil(3 * health.PROBATION_S / B_CASE_S))
    boards["a"].control("fault drop,on=exec,times=4")  # twice two infrastructure errors in a row
    _run, doc = run_in_process(lab, tmp_path / "out", cases=cases, **PATIENT)
    entry = _board(doc, "a")
    assert [(p["why"], p["back"]) for p in entry["probation"]] == [
        ("2 infrastructure errors in a row", True)] * 2
    assert "quarantined" not in entry
    said = [r.getMessage() for r in caplog.records if "quarantined" in r.getMessage()]
    assert said == [f"a: quarantined (2 infrastructure errors in a row); health check {when}"
                    for when in ("at once", f"in {health.PROBATION_S:g} s")]
    assert entry["probation"][1]["out_s"] >= health.PROBATION_S  # it sat out its probation
    failed_on_a = sorted(a["finished"] for c in doc["cases"] for a in c["earlier_attempts"] or []
                         if a["board"] == "a")
    assert len(failed_on_a) == 4
    after = [c for c in doc["cases"] if c["board"] == "a" and c["started"] > failed_on_a[-1]]
    assert len(after) >= 3, (len(after), len(cases))  # a member of the run again, not a last try
    assert [c["verdict"] for c in doc["cases"]] == ["PASS"] * len(cases)
    assert lost_results([c.key for c in cases], doc, tmp_path / "out" / "junit.xml") == 0
    lost = _assert_capacity_consistent(doc)
    assert entry["board_seconds_out"] >= health.PROBATION_S
    assert _board(doc, "b")["board_seconds_out"] == 0
    assert lost["board_seconds_out"] > 0


def test_a_board_whose_health_checks_keep_failing_stays_out_and_its_cases_go_to_the_other(
    boards: dict[str, VirtualBoardProcess], lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health, "CHECK_EVERY_S", 0.2)  # the rule, not the numbers: a short run
    monkeypatch.setattr(health, "GIVE_UP_S", 1.0)
    cases = tiny_copies(12)
    armed: list[bool] = []

    def break_a(_run: Any, _record: dict[str, Any]) -> None:  # after A came up: /data read-only
        if not armed:
            armed.append(True)
            boards["a"].control("fault readonly-data")

    _run, doc = run_in_process(lab, tmp_path / "out", on_record=break_a, cases=cases, **PATIENT)
    entry = _board(doc, "a")
    checks = entry["probation"]
    assert len(checks) >= 2 and not any(p["back"] for p in checks), checks
    assert checks[-1]["out_s"] >= health.GIVE_UP_S  # its checks failed for that long
    assert " health checks failed for " in entry["quarantined"]
    out_since = max(a["finished"] for c in doc["cases"] for a in c["earlier_attempts"] or [] if a["board"] == "a")
    assert [c["id"] for c in doc["cases"] if c["board"] == "a" and c["started"] > out_since] == []
    assert all(c["board"] == "b" for c in doc["cases"] if c["earlier_attempts"])
    assert [c["verdict"] for c in doc["cases"]] == ["PASS"] * len(cases)
    assert lost_results([c.key for c in cases], doc, tmp_path / "out" / "junit.xml") == 0
    _assert_capacity_consistent(doc)
    assert entry["board_seconds_out"] > 0 and _board(doc, "b")["board_seconds_out"] == 0
