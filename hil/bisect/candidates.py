"""A candidate of a factor, and what one board run puts on its board: one build per factor.

Every factor (firmware, runner, Python side) is an ordered list of candidates from the good
tuple's build (index 0) to the bad tuple's (the last); `Builds` names one candidate per
factor a board run changes (None: the factor is left as the board and this hil have it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

FACTORS = ("firmware", "runner", "python")
"""The factors, cheapest swap first (a flash, a build and a push, a venv and a lowering)."""


@dataclass(frozen=True)
class Candidate:
    """One build of one factor."""

    factor: str
    index: int
    """Its place in the factor's order (0: the good tuple's build)."""
    key: str
    """Stable and unique within the factor: a folder's name, a commit, a wheel set's digest."""
    label: str
    """Short, for people: `019-build`, `1a2b3c4d5e6f`, `hil-rig-lowering 3`."""
    path: Path | None = None
    """The folder, or the wheels; a runner's built file is its factor's to know."""
    detail: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """What else bisect.json shows of it (an expected build, a commit's subject)."""

    def record(self) -> dict[str, Any]:
        return {"index": self.index, "key": self.key, "label": self.label, **self.detail}


class Factor(Protocol):
    """The candidates of one factor and how to make one ready for a board."""

    name: str
    """One of FACTORS."""
    source: str
    """The option the candidates come from (`--firmware-builds`)."""
    candidates: list[Candidate]

    def prepare(self, candidate: Candidate) -> str | None:
        """Make `candidate` ready (build it, create its environment); why it cannot be
        (it is then skipped, as `git bisect` skips exit 125), or None."""
        ...


@dataclass(frozen=True)
class Builds:
    """What one board run puts on its board: a candidate per factor, or None (as it is)."""

    firmware: Candidate | None = None
    runner: Candidate | None = None
    python: Candidate | None = None

    def of(self, factor: str) -> Candidate | None:
        return {"firmware": self.firmware, "runner": self.runner, "python": self.python}[factor]

    def swap(self, factor: str, candidate: Candidate | None) -> Builds:
        """These builds with `factor`'s replaced."""
        values = {"firmware": self.firmware, "runner": self.runner, "python": self.python}
        values[factor] = candidate
        return Builds(**values)

    @property
    def key(self) -> str:
        """Identifies the builds across a bisection (and its journal)."""
        return "|".join(f"{factor}={c.key if c else '-'}" for factor in FACTORS
                        if (c := self.of(factor)) is not None) or "as-is"

    def label(self) -> str:
        return ", ".join(f"{factor} {c.label}" for factor in FACTORS
                         if (c := self.of(factor)) is not None) or "as the boards are"

    def record(self) -> dict[str, Any]:
        return {factor: (c.record() if c is not None else None) for factor in FACTORS
                if (c := self.of(factor)) is not None}


def natural_key(text: str) -> list[Any]:
    """Sort key that orders `build-9` before `build-10`."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def ends(count: int, good: int | None, bad: int | None, factor: str) -> tuple[int, int]:
    """The good and bad ends' indexes among `count` ordered candidates: those matched to the
    recorded builds where found, else the first and the last; ValueError when good is not
    before bad."""
    first = 0 if good is None else good
    last = count - 1 if bad is None else bad
    if count < 2 or first >= last:
        raise ValueError(f"{factor}: the good build must come before the bad one in the order "
                         f"(good at {first}, bad at {last} of {count})")
    return first, last
