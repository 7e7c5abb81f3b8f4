"""The analysis: what came of a soak, from results.json, the JUnit file and what the driver
saw. Every planned case reported exactly once in both files; each fault's fate (the verdict of
the attempt it fired in; unhandled when hil did not classify it: a runner fault that ended
PASS, an ERROR_INTERNAL, a traceback); hil's RSS, fds and threads; what was left running or
connected; speed (`pace.py`). `figures()` is the soak's JSON report, `invariants()` what must
hold in it."""

from __future__ import annotations

import collections
import datetime as dt
import math
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from hil.virtual.faults import KINDS

from .boards import Fired
from .deck import SERVER_KILL, Injection, is_state
from .driver import Observed
from .pace import steady_pace, throughput

MUST_FAIL_RUN = {"crash", "hang", "truncate-output", "missing-output"}
"""Runner faults: the attempt they fire in can only be FAIL_RUN (a PASS is a silent green)."""
MUST_FAIL_MISMATCH = {"miscompute", "noise"}
"""Wrong numbers (every program's outputs off by half their RMS): FAIL_MISMATCH, never PASS."""
FD_SLACK = 8
THREAD_SLACK = 8
CAPACITY_GOAL = 3.25 / 4
"""The policy's capacity goal (a): in the worst tenth of the run, the boards in the run or
held by a dealt state fault are at least this share of all boards (3.25 of 4)."""
KEPT_OUT_GOAL = 0.05
"""The policy's capacity goal (b): the board-seconds it kept a board out while no fault held
it are at most this share of all board-seconds."""


