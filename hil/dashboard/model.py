"""What the dashboard shows, read from results documents: runs grouped into nights and lanes,
the pass/fail matrix, the latency regressions as `hil compare` judges them, the SQNR movers,
the boards' health and the localized cases. Data only: no HTML, no plotting here.

A *night* is the UTC date a run started. A *lane* is one chipset, flow and precision: a run
that ran both precisions feeds two lanes. Each night of a lane is compared with the previous
night of the same lane (`hil.report.compare.compare_results`, the same thresholds and the
same Mann-Whitney test as `hil compare`); two runs of one lane on one night (shards not
merged, or a re-run) are read as one, the later run's record of a case winning.
"""

from __future__ import annotations

import math
import shlex
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hil.errors import UsageError
from hil.report.compare import (
    ACCURACY_REGRESSION,
    DEFAULT_MIN_DELTA_MS,
    DEFAULT_THRESHOLD,
    LATENCY_REGRESSION,
    compare_results,
)
from hil.report.results import case_key
from hil.verdict import Verdict

Lane = tuple[str, str, str]
"""(chipset, flow, precision)."""
MAX_MOVERS = 15
"""SQNR movers listed (largest drop first)."""
MIN_MOVE_DB = 1.0
"""A smaller SQNR drop is the measurement's own noise: not a mover."""


@dataclass(frozen=True)
class Run:
    """One results file as read."""

    path: Path
    document: dict[str, Any]

    @property
    def started(self) -> str:
        return str(self.document["run"].get("started") or "")

    @property
    def night(self) -> str:
        """The UTC date the run started, `2026-11-30`."""
        return self.started[:10]

    @property
    def chipset(self) -> str:
        return str(self.document["run"].get("chipset") or "?")

    @property
    def flow(self) -> str:
        return str(self.document["run"].get("flow") or "?")


CASE_FIELDS = ("suite", "precision", "id", "verdict", "board", "latency_ms", "outputs",
               "localization", "expected", "actual_verdict", "message")
"""The case fields the dashboard reads (`hil compare`'s among them); logs, details and
earlier attempts are let go at once: twenty nights of a lab's sweep stay in memory."""


def dated_run(path: Path, document: dict[str, Any]) -> Run:
    """The Run of a loaded document, its cases cut to CASE_FIELDS; UsageError naming the file
    when it has no start date."""
    started = document["run"].get("started")
    if not isinstance(started, str) or len(started) < 10 or started[4] != "-":
        raise UsageError(f"{path}: field 'run.started' is {started!r}, expected an ISO 8601 time")
    cases = [{name: case[name] for name in CASE_FIELDS if name in case} for case in document["cases"]]
    return Run(Path(path), {**document, "cases": cases})


@dataclass
class Cell:
    """One suite × precision × chipset × flow on one night of the matrix."""

    counts: Counter = field(default_factory=Counter)
    failing: list[str] = field(default_factory=list)
    """`KEY: VERDICT` of every failed or errored case."""
    bisect: str | None = None
    """When a case of the cell passed the previous night of its chipset and flow and fails
    now: the `hil bisect` command that would find the build that broke it."""

    @property
    def failed(self) -> int:
        return sum(n for v, n in self.counts.items() if Verdict(v).is_failure)

    @property
    def errors(self) -> int:
        return sum(n for v, n in self.counts.items() if Verdict(v).is_error)

    @property
    def passed(self) -> int:
        return sum(n for v, n in self.counts.items() if Verdict(v).passed)

    @property
    def known(self) -> int:
        """Known failures (XFAIL) and skipped cases: neither passed nor failed."""
        return self.counts[Verdict.XFAIL.value] + self.counts[Verdict.SKIP.value]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def state(self) -> str:
        """fail, error or pass: the colour of the cell."""
        return "fail" if self.failed else "error" if self.errors else "pass"


@dataclass(frozen=True)
class Flag:
    """A latency regression of one case, night against the previous night of its lane."""

    night: str
    base_night: str
    lane: Lane
    key: str
    latency_ms: tuple[float, float]
    change: float
    p_value: float | None
    notes: str


@dataclass(frozen=True)
class Mover:
    """A case whose worst output SQNR dropped from one night of its lane to the next."""

    night: str
    base_night: str
    lane: Lane
    key: str
    sqnr_db: tuple[float, float]
    verdict: str

    @property
    def drop(self) -> float:
        return self.sqnr_db[0] - self.sqnr_db[1]


@dataclass(frozen=True)
class Health:
    """The boards of one run (a night of a chipset and flow)."""

    night: str
    chipset: str
    flow: str
    boards: int
    quarantines: int
    """Times a board was taken out of the run (each probation series counts once)."""
    recoveries: int
    """Recovery steps tried (reconnect, reboot, power-cycle)."""
    recoveries_failed: int
    out_at_end: list[str]
    """`board: why` of the boards still quarantined when the run ended."""
    capacity_lost: float | None
    """`run.capacity_lost.fraction` (board-seconds out of the run), None when not recorded."""
    board_seconds_out: float | None


