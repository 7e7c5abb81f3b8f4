"""How fast the soak went, apart from its warm-up and drain: cases per second of the first and
the last tenth of the cases (in total, per tenth, per board in the run) and hil's steady
pace, a board's time per passing case with the gaps of recovery left out."""

from __future__ import annotations

import statistics
from typing import Any

from .hilrun import Event, Finished

THROUGHPUT_SHARE = 0.1
"""The first and the last 10 % of the cases, by the order they finished..."""
THROUGHPUT_TRIM = 0.01
"""...each window moved in by 1 % of the cases: the first ones wait for the boards'
executors to warm up, and the last ones are the drain (idle boards waiting for a straggler
that is retried after an infrastructure error), neither of which is a speed of hil."""
STEADY_GAP_S = 2.0
"""A board's attempt follows its previous one within this: no recovery or sit-out between."""


Intervals = list[tuple[float, float]]


def out_of_run(events: list[Event], names: list[str], end: float) -> dict[str, Intervals]:
    """Each board's quarantines as (from, to) epoch seconds; one still open ends at `end`."""
    out: dict[str, Intervals] = {name: [] for name in names}
    since: dict[str, float] = {}
    for at, kind, board, _ in sorted(e for e in events if e.kind in ("quarantined", "back")):
        if kind == "quarantined":
            since.setdefault(board, at)
        elif board in since:
            out.setdefault(board, []).append((since.pop(board), at))
    for board, at in since.items():
        out.setdefault(board, []).append((at, max(at, end)))
    return out


def without(intervals: Intervals, holes: Intervals) -> Intervals:
    """The parts of `intervals` outside every one of `holes`."""
    left = list(intervals)
    for low, high in holes:
        left = [part for a, b in left
                for part in ((a, min(b, low)), (max(a, high), b)) if part[1] > part[0]]
    return left


def seconds_within(intervals: Intervals, low: float, high: float) -> float:
    """How much of `intervals` (disjoint) lies between `low` and `high`."""
    return sum(max(0.0, min(b, high) - max(a, low)) for a, b in intervals)


def boards_in_run(out: dict[str, Intervals], low: float, high: float) -> float:
    """The mean number of boards in the run (not out) between `low` and `high`."""
    if high <= low:
        return float(sum(not any(a <= low < b for a, b in spans) for spans in out.values()))
    return len(out) - sum(seconds_within(spans, low, high) for spans in out.values()) / (high - low)


def throughput(finished: list[Finished], events: list[Event], names: list[str],
               held: dict[str, Intervals]) -> dict[str, Any]:
    """Cases per second over the first and the last THROUGHPUT_SHARE of the finished cases
    (trimmed by THROUGHPUT_TRIM, and untrimmed), per tenth of the run, and per board in the
    run (quarantined boards left out: the speed of hil, not the chaos's toll). Per tenth, the
    boards in the run, and the boards in the run or out while a state fault dealt to them
    still `held` (the gap from there to all boards is what the policy's waits and checks and
    the ladders cost, not a fault's own seconds)."""
    times = sorted(t for t, *_ in finished)
    count = len(times)
    if count < 50:
        return {"first": None, "last": None, "ratio": None, "raw_ratio": None, "deciles": [],
                "per_board_ratio": None}
    out = out_of_run(events, names, times[-1])
    out_not_held = {board: without(spans, held.get(board, [])) for board, spans in out.items()}

    def span(low: float, high: float) -> list[float]:
        return times[int(count * low): max(int(count * low) + 2, int(count * high))]

    def rate(low: float, high: float) -> float | None:
        chunk = span(low, high)
        return (len(chunk) - 1) / (chunk[-1] - chunk[0]) if chunk[-1] > chunk[0] else None

    def per_board(low: float, high: float) -> float | None:
        chunk, speed = span(low, high), rate(low, high)
        boards = boards_in_run(out, chunk[0], chunk[-1])
        return speed / boards if speed and boards else None

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(b / a, 3) if a and b else None

    def edges(i: int) -> tuple[float, float]:
        chunk = span(i / 10, (i + 1) / 10)
        return chunk[0], chunk[-1]

    share, trim = THROUGHPUT_SHARE, THROUGHPUT_TRIM
    first, last = rate(trim, trim + share), rate(1 - trim - share, 1 - trim)
    return {"first": first, "last": last, "ratio": ratio(first, last),
            "raw_ratio": ratio(rate(0, share), rate(1 - share, 1)),
            "per_board_ratio": ratio(per_board(trim, trim + share),
                                     per_board(1 - trim - share, 1 - trim)),
            "deciles": [round(r, 2) if (r := rate(i / 10, (i + 1) / 10)) else None for i in range(10)],
            "boards_in_run_deciles": [
                round(boards_in_run(out, *edges(i)), 2) for i in range(10)],
            "boards_in_run_or_held_deciles": [
                round(boards_in_run(out_not_held, *edges(i)), 2) for i in range(10)],
            "quarantined_board_s": round(sum(b - a for spans in out.values() for a, b in spans), 1),
            "quarantined_not_held_board_s": round(
                sum(b - a for spans in out_not_held.values() for a, b in spans), 1),
            "board_s": round(len(names) * (times[-1] - times[0]), 1)}


def steady_pace(attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """hil's own pace, apart from the chaos's toll: the median time a board spends per
    passing attempt (the attempt plus the idle time since its previous one ended), over the
    first and the last THROUGHPUT_SHARE of such attempts. Throughput also counts boards out of
    the run, recoveries and timeouts; this does not, so a hil that slows down with the
    number of cases (a per-case cost growing with the run) shows here."""
    previous: dict[str, float] = {}
    paces: list[tuple[float, float]] = []
    for attempt in sorted(attempts, key=lambda a: a["started"]):
        board, before = attempt["board"], previous.get(attempt["board"])
        previous[board] = attempt["finished"]
        if attempt["verdict"] != "PASS" or before is None or attempt["started"] - before > STEADY_GAP_S:
            continue
        paces.append((attempt["finished"], attempt["finished"] - before))
    paces.sort()
    window = int(len(paces) * THROUGHPUT_SHARE)
    if window < 10:
        return {"steady_case_ms_first": None, "steady_case_ms_last": None,
                "steady_speed_last_vs_first": None}
    first = statistics.median(p for _t, p in paces[:window])
    last = statistics.median(p for _t, p in paces[-window:])
    return {"steady_case_ms_first": round(first * 1000, 1), "steady_case_ms_last": round(last * 1000, 1),
            "steady_speed_last_vs_first": round(first / last, 3) if last > 0 else None}
