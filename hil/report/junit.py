"""JUnit XML rendering of a results document (junit-xml 1.9): one testsuite per
(suite, precision, board), named `suite.precision@board` (`suite.precision@no-board` for
cases that never reached a board), one testcase per case in results order.

Verdicts map through `Verdict.junit_element`; PASS_UNDELEGATED is a pass whose system-out
starts with a `WARNING: PASS_UNDELEGATED` line (JUnit has no "passed with a warning"); SKIP
and XFAIL (a known failure) are `<skipped>` with their reason, XPASS a `<failure>`.

Written as a stream (`JUnitSpool`): each case's `<testcase>` is rendered once, when it is
added, and appended to its testsuite's spool file; `write` composes the document from the
suites' counts (kept in memory, one entry per testsuite) and their spools, so neither the
run nor the writing holds the cases. The text is junit-xml's pretty-printed document, byte
for byte (junit_xml/__init__.py: `TestSuite.build_xml_doc`, `to_xml_report_string`), put
together a testcase at a time (hil/report/junit_text.py writes a testcase's text directly).
"""

from __future__ import annotations

import io
import secrets
import shutil
import tempfile
import xml.dom.minidom
import xml.etree.ElementTree as ET
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from junit_xml import TestCase, TestSuite, _clean_illegal_xml_chars

from hil.report.junit_text import xml_of_testcase
from hil.report.localization import lead
from hil.report.results import atomic_writer, cap_text, clean_text, describe_board, one_line
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


OPEN_SPOOLS = 32
"""Spool files kept open at once (a run has a testsuite per suite.precision@board)."""


def write_junit(results: dict[str, Any], path: Path, durable: bool = True) -> None:
    """Render `results` (a finished or interrupted run; its cases are read once, in order)
    as JUnit XML at `path`, atomically (`durable`: see `atomic_writer`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    run = results.get("run") or {}
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=f".{path.name}.spool.") as folder:
        spool = JUnitSpool(Path(folder) / "suites")
        try:
            for case in results.get("cases") or []:
                spool.add(case, run)
            spool.write(path, run, durable)
        finally:
            spool.close()


def spool_folder(junit_path: Path) -> Path:
    """Where a run's JUnit spool lives while it runs: beside the JUnit file."""
    return junit_path.with_name(f".{junit_path.name}.spool")


@dataclass
class _Suite:
    """One testsuite's counts (junit-xml's testsuite attributes) and its spool file."""

    board: str | None
    spool: Path
    tests: int = 0
    errors: int = 0
    failures: int = 0
    skipped: int = 0
    disabled: int = 0
    time: float = 0

    def count(self, testcase: TestCase) -> None:
        self.tests += 1
        self.errors += testcase.is_error()
        self.failures += testcase.is_failure()
        self.skipped += testcase.is_skipped()
        self.disabled += not testcase.is_enabled
        if testcase.elapsed_sec:  # summed in case order, as junit-xml does: the same float
            self.time += testcase.elapsed_sec


