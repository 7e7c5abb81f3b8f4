"""The build tuple of a run, read from its results.json, and what changed between two runs.

A run's tuple (results.json schema 5, docs/results-json.md) has one value per element:

| element | value (results.json) | candidates |
|---|---|---|
| `suites` | each suite's digest of its case definitions (`run.suites`) | none: this hil's only |
| `firmware` | the boards' build (`run.boards[].build.after`) | `--firmware-builds DIR` |
| `runner` | the runner's commit, else sha256 (`run.boards[].runner`) | `--runner-repo`, `--runner-build` |
| `python` | `run.packages` and ExecuTorch's commit (`run.executorch_git`) | `--wheels DIR` |
| `sdk`, `hil` | LITECORE's and hil's versions (`run.sdk`, `run.hil`) | none |

Elements are listed cheapest first (what `hil bisect` swaps alone first); an element with no
candidate source is reported as changed, never bisected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ELEMENTS = ("suites", "firmware", "runner", "python", "sdk", "hil")
"""Every element of a tuple, cheapest swap first."""
BISECTABLE = ("firmware", "runner", "python")
"""Elements that can have candidates (a factor `hil bisect` can search)."""


@dataclass(frozen=True)
class BuildTuple:
    """What a run ran with, as its results.json records it (None: not recorded)."""

    suites: dict[str, str]
    """Suite name -> digest of its case definitions (`run.suites.*.digest`)."""
    firmware: str | None
    """The build the boards reported (one value; `mixed` boards are named in `notes`)."""
    runner_commit: str | None
    runner_sha256: str | None
    packages: dict[str, str]
    """The Python side's distributions and versions (`run.packages`)."""
    executorch_git: str | None
    sdk: str | None
    hil: str | None
    notes: tuple[str, ...] = ()
    """What could not be read as one value (boards that disagree, an older schema)."""

    @property
    def runner(self) -> str | None:
        """The runner by its commit, else by its digest."""
        return self.runner_commit or self.runner_sha256

    @property
    def python(self) -> str | None:
        """The Python side as one value: its packages and ExecuTorch's commit."""
        if not self.packages and not self.executorch_git:
            return None
        parts = [f"{name}=={version}" for name, version in sorted(self.packages.items())]
        return " ".join(parts + ([f"executorch@{self.executorch_git[:12]}"] if self.executorch_git else []))

    def value(self, element: str) -> Any:
        """The value of one element (ELEMENTS)."""
        return {"suites": self.suites or None, "firmware": self.firmware, "runner": self.runner,
                "python": self.python, "sdk": self.sdk, "hil": self.hil}[element]

    def record(self) -> dict[str, Any]:
        """As bisect.json writes it."""
        return {"suites": self.suites, "firmware": self.firmware, "runner": {
            "commit": self.runner_commit, "sha256": self.runner_sha256}, "packages": self.packages,
            "executorch_git": self.executorch_git, "sdk": self.sdk, "hil": self.hil,
            "notes": list(self.notes)}


def _one(values: list[Any], what: str, notes: list[str]) -> Any:
    """The one value boards agree on; the first with a note when they do not."""
    distinct = list(dict.fromkeys(v for v in values if v is not None))
    if len(distinct) > 1:
        notes.append(f"the boards' {what} differ: {', '.join(map(str, distinct))}: the first is taken")
    return distinct[0] if distinct else None


def read_tuple(document: dict[str, Any], boards: set[str] | None = None) -> BuildTuple:
    """The tuple of a loaded results document; `boards`: only the boards that ran the cases
    being bisected (their names), else every usable board."""
    run = document.get("run") or {}
    notes: list[str] = []
    records = [b for b in run.get("boards") or [] if isinstance(b, dict) and not b.get("error")]
    if boards:
        records = [b for b in records if b.get("name") in boards] or records
    builds = [(b.get("build") or {}).get("after") or (b.get("properties") or {}).get("ro.build.fingerprint")
              for b in records]
    runners = [b.get("runner") or {} for b in records]
    suites = {name: str(entry.get("digest")) for name, entry in (run.get("suites") or {}).items()
              if isinstance(entry, dict) and entry.get("digest")}
    packages = run.get("packages") if isinstance(run.get("packages"), dict) else {}
    if not packages:
        packages = {name: run[name] for name in ("torch", "executorch") if run.get(name)}
    if document.get("version", 0) < 5:
        notes.append(f"results schema {document.get('version')}: no runner commit, suite digests or "
                     "ExecuTorch commit recorded (hil 5+ writes them)")
    return BuildTuple(
        suites=suites,
        firmware=_one(builds, "builds", notes),
        runner_commit=_one([r.get("commit") for r in runners], "runner commits", notes),
        runner_sha256=_one([r.get("sha256") for r in runners], "runners", notes),
        packages={str(k): str(v) for k, v in packages.items()},
        executorch_git=run.get("executorch_git"),
        sdk=_sdk(run.get("sdk")),
        hil=run.get("hil"),
        notes=tuple(notes),
    )


def _sdk(value: Any) -> str | None:
    """`run.sdk` as one value (a dict with a version, a string, or none)."""
    if isinstance(value, dict):
        return str(value.get("version") or value.get("root") or "") or None
    return str(value) if value else None


@dataclass(frozen=True)
class Change:
    """One element that differs between GOOD and BAD."""

    element: str
    good: Any
    bad: Any
    source: str | None
    """The option its candidates come from; None: changed, not bisected."""

    def record(self) -> dict[str, Any]:
        return {"element": self.element, "good": self.good, "bad": self.bad, "source": self.source,
                "bisected": self.source is not None}


def changes(good: BuildTuple, bad: BuildTuple, sources: dict[str, str]) -> list[Change]:
    """The elements that differ, cheapest first, each with its candidate source (`sources`:
    element -> the option that gives candidates) where the element can have one."""
    found = []
    for element in ELEMENTS:
        before, after = good.value(element), bad.value(element)
        if element == "suites":
            before = {k: v for k, v in (before or {}).items() if k in (after or {})} or None
        if before != after:
            source = sources.get(element) if element in BISECTABLE else None
            found.append(Change(element, before, after, source))
    return found