def figures(seen: Observed) -> dict[str, Any]:  # noqa: C901 - one figure after another
    """The soak's figures (its JSON report), `invariants_failed` last."""
    report: dict[str, Any] = {"planned": len(seen.planned)}
    try:
        from hil.report.results import load_results

        document = load_results(seen.out / "results.json")
        cases = document["cases"]
        report["results_valid"] = True
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        report["results_valid"] = f"{type(exc).__name__}: {exc}"
        document, cases = {"run": {}}, []
    try:
        in_junit = junit_keys(seen.out / "junit.xml")
        report["junit_valid"] = True
    except Exception as exc:  # noqa: BLE001
        report["junit_valid"] = f"{type(exc).__name__}: {exc}"
        in_junit = collections.Counter()
    in_results = collections.Counter(f"{c['suite']}.{c['precision']}.{c['id']}" for c in cases)
    printed = collections.Counter(f.key for f in seen.finished)
    planned_set = set(seen.planned)
    interrupted = document["run"].get("status") == "interrupted"
    expected = set(printed) if interrupted else planned_set
    report["reported"] = len(in_results)
    report["duplicates"] = (sum(n - 1 for n in in_results.values() if n > 1)
                            + sum(n - 1 for n in in_junit.values() if n > 1))
    report["lost"] = (len(expected - set(in_results)) + len(expected - set(in_junit))
                      + len(set(in_results) - planned_set))
    report["reported_not_printed"] = len(set(in_results) - set(printed))
    report["status"] = document["run"].get("status")
    report["verdicts"] = dict(collections.Counter(c["verdict"] for c in cases))

    infra: collections.Counter[str] = collections.Counter()
    for case in cases:
        chain = [a["verdict"] for a in case.get("earlier_attempts") or []] + [case["verdict"]]
        if "ERROR_INFRA" in chain:
            if case["verdict"] == "PASS":
                infra["retried to PASS"] += 1
            elif case["verdict"] == "ERROR_INFRA":
                infra["reported ERROR_INFRA"] += 1
            else:
                infra[f"retried to {case['verdict']}"] += 1
    report["infra_errors"] = dict(infra)
    boards = {}
    for entry in document["run"].get("boards") or []:
        name = entry.get("name")
        boards[name] = {
            "quarantined": [e.detail for e in seen.events if e.kind == "quarantined" and e.board == name],
            "came_back": sum(1 for e in seen.events if e.kind == "back" and e.board == name),
            "recoveries": sum(1 for e in seen.events if e.kind == "recovery" and e.board == name),
            "cases": sum(1 for c in cases if c.get("board") == name),
            "error": entry.get("error"),
            "board_seconds_out": entry.get("board_seconds_out"),
            "health_checks": [(p.get("out_s"), p.get("health_check") == "passed")
                              for p in entry.get("probation") or [] if isinstance(p, dict)],
        }
    report["boards"] = boards
    report["boards_not_usable"] = {n: b["error"] for n, b in boards.items() if b["error"]}
    report["boards_quarantined"] = sum(1 for b in boards.values() if b["quarantined"])
    report["boards_came_back"] = sum(1 for b in boards.values() if b["came_back"])
    report["quarantines"] = sum(len(b["quarantined"]) for b in boards.values())
    report["capacity_lost"] = document["run"].get("capacity_lost")

    attempts = attempts_of(cases)
    fates = fault_fates(seen.injections, seen.fired, attempts)
    report["faults_injected"] = len(seen.injections)
    report["faults_during_recovery"] = sum(i.during_recovery for i in seen.injections)
    report["faults_on_two_boards"] = sum(i.pair for i in seen.injections)
    report["fault_kinds"] = fates["kinds"]
    report["fault_kinds_not_injected"] = sorted(
        ({*KINDS, SERVER_KILL} - set(seen.skipped)) - {i.kind for i in seen.injections})
    report["fault_kinds_skipped"] = seen.skipped
    report["unhandled_detail"] = fates["unhandled"]
    errors_internal = [c for c in cases if c["verdict"] == "ERROR_INTERNAL"]
    report["unhandled_faults"] = len(fates["unhandled"]) + seen.tracebacks + sum(
        1 for c in errors_internal if not any("ERROR_INTERNAL" in u for u in fates["unhandled"]))
    report["hil_tracebacks"] = seen.tracebacks
    report["unexplained_failures"] = unexplained(attempts, seen.injections, seen.fired)

    held: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    for injection in seen.injections:
        if is_state(injection.spec):  # held from its injection until the soak cleared it
            held[injection.board].append((injection.at, injection.cleared_at or math.inf))
    speed = throughput(seen.finished, seen.events, seen.board_names, held)
    report["throughput_first_cases_per_s"] = round(speed["first"], 3) if speed["first"] else None
    report["throughput_last_cases_per_s"] = round(speed["last"], 3) if speed["last"] else None
    report["throughput_last_vs_first"] = speed["ratio"]
    report["throughput_last_vs_first_untrimmed"] = speed["raw_ratio"]
    report["throughput_per_board_in_run_last_vs_first"] = speed["per_board_ratio"]
    report["boards_in_run_deciles"] = speed.get("boards_in_run_deciles")
    report["boards_in_run_or_held_deciles"] = speed.get("boards_in_run_or_held_deciles")
    report["quarantined_board_s"] = speed.get("quarantined_board_s")
    report["quarantined_not_held_board_s"] = speed.get("quarantined_not_held_board_s")
    report["throughput_deciles"] = speed["deciles"]
    report.update(capacity_goals(speed, len(seen.board_names)))
    report.update(steady_pace(attempts))
    first, last = seen.first, seen.last
    if first and last:
        report.update(
            rss_start_mb=round(first.rss_mb, 1), rss_end_mb=round(last.rss_mb, 1),
            rss_growth_mb=round(last.rss_mb - first.rss_mb, 1),
            rss_peak_mb=round(seen.peak.rss_mb, 1) if seen.peak else None,
            fds_start=first.fds, fds_end=last.fds, fd_growth=last.fds - first.fds,
            threads_start=first.threads, threads_end=last.threads,
            thread_growth=last.threads - first.threads,
            adb_client_connections_start=first.adb_client_connections,
            adb_client_connections_end=last.adb_client_connections,
            fd_kinds_start=first.fd_kinds, fd_kinds_end=last.fd_kinds,
        )
    else:
        report.update(rss_growth_mb=None, fd_growth=None, thread_growth=None)
    written = seen.results_write
    report["results_write_s"] = written[2] if written else None
    report["junit_write_s"] = written[3] if written else None
    report.update(
        seed=seen.seed, hil_exit=seen.hil_exit, wall_s=seen.wall_s, timed_out=seen.timed_out,
        interrupted=seen.interrupted, sigterm_to_exit_s=seen.sigterm_to_exit_s,
        processes_left=len(seen.processes_left), processes_left_detail=seen.processes_left,
        adb_connections_left=seen.adb_connections_left, load_before=seen.load_before,
        load_after=seen.load_after,
    )
    report["invariants_failed"] = invariants(report)
    return report


