"""The bisection: the first clean cut point whose probe diverges, in few board runs.

The last cut point (the whole graph) must reproduce the case's mismatch, or there is nothing
to bisect: the case's own run on the board says so when the caller has it, else its probe
runs first. Then the first cut point: when it already diverges, every program on the board is
off and no single op can be named. Between a first probe within tolerance and a last one out
of it, each probe halves the interval, so a graph with M clean cut points takes at most
1 + ceil(log2(M - 1)) board runs (2 + ... without the case's run). A probe that cannot run (it does
not lower, or the runner fails) says nothing: its cut point is dropped and the search goes on
with the nearest other one.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass


class Outcome(enum.Enum):
    """What a search found."""

    FOUND = "found"
    """A first cut point out of tolerance after one within it."""
    FIRST_PROBE = "diverges_from_first_probe"
    """Already the first cut point is out of tolerance: not one op."""
    NOT_REPRODUCED = "not_reproduced"
    """The whole graph's probe is within tolerance: nothing to bisect."""
    INCOMPLETE = "incomplete"
    """The search stopped (the board was lost, no probe could run)."""


@dataclass(frozen=True)
class Search:
    """The result: which cut points were probed, and the interval found."""

    outcome: Outcome
    probed: tuple[int, ...]
    """Cut points in the order they were probed (one board run each, failed runs included)."""
    first_bad: int | None = None
    """The first cut point out of tolerance (FOUND, FIRST_PROBE)."""
    last_good: int | None = None
    """The last cut point within tolerance before it (FOUND)."""
    reason: str = ""
    """Why the search stopped (INCOMPLETE)."""


def max_board_runs(nodes: int) -> int:
    """The board runs a localization of a graph of `nodes` op nodes may take: ceil(log2 N) + 2."""
    return math.ceil(math.log2(max(nodes, 1))) + 2


class ProbeLost(Exception):
    """The board (or the host's part) failed for reasons of its own: stop the search."""


def bisect(candidates: Sequence[int], probe: Callable[[int], bool | None],
           last_diverges: bool | None = None) -> Search:
    """Search `candidates` (cut points in topological order) with `probe(c)`: True when the
    probe after c diverges, False when it is within tolerance, None when it could not run.
    `last_diverges`: the last cut point's answer when already known (the case's own run).
    ProbeLost from `probe` stops the search (INCOMPLETE)."""
    points = list(candidates)
    probed: list[int] = []

    def ask(point: int) -> bool | None:
        probed.append(point)
        return probe(point)

    try:
        last = last_diverges
        while points and last is None:
            last = ask(points[-1])
            if last is None:
                points.pop()
        if last is None:
            return Search(Outcome.INCOMPLETE, tuple(probed), reason="no probe of the graph could run")
        if not last:
            return Search(Outcome.NOT_REPRODUCED, tuple(probed))
        first = None
        while len(points) > 1 and first is None:
            first = ask(points[0])
            if first is None:
                points.pop(0)
        if first is None and len(candidates) > 1:
            return Search(Outcome.INCOMPLETE, tuple(probed), reason="no probe before the last could run")
        if first is None or first:
            return Search(Outcome.FIRST_PROBE, tuple(probed), first_bad=points[0])
        low, high = 0, len(points) - 1  # points[low] within tolerance, points[high] out of it
        while high - low > 1:
            middle = (low + high) // 2
            verdict = ask(points[middle])
            if verdict is None:
                points.pop(middle)
                high -= 1
            elif verdict:
                high = middle
            else:
                low = middle
        return Search(Outcome.FOUND, tuple(probed), first_bad=points[high], last_good=points[low])
    except ProbeLost as exc:
        return Search(Outcome.INCOMPLETE, tuple(probed), reason=str(exc))