class JUnitSpool:
    """A JUnit document built as cases finish: `add` renders a case's `<testcase>` once and
    appends it to its testsuite's spool file in `folder` (created empty; a spool a killed
    hil left there is removed); `write` composes the whole document; `close` removes the
    folder. Not thread-safe (the run's recorder holds its lock)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        self._suites: dict[str, _Suite] = {}
        self._open: OrderedDict[str, TextIO] = OrderedDict()
        self._heads = _Heads()

    def add(self, case: dict[str, Any], run: dict[str, Any]) -> None:
        """Render `case` (a stored record) into its testsuite's spool."""
        name = suite_name(case)
        testcase = _testcase(case, run)  # first: a case that does not render adds no suite
        suite = self._suites.get(name)
        if suite is None:
            suite = self._suites[name] = _Suite(case.get("board"), self.folder / f"{len(self._suites)}.xml")
        suite.count(testcase)
        self._stream(name, suite).write(xml_of_testcase(testcase))

    def write(self, path: Path, run: dict[str, Any], durable: bool = True) -> None:
        """The document of every case added so far, at `path` (atomically: `atomic_writer`)."""
        for stream in self._open.values():
            stream.flush()
        suites = self._suites
        with atomic_writer(path, durable) as out:
            out.write('<?xml version="1.0" ?>\n')
            if not suites:
                out.write("<testsuites/>\n")
                return
            seconds = 0.0
            for suite in suites.values():
                seconds += float(str(suite.time))
            counts = {key: sum(getattr(s, key) for s in suites.values())
                      for key in ("disabled", "errors", "failures", "tests")}
            attributes = " ".join(f'{key}="{value}"' for key, value in counts.items())
            out.write(f'<testsuites {attributes} time="{seconds}">\n')
            for name, suite in suites.items():
                out.write(self._heads.head(name, suite, run))
                with suite.spool.open(encoding="utf-8", newline="") as spooled:  # CRs as written
                    shutil.copyfileobj(spooled, out)
                out.write("\t</testsuite>\n")
            out.write("</testsuites>\n")

    def close(self) -> None:
        """Close the spools and remove the folder."""
        for stream in self._open.values():
            stream.close()
        self._open.clear()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _stream(self, name: str, suite: _Suite) -> TextIO:
        stream = self._open.get(name)
        if stream is not None:
            self._open.move_to_end(name)
            return stream
        if len(self._open) >= OPEN_SPOOLS:
            self._open.popitem(last=False)[1].close()
        stream = self._open[name] = suite.spool.open("a", encoding="utf-8", newline="")
        return stream


def _pretty(element: ET.Element, indent: str) -> str:
    """`element` as junit-xml's pretty-printed document has it at that depth (minidom's
    `toprettyxml` with tabs, after junit-xml's cleaning of characters XML forbids)."""
    text = _clean_illegal_xml_chars(ET.tostring(element).decode("ascii"))  # references beyond ASCII
    # our own ElementTree output, as junit-xml parses it: no foreign XML
    document = xml.dom.minidom.parseString(text.encode("utf-8"))  # noqa: S318
    out = io.StringIO()
    document.documentElement.writexml(out, indent, "\t", "\n")
    document.unlink()  # minidom's tree is a web of reference cycles: freed now, not at the next gc
    return out.getvalue()


_COUNTS = ("disabled", "errors", "failures", "skipped", "tests", "time")
"""The testsuite attributes that change as its cases come (the rest of its head does not)."""
_SLOT = f"hil{secrets.token_hex(8)}"
"""Marks where a count goes in a rendered head (no suite or property holds it)."""


class _Heads:
    """Each testsuite's opening tag and properties, rendered (minidom: about a millisecond)
    once per distinct set of properties, with its counts filled in at each `write`."""

    def __init__(self) -> None:
        self._templates: dict[str, tuple[tuple[Any, ...], str]] = {}

    def head(self, name: str, suite: _Suite, run: dict[str, Any]) -> str:
        """The testsuite's opening tag with its counts, and its properties."""
        testsuite = _testsuite(name, suite.board, run)
        key = (suite.board, testsuite.timestamp, tuple(testsuite.properties.items()))
        known = self._templates.get(name)
        if known is None or known[0] != key:
            element = testsuite.build_xml_doc()
            for count in _COUNTS:
                element.set(count, f"{_SLOT}{count}")
            text = _pretty(element, "\t")
            closing = "\t</testsuite>\n"
            assert text.endswith(closing), text[-40:]
            known = self._templates[name] = (key, text[: -len(closing)])
        text = known[1]
        for count in _COUNTS:
            text = text.replace(f"{_SLOT}{count}", str(getattr(suite, count)), 1)
        return text


def _testsuite(name: str, board: str | None, run: dict[str, Any]) -> TestSuite:
    """The testsuite of `board`'s cases, without them: its properties."""
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
        [],
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