def capacity_goals(speed: dict[str, Any], boards: int) -> dict[str, Any]:
    """The policy judged on what it controls (docs: reliability): (a) the worst decile of
    the boards in the run or held by a dealt fault against CAPACITY_GOAL of `boards`, (b) the
    share of all board-seconds kept out while no fault held the board against KEPT_OUT_GOAL;
    each with whether it is met (None when the run was too short to say)."""
    deciles = [d for d in speed.get("boards_in_run_or_held_deciles") or [] if d is not None]
    worst = min(deciles, default=None)
    out, total = speed.get("quarantined_not_held_board_s"), speed.get("board_s")
    share = round(out / total, 4) if out is not None and total else None
    return {
        "capacity_worst_decile_in_run_or_held": worst,
        "capacity_goal_boards": round(CAPACITY_GOAL * boards, 2),
        "capacity_goal_met": None if worst is None else worst >= CAPACITY_GOAL * boards,
        "kept_out_not_held_share": share,
        "kept_out_goal_share": KEPT_OUT_GOAL,
        "kept_out_goal_met": None if share is None else share <= KEPT_OUT_GOAL,
    }


def invariants(report: dict[str, Any]) -> list[str]:
    """What must hold after any soak, interrupted or not."""
    failed = []
    for key in ("lost", "duplicates", "unhandled_faults", "processes_left", "adb_connections_left"):
        if report.get(key) != 0:
            failed.append(f"{key} = {report.get(key)}")
    if report.get("boards_not_usable"):  # a soak of boards that never came up soaks nothing
        failed.append(f"boards not usable: {report['boards_not_usable']}")
    for key in ("results_valid", "junit_valid"):
        if report.get(key) is not True:
            failed.append(f"{key}: {report.get(key)}")
    for key, slack in (("fd_growth", FD_SLACK), ("thread_growth", THREAD_SLACK)):
        value = report.get(key)
        if value is not None and abs(value) > slack:
            failed.append(f"{key} = {value} (more than +-{slack})")
    if report.get("interrupted"):
        if report.get("hil_exit") != 130:
            failed.append(f"hil exited {report.get('hil_exit')} after SIGTERM, not 130")
        if (report.get("sigterm_to_exit_s") or 0) > 10:
            failed.append(f"hil took {report['sigterm_to_exit_s']} s to exit after SIGTERM")
    else:
        if report.get("timed_out"):
            failed.append("the run did not end within --max-minutes")
        if report.get("reported") != report.get("planned"):
            failed.append(f"reported {report.get('reported')} of {report.get('planned')}")
    return failed


