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


def boards_in_run(events: list[Event], names: list[str], low: float, high: float) -> float:
    """The mean number of boards in the run (not quarantined) between `low` and `high`."""
    out: set[str] = set()
    changes = sorted((t, kind, board) for t, kind, board, _ in events if kind in ("quarantined", "back"))
    total, since = 0.0, low
    for at, kind, board in changes:
        if at > low:
            total += (min(at, high) - since) * (len(names) - len(out))
            since = min(at, high)
        if at >= high:
            break
        (out.add if kind == "quarantined" else out.discard)(board)
    total += (high - since) * (len(names) - len(out))
    return total / (high - low) if high > low else float(len(names) - len(out))


def throughput(finished: list[Finished], events: list[Event], names: list[str]) -> dict[str, Any]:
    """Cases per second over the first and the last THROUGHPUT_SHARE of the finished cases
    (trimmed by THROUGHPUT_TRIM, and untrimmed), per tenth of the run, and per board in the
    run (quarantined boards left out: the speed of hil, not the chaos's toll)."""
    times = sorted(t for t, *_ in finished)
    count = len(times)
    if count < 50:
        return {"first": None, "last": None, "ratio": None, "raw_ratio": None, "deciles": [],
                "per_board_ratio": None}

    def span(low: float, high: float) -> list[float]:
        return times[int(count * low): max(int(count * low) + 2, int(count * high))]

    def rate(low: float, high: float) -> float | None:
        chunk = span(low, high)
        return (len(chunk) - 1) / (chunk[-1] - chunk[0]) if chunk[-1] > chunk[0] else None

    def per_board(low: float, high: float) -> float | None:
        chunk, speed = span(low, high), rate(low, high)
        boards = boards_in_run(events, names, chunk[0], chunk[-1])
        return speed / boards if speed and boards else None

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(b / a, 3) if a and b else None

    share, trim = THROUGHPUT_SHARE, THROUGHPUT_TRIM
    first, last = rate(trim, trim + share), rate(1 - trim - share, 1 - trim)
    return {"first": first, "last": last, "ratio": ratio(first, last),
            "raw_ratio": ratio(rate(0, share), rate(1 - share, 1)),
            "per_board_ratio": ratio(per_board(trim, trim + share),
                                     per_board(1 - trim - share, 1 - trim)),
            "deciles": [round(r, 2) if (r := rate(i / 10, (i + 1) / 10)) else None for i in range(10)],
            "boards_in_run_deciles": [
                round(boards_in_run(events, names, span(i / 10, (i + 1) / 10)[0],
                                    span(i / 10, (i + 1) / 10)[-1]), 2) for i in range(10)]}


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
