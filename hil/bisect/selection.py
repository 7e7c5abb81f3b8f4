"""Which cases a bisection runs, and what decides it: `hil compare`'s regressions between GOOD
and BAD (hil/report/compare.py: verdict changes, the latency threshold with Mann-Whitney),
narrowed by `--filter`.

- A case that passed in GOOD and fails in BAD is a *wrong-numbers* regression (any failing
  verdict): these cases run together, one run per candidate, and a run in which any of them
  fails is bad.
- Otherwise a latency regression (or, with `--filter`, any matched case that runs in both):
  the case whose p50 grew most is bisected by its samples; others are listed, not run.
- Cases of GOOD missing from BAD are listed apart, never bisected; so are accuracy
  regressions whose verdict still passes (an error that grew within its tolerance).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

from hil.errors import UsageError
from hil.report.compare import ACCURACY_REGRESSION, LATENCY_REGRESSION, compare_results
from hil.verdict import Verdict


@dataclass
class Selection:
    metric: str
    """`verdict` or `latency`."""
    keys: list[str]
    """The cases run (`suite.precision.id`)."""
    primary: str | None = None
    """The latency case whose samples decide."""
    listed: dict[str, str] = field(default_factory=dict)
    """Cases not bisected, and why."""
    missing: list[str] = field(default_factory=list)
    """Cases of GOOD missing from BAD."""
    changes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """What compare saw of each bisected case (verdicts, latency, p)."""

    def record(self) -> dict[str, Any]:
        return {"metric": self.metric, "bisected": self.keys, "primary": self.primary,
                "compare": self.changes, "listed_apart": self.listed, "missing_from_bad": self.missing}


def _matches(key: str, globs: list[str]) -> bool:
    case_id = key.split(".", 2)[-1]
    return any(fnmatch.fnmatchcase(key, g) or fnmatch.fnmatchcase(case_id, g) for g in globs)


def select(good: dict[str, Any], bad: dict[str, Any], globs: list[str], threshold: float,
           min_delta_ms: float) -> Selection:
    """The selection (module docstring); UsageError when nothing is left to bisect."""
    comparison = compare_results(good, bad, threshold, min_delta_ms)
    rows = [row for row in comparison.rows if not globs or _matches(row.key, globs)]
    missing = [row.key for row in rows if "missing" in row.statuses]
    numbers, latency, listed = [], [], {}
    for row in rows:
        before, after = row.verdicts
        if before is None or after is None:
            continue
        passed_before = Verdict(before).passed
        failed_after = Verdict(after).is_failure and Verdict(after) is not Verdict.XPASS
        if passed_before and failed_after:
            numbers.append(row)
        elif LATENCY_REGRESSION in row.statuses or (
                globs and Verdict(after).passed and row.change is not None):
            latency.append(row)
        elif ACCURACY_REGRESSION in row.statuses:
            listed[row.key] = "accuracy grew but the case still passes: not bisected"
    if numbers:
        for row in latency:
            listed[row.key] = "latency regression: bisect it alone with --filter"
        keys = [row.key for row in numbers]
        changes = {row.key: {"verdicts": list(row.verdicts), "notes": row.notes} for row in numbers}
        return Selection("verdict", keys, None, listed, missing, changes)
    if latency:
        latency.sort(key=lambda row: -(row.change or 0.0))
        primary = latency[0]
        for row in latency[1:]:
            listed[row.key] = "latency regression: bisect it alone with --filter"
        seen = {"verdicts": list(primary.verdicts), "latency_ms": list(primary.latency_ms),
                "change": primary.change, "p": primary.p_value}
        return Selection("latency", [primary.key], primary.key, listed, missing, {primary.key: seen})
    what = f"--filter {' '.join(globs)}" if globs else "no case regressed between GOOD and BAD"
    raise UsageError(f"{what}: nothing to bisect (a case that passed and fails, or whose latency "
                     "grew; --filter KEY bisects a case's latency all the same)"
                     + (f"; missing from BAD: {', '.join(missing[:5])}" if missing else ""))