def _epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def attempts_of(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every attempt on a board: board, verdict, started, finished (epoch), case key."""
    found = []
    for case in cases:
        key = f"{case['suite']}.{case['precision']}.{case['id']}"
        for attempt in [*(case.get("earlier_attempts") or []), case]:
            if attempt.get("board") and attempt.get("started"):
                found.append({"key": key, "board": attempt["board"], "verdict": attempt["verdict"],
                              "message": (attempt.get("message") or "")[:160],
                              "started": _epoch(attempt["started"]),
                              "finished": _epoch(attempt["finished"])})
    return sorted(found, key=lambda a: a["started"])


def junit_keys(path: Path) -> collections.Counter[str]:
    root = ET.parse(path).getroot()  # noqa: S314 - hil's own file
    return collections.Counter(f"{tc.get('classname')}.{tc.get('name')}" for tc in root.iter("testcase"))


def _new_kind() -> dict[str, Any]:
    return {"injected": 0, "fired": 0, "during_recovery": 0, "pair": 0,
            "outcomes": collections.Counter(), "unhandled": 0, "examples": []}


def fault_fates(injections: list[Injection], fired: list[Fired],
                attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """Per fault kind: injected, fired, during recovery, on two boards, the verdicts of the
    attempts they fired in, and how many were unhandled."""
    by_board: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for attempt in attempts:
        by_board[attempt["board"]].append(attempt)

    def attempt_at(board: str, at: float, slack: float = 0.05) -> dict[str, Any] | None:
        """The attempt running on `board` at `at`: the one that contains it, else the nearest
        within `slack` (stamps are to the millisecond; a fault the soak applies itself lands
        a little after the soak's stamp of it)."""
        attempts = by_board.get(board, [])
        inside = [a for a in attempts if a["started"] <= at <= a["finished"]]
        if inside:
            return max(inside, key=lambda a: a["started"])
        near = [a for a in attempts if a["started"] - slack <= at <= a["finished"] + slack]
        return min(near, key=lambda a: min(abs(at - a["started"]), abs(at - a["finished"])),
                   default=None)

    kinds: dict[str, dict[str, Any]] = {}
    for injection in injections:
        entry = kinds.setdefault(injection.kind, _new_kind())
        entry["injected"] += 1
        entry["during_recovery"] += injection.during_recovery
        entry["pair"] += injection.pair
    unhandled: list[str] = []
    for at, board, kind, event in fired:
        entry = kinds.setdefault(kind, _new_kind())
        entry["fired"] += 1
        # the board stamps an event fault inside its attempt: 42 ms after a PASS is the next
        # attempt's (one a SIGTERM left out of the results), not that PASS's
        attempt = attempt_at(board, at, slack=0.002)
        outcome = attempt["verdict"] if attempt else "between cases"
        entry["outcomes"][outcome] += 1
        if attempt and len(entry["examples"]) < 3:
            entry["examples"].append(f"{attempt['key']}: {attempt['verdict']} {attempt['message']}")
        bad = outcome == "ERROR_INTERNAL" or (kind in MUST_FAIL_RUN | MUST_FAIL_MISMATCH
                                                      and outcome == "PASS")
        if bad:
            entry["unhandled"] += 1
            unhandled.append(f"{kind} on {event} at {board} {at:.3f}: {outcome} "
                             f"({attempt['key'] if attempt else '-'})")
    # faults applied at once (on=now, the adb server's death) and state faults: no board line
    for injection in injections:
        if injection.kind == SERVER_KILL or ",on=now" in injection.spec or is_state(injection.spec):
            entry = kinds[injection.kind]
            entry["fired"] += 1
            attempt = attempt_at(injection.board, injection.at)
            entry["outcomes"][attempt["verdict"] if attempt else "between cases"] += 1
            if attempt and len(entry["examples"]) < 3:
                entry["examples"].append(f"{attempt['key']}: {attempt['verdict']} {attempt['message']}")
    for entry in kinds.values():
        entry["outcomes"] = dict(entry["outcomes"])
    return {"kinds": kinds, "unhandled": unhandled}


def unexplained(attempts: list[dict[str, Any]], injections: list[Injection],
                fired: list[Fired]) -> list[str]:
    """Attempts that did not pass with no fault on their board (nor the adb server's death)
    since the board's previous attempt ended: a failure the chaos did not cause."""
    moments: dict[str, list[float]] = collections.defaultdict(list)
    global_moments: list[float] = []
    for injection in injections:
        if injection.kind == SERVER_KILL:
            global_moments.append(injection.at)
        else:
            moments[injection.board].append(injection.at)
            if injection.cleared_at:
                moments[injection.board].append(injection.cleared_at)
    for at, board, _kind, _event in fired:
        moments[board].append(at)
    found = []
    previous: dict[str, float] = {}
    active: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    for injection in injections:
        if injection.kind != SERVER_KILL and is_state(injection.spec):
            active[injection.board].append((injection.at, injection.cleared_at or math.inf))
    for attempt in attempts:
        board, since = attempt["board"], previous.get(attempt["board"], 0.0) - 1.0
        until = attempt["finished"] + 1.0
        previous[board] = attempt["finished"]
        if attempt["verdict"] == "PASS":
            continue
        near = [t for t in moments[board] + global_moments if since <= t <= until]
        held = [w for w in active[board] if w[0] <= until and w[1] >= since]
        if not near and not held:
            found.append(f"{attempt['key']} on {board}: {attempt['verdict']}")
    return found
