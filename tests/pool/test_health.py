"""The pool's policy after infrastructure errors (hil/pool/health.py) and the capacity a run
loses to recovery (hil/pool/capacity.py): pure rules, no board."""

from __future__ import annotations

import pytest

from hil.pool import health
from hil.pool.capacity import CapacityLedger


def _quarantine_waits(count: int) -> list[float]:
    counters = health.BoardHealth()
    waits = []
    for _ in range(count):
        counters.failed()
        counters.failed()
        assert counters.quarantine_reason(ladder_ran_out=False) is not None
        waits.append(counters.quarantined())
    return waits


def test_a_first_quarantine_is_checked_at_once_then_the_probation_doubles_to_its_cap() -> None:
    waits = _quarantine_waits(12)
    assert waits[:3] == [0.0, health.PROBATION_S, 2 * health.PROBATION_S]
    assert max(waits) == waits[-1] == health.PROBATION_MAX_S  # reached, never passed
    assert waits == sorted(waits)


def test_a_good_streak_brings_the_next_quarantine_back_to_a_check_at_once() -> None:
    counters = health.BoardHealth()
    for _ in range(3):
        counters.failed()
        counters.failed()
        counters.quarantined()
    for _ in range(health.GOOD_STREAK - 1):
        counters.passed()
    counters.failed()
    counters.failed()
    assert counters.quarantined() > health.PROBATION_S  # short of the streak: it still counts
    for _ in range(health.GOOD_STREAK):
        counters.passed()
    counters.failed()
    counters.failed()
    assert counters.quarantined() == 0.0


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_capacity_counts_each_board_out_from_leaving_the_run_to_coming_back() -> None:
    clock = _Clock()
    ledger = CapacityLedger(clock)
    ledger.joined("a")
    ledger.joined("b")
    clock.now += 10
    ledger.out("a")  # recovery, then quarantine and probation: one stretch out
    clock.now += 4
    ledger.out("a")  # already out: the stretch is not restarted
    clock.now += 2
    ledger.back("a")
    ledger.back("b")  # never out: nothing to add
    clock.now += 4
    ledger.out("b")  # out for good: counted until the figures are asked for
    clock.now += 20
    assert ledger.board_seconds_out() == {"a": 6.0, "b": 20.0}
    lost = ledger.figures()
    assert lost == {"board_seconds_out": 26.0, "board_seconds": 80.0, "fraction": pytest.approx(26 / 80)}


def test_a_board_that_never_came_up_is_no_capacity_and_an_empty_ledger_lost_nothing() -> None:
    ledger = CapacityLedger(_Clock())
    ledger.out("ghost")
    ledger.back("ghost")
    assert ledger.board_seconds_out() == {}
    assert ledger.figures() == {"board_seconds_out": 0.0, "board_seconds": 0.0, "fraction": 0.0}
