"""A testcase's text written directly is junit-xml's, byte for byte, whatever its strings hold:
the reference is junit-xml's own chain (ElementTree, its cleaning, minidom's pretty-print);
where that chain fails (characters XML cannot carry), the text is still a valid element."""

from __future__ import annotations

import itertools
import xml.dom.minidom
from xml.parsers.expat import ExpatError

import junit_xml
import pytest

from hil.report.junit_text import xml_of_testcase

NASTY = [
    "plain", "", "a & b < c > d \"quoted\" 'single'", "tab\there", "line\nbreak", "cr\rlf\r\nend",
    "nul\x00bell\x07esc\x1b[31mred\x1b[0m", "del\x7f c1\x85\x86\x9f", "lone surrogate \ud800 here",
    "unicode ✓ ≫ é 𝔸", "\ufffe\uffff\U0001fffe", "]]> cdata end", "&amp; already escaped",
    "\x01", "  spaces around  ",
]


def _reference(case: junit_xml.TestCase) -> str:
    """The testcase's lines in junit-xml's whole pretty-printed document."""
    document = junit_xml.to_xml_report_string([junit_xml.TestSuite("s", [case])])
    start = document.index("\n\t\t<testcase") + 1
    return document[start:document.rindex("\t</testsuite>")]


@pytest.mark.parametrize(("text", "other"), list(itertools.product(NASTY, NASTY[:6])))
def test_every_kind_of_string_comes_out_as_junit_xml_writes_it(text: str, other: str) -> None:
    kinds = ("failure", "error", "skipped", "pass")
    kind = kinds[(NASTY.index(text) + NASTY.index(other)) % len(kinds)]
    case = junit_xml.TestCase(text or "name", classname=other or None, elapsed_sec=len(text) / 7,
                    stdout=text + other, stderr=other, file=other or None, line=len(other) or None)
    if kind == "failure":
        case.add_failure_info(message=text, output=other, failure_type="FAIL_RUN")
    elif kind == "error":
        case.add_error_info(message=other, output=text, error_type="ERROR_INFRA")
    elif kind == "skipped":
        case.add_skipped_info(message=text, output=other)
    try:
        expected = _reference(case)
    except ExpatError:  # junit-xml cannot write it: those characters are dropped
        assert any(c in text + other for c in "\ud800\ufffe\uffff")
        xml.dom.minidom.parseString(xml_of_testcase(case).encode("utf-8"))  # noqa: S318 - our own text
        return
    assert xml_of_testcase(case) == expected


def test_a_case_with_nothing_inside_is_an_empty_element() -> None:
    case = junit_xml.TestCase("bare")
    assert xml_of_testcase(case) == _reference(case) == '\t\t<testcase name="bare"/>\n'
    xml.dom.minidom.parseString(xml_of_testcase(case))  # noqa: S318 - our own text
