"""JUnit XML rendering of a results document (junit-xml 1.9): one testsuite per
`suite.precision`, one testcase per case in results order.

Verdicts map through `Verdict.junit_element`; PASS_UNDELEGATED is a pass whose system-out
starts with a `WARNING: PASS_UNDELEGATED` line (JUnit has no "passed with a warning").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from junit_xml import TestCase, TestSuite, to_xml_report_string

from hil.report.results import atomic_write_text, cap_text, clean_text, describe_board, one_line
from hil.verdict import Verdict


def write_junit(results: dict[str, Any], path: Path) -> None:
    """Render `results` (a finished or interrupted run) as JUnit XML at `path`, atomically."""
    run = results.get("run") or {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for case in results.get("cases") or []:
        groups.setdefault(f"{case['suite']}.{case['precision']}", []).append(case)
    suites = [_testsuite(name, cases, run) for name, cases in groups.items()]
    atomic_write_text(Path(path), to_xml_report_string(suites))


def _testsuite(name: str, cases: list[dict[str, Any]], run: dict[str, Any]) -> TestSuite:
    boards = list(dict.fromkeys(case["board"] for case in cases if case.get("board")))
    if not boards:
        boards = [board["name"] for board in run.get("boards") or []]
    properties = {
        "boards": ",".join(boards),
        "chipset": run.get("chipset"),
        "flow": run.get("flow"),
        "virtual": "true" if run.get("virtual") else "false",
        "hil": run.get("hil"),
        "torch": run.get("torch"),
        "executorch": run.get("executorch"),
        "sdk": run.get("sdk"),
        "run_id": run.get("id"),
        "git_sha": run.get("git_sha"),
    }
    return TestSuite(
        name,
        [_testcase(name, case, run) for case in cases],
        hostname=boards[0] if len(boards) == 1 else None,
        timestamp=run.get("started"),
        properties={key: "none" if val is None else str(val) for key, val in properties.items()},
    )


def _testcase(suite: str, case: dict[str, Any], run: dict[str, Any]) -> TestCase:
    verdict = Verdict(case["verdict"])
    message = one_line(clean_text(str(case.get("message") or "")))
    detail = cap_text(clean_text(str(case.get("detail") or ""))) or None
    timings = (case.get("timings_s") or {}).values()
    testcase = TestCase(
        case["id"],
        classname=case.get("classname") or suite,
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
    """Board, warnings and logs of one case, capped and without control characters."""
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
    logs = sorted((case.get("logs") or {}).items(), key=lambda item: item[0] != "runner")
    for name, log in logs:
        if isinstance(log, str) and log:
            lines += [f"--- {name} log ---", clean_text(log)]
    return cap_text("\n".join(lines))
