"""What a rendering keeps of a run's cases when it reads them one at a time: the best-ranked
items within a budget, and how many there were. So the step summary, the annotations and the
console table of a 50,000-case run hold what fits on the page, not the run."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")


class Best(Generic[Item]):
    """The lowest-ranked items added (ranks are unique: break ties with the case's index)
    while their `size`s sum to at most `budget` and they number at most `count`: exactly the
    longest prefix of all the items in rank order within both bounds. `total` counts every
    item added."""

    def __init__(self, budget: float = float("inf"), count: float = float("inf"),
                 size: Callable[[Item], int] = lambda item: 0) -> None:
        self.budget = budget
        self.count = count
        self._size = size
        self._heap: list[tuple[Any, Item]] = []  # the kept, worst on top (ranks negated)
        self._used = 0
        self._cutoff: Any = None
        """The best rank dropped so far: nothing ranked after it can be in the prefix."""
        self.total = 0

    def offer(self, rank: Any, make: Callable[[], Item]) -> None:
        """Count an item ranked `rank` (lower is better) and keep it, `make()`, unless it
        cannot be in the prefix (then it is not made)."""
        self.total += 1
        if self._cutoff is not None and rank > self._cutoff:
            return
        item = make()
        heapq.heappush(self._heap, (_Reversed(rank), item))
        self._used += self._size(item)
        while self._heap and (self._used > self.budget or len(self._heap) > self.count):
            dropped_rank, dropped = heapq.heappop(self._heap)
            self._used -= self._size(dropped)
            if self._cutoff is None or dropped_rank.rank < self._cutoff:
                self._cutoff = dropped_rank.rank

    def items(self) -> list[Item]:
        """The kept items, best first."""
        return [item for _, item in sorted(self._heap, key=lambda entry: entry[0].rank)]


class _Reversed:
    """A rank ordered backwards, so that heapq's smallest is the worst kept."""

    __slots__ = ("rank",)

    def __init__(self, rank: Any) -> None:
        self.rank = rank

    def __lt__(self, other: _Reversed) -> bool:
        return other.rank < self.rank