@dataclass
class Dashboard:
    """Everything the page shows."""

    runs: list[Run]
    nights: list[str]
    """Oldest first."""
    lanes: dict[Lane, list[tuple[str, dict[str, Any]]]]
    """Per lane, its nights in order with the lane's document of that night."""
    matrix: dict[tuple[str, str, str, str], dict[str, Cell]]
    """(suite, precision, chipset, flow) -> night -> cell."""
    flags: list[Flag]
    accuracy: dict[str, int]
    """Night -> accuracy regressions (compare's), for the summary lines."""
    movers: list[Mover]
    health: list[Health]
    threshold: float
    min_delta_ms: float


def _lane_documents(runs: list[Run]) -> dict[Lane, list[tuple[str, dict[str, Any]]]]:
    grouped: dict[Lane, dict[str, dict[str, Any]]] = defaultdict(dict)
    for run in sorted(runs, key=lambda r: r.started):
        for precision in dict.fromkeys(c["precision"] for c in run.document["cases"]):
            lane = (run.chipset, run.flow, precision)
            cases = {case_key(c): c for c in run.document["cases"] if c["precision"] == precision}
            night = grouped[lane].get(run.night)
            if night is None:
                grouped[lane][run.night] = {**run.document, "cases": list(cases.values())}
            else:  # a second run of the lane that night: its records win
                merged = {case_key(c): c for c in night["cases"]} | cases
                grouped[lane][run.night] = {**run.document, "cases": list(merged.values())}
    return {lane: sorted(nights.items()) for lane, nights in sorted(grouped.items())}


def _matrix(runs: list[Run]) -> dict[tuple[str, str, str, str], dict[str, Cell]]:
    latest: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}
    for run in sorted(runs, key=lambda r: r.started):
        for case in run.document["cases"]:
            latest[(run.night, run.chipset, run.flow, case["suite"], case_key(case))] = case
    matrix: dict[tuple[str, str, str, str], dict[str, Cell]] = defaultdict(dict)
    for (night, chipset, flow, suite, key), case in latest.items():
        cell = matrix[(suite, case["precision"], chipset, flow)].setdefault(night, Cell())
        cell.counts[case["verdict"]] += 1
        verdict = Verdict(case["verdict"])
        if verdict.is_failure or verdict.is_error:
            cell.failing.append(f"{key}: {verdict.value}")
    return dict(sorted(matrix.items()))


def bisect_command(good: Path, bad: Path, suite: str, precision: str) -> str:
    """`hil bisect` of one cell: the nights' results files and the cell's cases; the boards and
    the candidates (--inventory, --firmware-builds, --runner-repo/--runner-build, --wheels) are
    the lab's to add."""
    return shlex.join(["hil", "bisect", "--good", str(good), "--bad", str(bad),
                       "--filter", f"{suite}.{precision}.*"])


def _bisect_commands(runs: list[Run], matrix: dict[tuple[str, str, str, str], dict[str, Cell]]) -> None:
    """Each cell with a case that passed on the previous night of its chipset and flow and
    fails now gets the command that would bisect it (`Cell.bisect`)."""
    last: dict[tuple[str, str, str], tuple[str, Path, str]] = {}
    for run in sorted(runs, key=lambda r: r.started):
        for case in run.document["cases"]:
            where = (run.chipset, run.flow, case_key(case))
            before = last.get(where)
            if (before is not None and before[0] < run.night and Verdict(before[2]).passed
                    and Verdict(case["verdict"]).is_failure):
                row = (case["suite"], case["precision"], run.chipset, run.flow)
                cell = matrix.get(row, {}).get(run.night)
                if cell is not None and cell.bisect is None:
                    cell.bisect = bisect_command(before[1], run.path, case["suite"], case["precision"])
            last[where] = (run.night, run.path, case["verdict"])


def _worst_sqnr(case: dict[str, Any]) -> float | None:
    values = [o["sqnr_db"] for o in case.get("outputs") or []
              if isinstance(o.get("sqnr_db"), (int, float)) and not isinstance(o.get("sqnr_db"), bool)
              and math.isfinite(o["sqnr_db"])]
    return min(values, default=None)


