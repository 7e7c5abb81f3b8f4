"""JUnit XML rendering of a results document (junit-xml 1.9): one testsuite per
(suite, precision, board), named `suite.precision@board` (`suite.precision@no-board` for
cases that never reached a board), one testcase per case in results order.

Verdicts map through `Verdict.junit_element`; PASS_UNDELEGATED is a pass whose system-out
starts with a `WARNING: PASS_UNDELEGATED` line (JUnit has no "passed with a warning"); SKIP
and XFAIL (a known failure) are `<skipped>` with their reason, XPASS a `<failure>`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from junit_xml import TestCase, TestSuite, to_xml_report_string

from hil.report.localization import lead
from hil.report.results import atomic_write_text, cap_text, clean_text, describe_board, one_line
from hil.report.stats import format_board_state, format_latency, format_memory
from hil.verdict import Verdict

NO_BOARD = "no-board"
"""Testsuite name suffix of cases that never reached a board (lowering failed, skipped)."""
FIRMWARE_PROPS = (
    "ro.product.model",
    "ro.soc.model",
    "ro.build.fingerprint",
    "ro.build.version.release",
    "ro.build.version.incremental",
    "ro.bootloader",
)
"""Board properties copied into the testsuite properties (as `board.<prop>`) when present."""


def suite_name(case: dict[str, Any]) -> str:
    """The testsuite a case belongs to: `suite.precision@board`."""
    return f"{case['suite']}.{case['precision']}@{case.get('board') or NO_BOARD}"


def write_junit(results: dict[str, Any], path: Path, durable: bool = True) -> None:
    """Render `results` (a finished or interrupted run) as JUnit XML at `path`, atomically
    (`durable`: see `atomic_write_text`)."""
    atomic_write_text(Path(path), render_junit(results), durable)


def render_junit(results: dict[str, Any]) -> str:
    """`results` as a JUnit XML document (a `<testsuites>` root)."""
    run = results.get("run") or {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for case in results.get("cases") or []:
        groups.setdefault(suite_name(case), []).append(case)
    return to_xml_report_string([_testsuite(name, cases, run) for name, cases in groups.items()])


def _testsuite(name: str, cases: list[dict[str, Any]], run: dict[str, Any]) -> TestSuite:
    board = cases[0].get("board")
    info = next((b for b in run.get("boards") or [] if b.get("name") == board), {})
    properties = {
        "board": board or NO_BOARD,
        "board.virtual": _flag(info.get("virtual")) if info else None,
        "board.adb": info.get("adb"),
        "board.chipset": info.get("chipset"),
        "board.runner_profile": (info.get("runner_profile") or {}).get("name"),
        **{f"board.{prop}": (info.get("properties") or {}).get(prop) for prop in FIRMWARE_PROPS},
        **build_properties(info),
        "chipset": run.get("chipset"),
        "flow": run.get("flow"),
        "virtual": _flag(run.get("virtual")),
        "hil": run.get("hil"),
        "torch": run.get("torch"),
        "executorch": run.get("executorch"),
        "sdk": run.get("sdk"),
        "run_id": run.get("id"),
        "shard": run.get("shard"),
        "git_sha": run.get("git_sha"),
    }
    return TestSuite(
        name,
        [_testcase(case, run) for case in cases],
        hostname=board,
        timestamp=run.get("started"),
        properties={
            key: "none" if val is None else str(val)
            for key, val in properties.items()
            if val is not None or not key.startswith("board.")
        },
    )


def build_properties(board: dict[str, Any]) -> dict[str, Any]:
    """The board's expected build, its build before and after provisioning, and each flash's
    steps with their times (`board.flash.N`: `why: step 1.23s ok, ...; error`), from its
    results.json record (absent for a board without `expected_build`)."""
    build = board.get("build") or {}
    properties: dict[str, Any] = {}
    if build:
        properties.update({"board.build.property": build.get("property"),
                           "board.build.expected": build.get("expected"),
                           "board.build.before": build.get("before"),
                           "board.build.after": build.get("after"),
                           "board.build.differed": _flag(build.get("differed"))})
    for index, flash in enumerate(board.get("flashes") or []):
        steps = ", ".join(f"{s.get('step')} {s.get('seconds')}s {'ok' if s.get('ok') else 'FAILED'}"
                          for s in flash.get("steps") or [])
        error = f"; {flash['error']}" if flash.get("error") else ""
        properties[f"board.flash.{index}"] = f"{flash.get('why')}: {steps}{error}"
    return properties


def _flag(value: Any) -> str:
    return "true" if value else "false"


def _testcase(case: dict[str, Any], run: dict[str, Any]) -> TestCase:
    verdict = Verdict(case["verdict"])
    message = one_line(clean_text(lead(case, str(case.get("message") or ""))))
    detail = cap_text(clean_text(str(case.get("detail") or ""))) or None
    timings = (case.get("timings_s") or {}).values()
    testcase = TestCase(
        case["id"],
        classname=case.get("classname") or f"{case['suite']}.{case['precision']}",
        # milliseconds: keeps str(time) out of exponent notation, which the xsd rejects
        elapsed_sec=round(sum(t for t in timings if isinstance(t, (int, float))), 3),
        stdout=_system_out(case, verdict, message, run),
        file=case.get("file"),
        line=case.get("line"),
    )
    element = verdict.junit_element
    message = message or verdict.value  # junit-xml drops a failure with neither text
    if element == "failure":
        testcase.add_failure_info(message=message, output=detail, failure_type=verdict.value)
    elif element == "error":
        testcase.add_error_info(message=message, output=detail, error_type=verdict.value)
    elif element == "skipped":
        testcase.add_skipped_info(message=message, output=detail)
    return testcase


def _system_out(case: dict[str, Any], verdict: Verdict, message: str, run: dict[str, Any]) -> str:
    """Board, warnings, latency, memory, board state and the log excerpts of one case
    (runner first, then UART and logcat), each log capped at TEXT_CAP_BYTES and without
    control characters. (The Jenkins schema allows `<properties>` on testsuites only, so a
    case's numbers are lines here.)"""
    lines = []
    if verdict is Verdict.PASS_UNDELEGATED:
        reason = message or "ops expected on the NPU ran on the CPU"
        lines.append(f"WARNING: PASS_UNDELEGATED: {reason}")
        undelegated = (case.get("delegation") or {}).get("undelegated_ops") or []
        if undelegated:
            lines.append("undelegated ops: " + ", ".join(str(op) for op in undelegated))
    lines.append(f"board: {describe_board(run, case.get('board'))}")
    if (case.get("attempts") or 1) > 1:
        lines.append(f"attempts: {case['attempts']}")
    latency = format_latency(case)
    if latency:
        lines.append(f"latency ms: {latency}")
    for label, text in (("memory", format_memory(case)), ("board state", format_board_state(case))):
        if text:
            lines.append(f"{label}: {text}")
    logs = sorted((case.get("logs") or {}).items(), key=lambda item: _log_order(item[0]))
    for name, log in logs:
        if isinstance(log, str) and log:
            lines += [f"--- {name} log ---", cap_text(clean_text(log))]
    return "\n".join(lines)


def _log_order(name: str) -> tuple[int, str]:
    known = ("runner", "uart", "logcat")
    return (known.index(name) if name in known else len(known), name)
