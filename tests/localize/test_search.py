"""The bisection alone: the first diverging cut point of a monotone predicate, within
ceil(log2 N) + 2 probes, and what it says when the predicate is not one op's fault."""

from __future__ import annotations

import math

import pytest

from hil.localize.search import Outcome, ProbeLost, bisect, max_board_runs


def diverging_from(first_bad: int, skip: frozenset[int] = frozenset()):
    """A board that computes every cut point from `first_bad` on wrong; cut points in
    `skip` cannot be run. Records what was asked."""
    asked: list[int] = []

    def probe(point: int) -> bool | None:
        asked.append(point)
        return None if point in skip else point >= first_bad

    return probe, asked


@pytest.mark.parametrize("count", [2, 3, 7, 16, 190, 1000])
def test_every_first_bad_point_is_found_within_the_bound(count: int) -> None:
    points = list(range(0, 2 * count, 2))  # cut points need not be consecutive nodes
    for first_bad in points[1:]:
        probe, asked = diverging_from(first_bad)
        search = bisect(points, probe)
        assert (search.outcome, search.first_bad) == (Outcome.FOUND, first_bad)
        assert search.last_good == points[points.index(first_bad) - 1]
        assert len(asked) <= 2 + math.ceil(math.log2(count - 1)) <= max_board_runs(2 * count)
        assert asked[:2] == [points[-1], points[0]]  # the whole graph, then the first cut point


def test_a_fault_on_every_program_diverges_from_the_first_probe() -> None:
    probe, asked = diverging_from(0)
    search = bisect(list(range(50)), probe)
    assert (search.outcome, search.first_bad, search.last_good) == (Outcome.FIRST_PROBE, 0, None)
    assert asked == [49, 0]


def test_a_whole_graph_within_tolerance_is_not_bisected() -> None:
    probe, asked = diverging_from(10**6)
    search = bisect(list(range(50)), probe)
    assert search.outcome is Outcome.NOT_REPRODUCED and asked == [49]


def test_cut_points_that_cannot_run_are_skipped_to_their_neighbours() -> None:
    probe, asked = diverging_from(30, skip=frozenset({24, 30, 31}))
    search = bisect(list(range(64)), probe)
    assert (search.outcome, search.first_bad) == (Outcome.FOUND, 32)  # 30, 31 could not be probed
    assert search.last_good == 29
    assert search.probed == tuple(asked)


def test_a_lost_board_stops_the_search_with_what_was_probed() -> None:
    asked: list[int] = []

    def probe(point: int) -> bool | None:
        asked.append(point)
        if len(asked) == 3:
            raise ProbeLost("board gone")
        return point >= 5

    search = bisect(list(range(20)), probe)
    assert (search.outcome, search.reason, search.probed) == (Outcome.INCOMPLETE, "board gone", tuple(asked))


def test_no_runnable_probe_before_the_last_is_incomplete_not_a_finding() -> None:
    probe, _ = diverging_from(3, skip=frozenset({0, 1, 2}))
    search = bisect([0, 1, 2, 3], probe)
    assert search.outcome is Outcome.INCOMPLETE and search.first_bad is None


def test_a_known_last_verdict_saves_its_board_run() -> None:
    points = list(range(190))
    probe, asked = diverging_from(3)
    search = bisect(points, probe, last_diverges=True)
    assert (search.outcome, search.first_bad, search.last_good) == (Outcome.FOUND, 3, 2)
    assert asked[0] == 0 and 189 not in asked
    assert len(asked) <= 1 + math.ceil(math.log2(189))
    assert bisect(points, diverging_from(3)[0], last_diverges=False).outcome is Outcome.NOT_REPRODUCED