def _judge(lanes: dict[Lane, list[tuple[str, dict[str, Any]]]], threshold: float,
           min_delta_ms: float) -> tuple[list[Flag], dict[str, int], list[Mover]]:
    flags, movers = [], []
    accuracy: Counter = Counter()
    for lane, nights in lanes.items():
        for (base_night, base), (night, new) in zip(nights, nights[1:], strict=False):
            comparison = compare_results(base, new, threshold, min_delta_ms)
            for row in comparison.rows:
                if ACCURACY_REGRESSION in row.statuses:
                    accuracy[night] += 1
                if LATENCY_REGRESSION in row.statuses and row.change is not None:
                    old, now = row.latency_ms
                    assert old is not None and now is not None
                    notes = [n for n in row.notes if not n.startswith("p = ")]  # p has its column
                    flags.append(Flag(night, base_night, lane, row.key, (old, now), row.change,
                                      row.p_value, "; ".join(notes)))
            before = {case_key(c): _worst_sqnr(c) for c in base["cases"]}
            for case in new["cases"]:
                old, now = before.get(case_key(case)), _worst_sqnr(case)
                if old is not None and now is not None and old - now >= MIN_MOVE_DB:
                    movers.append(Mover(night, base_night, lane, case_key(case), (old, now),
                                        case["verdict"]))
    movers.sort(key=lambda m: (-m.drop, m.night, m.key))
    flags.sort(key=lambda f: (f.night, f.lane, f.key))
    return flags, dict(accuracy), movers[:MAX_MOVERS]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def health_of(run: Run) -> Health:
    """The boards' health of one run: quarantines and recovery steps from `run.boards`,
    capacity lost from `run.capacity_lost` when the run records it."""
    boards = [b for b in run.document["run"].get("boards") or []
              if not b.get("error") and not b.get("left_out")]
    quarantines = recoveries = failed = 0
    out_at_end = []
    for board in boards:
        probation = board.get("probation") or []
        # a probation series starts at the first check, or after a board that came back
        quarantines += sum(1 for i, check in enumerate(probation)
                           if i == 0 or (probation[i - 1].get("back") is True))
        if board.get("quarantined") and not probation:
            quarantines += 1
        steps = board.get("recovery") or []
        recoveries += len(steps)
        failed += sum(1 for step in steps if step.get("recovered") is False)
        if board.get("quarantined"):
            out_at_end.append(f"{board.get('name')}: {board['quarantined']}")
    lost = run.document["run"].get("capacity_lost")
    lost = lost if isinstance(lost, dict) else {}
    return Health(run.night, run.chipset, run.flow, len(boards), quarantines, recoveries, failed,
                  out_at_end, _number(lost.get("fraction")), _number(lost.get("board_seconds_out")))


def build(runs: list[Run], threshold: float = DEFAULT_THRESHOLD,
          min_delta_ms: float = DEFAULT_MIN_DELTA_MS) -> Dashboard:
    """The dashboard of `runs` (any order)."""
    if not runs:
        raise UsageError("dashboard: no results file given")
    runs = sorted(runs, key=lambda r: (r.started, str(r.path)))
    lanes = _lane_documents(runs)
    flags, accuracy, movers = _judge(lanes, threshold, min_delta_ms)
    matrix = _matrix(runs)
    _bisect_commands(runs, matrix)
    return Dashboard(
        runs=runs,
        nights=sorted({run.night for run in runs}),
        lanes=lanes,
        matrix=matrix,
        flags=flags,
        accuracy=accuracy,
        movers=movers,
        health=[health_of(run) for run in runs],
        threshold=threshold,
        min_delta_ms=min_delta_ms,
    )


def night_state(board: Dashboard, night: str) -> str:
    """fail (a case failed or a regression), error (infrastructure errors or a board out), or
    pass: the colour of a night's summary line."""
    cells = [nights[night] for nights in board.matrix.values() if night in nights]
    if any(cell.failed for cell in cells) or board.accuracy.get(night) or any(
            f.night == night for f in board.flags):
        return "fail"
    if any(cell.errors for cell in cells) or any(h.quarantines for h in board.health if h.night == night):
        return "error"
    return "pass"


def summary_line(board: Dashboard, night: str) -> str:
    """One plain sentence about a night: its runs, verdicts, regressions and boards."""
    runs = [run for run in board.runs if run.night == night]
    cells = [(key, nights[night]) for key, nights in board.matrix.items() if night in nights]
    total = sum(cell.total for _, cell in cells)
    passed = sum(cell.passed for _, cell in cells)
    failed = sum(cell.failed for _, cell in cells)
    errors = sum(cell.errors for _, cell in cells)
    known = sum(cell.known for _, cell in cells)
    chipsets = ", ".join(sorted({f"{r.chipset}/{r.flow}" for r in runs}))
    parts = [f"{len(runs)} run(s) ({chipsets}): {total} cases, {passed} passed"
             + (f", {known} known failure(s) or skipped" if known else "")]
    if failed:
        where = [f"{chipset} {precision} {suite}" for (suite, precision, chipset, _), cell in cells
                 if cell.failed]
        parts.append(f"{failed} failed ({', '.join(where[:4])}{' ...' if len(where) > 4 else ''})")
    if errors:
        parts.append(f"{errors} infrastructure error(s)")
    flags = [f for f in board.flags if f.night == night]
    parts.append(f"{len(flags)} latency regression(s)" if flags else "no latency regression")
    if board.accuracy.get(night):
        parts.append(f"{board.accuracy[night]} accuracy regression(s)")
    health = [h for h in board.health if h.night == night]
    quarantines = sum(h.quarantines for h in health)
    if quarantines:
        parts.append(f"{quarantines} board quarantine(s)")
    out = [name for h in health for name in h.out_at_end]
    if out:
        parts.append(f"{len(out)} board(s) out at the end")
    lost = [h for h in health if h.capacity_lost is not None]
    if lost:
        worst = max(lost, key=lambda h: h.capacity_lost or 0.0)
        if worst.capacity_lost:
            parts.append(f"capacity lost to recovery up to {worst.capacity_lost * 100:.1f}% "
                         f"({worst.chipset})")
    return "; ".join(parts) + "."
