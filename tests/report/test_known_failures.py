"""Known failures in every rendering: XFAIL is JUnit `<skipped>` with its reason and has its
own column; XPASS is a failure everywhere; `hil compare` tells a known failure from a
regression."""

from __future__ import annotations

from pathlib import Path

from junitparser import Failure, JUnitXml, Skipped

from hil.expectation import Expectation, settle
from hil.report.compare import compare_results
from hil.report.console import format_totals
from hil.report.junit import write_junit
from hil.report.summary import render_summary
from hil.verdict import Verdict

from . import case, sample_results

KNOWN = Expectation(Verdict.FAIL_MISMATCH, "upsample rounding", "https://example.org/issues/7")


def _document(*cases: dict) -> dict:
    document = sample_results()
    document["cases"] = list(cases)
    return document


def _xfail() -> dict:
    return settle(KNOWN, case("models", "a8w8", "deeplab_v3", "FAIL_MISMATCH",
                              message="output 0: max abs error 3"))


def _xpass() -> dict:
    return settle(KNOWN, case("models", "a8w8", "edsr", "PASS"))


def test_junit_skips_a_known_failure_with_its_reason_and_fails_an_xpass(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    write_junit(_document(_xfail(), _xpass(), case("models", "a8w8", "vit", "PASS")), path)
    (suite,) = JUnitXml.fromfile(str(path))
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (3, 1, 0, 1)
    testcases = {tc.name: tc for tc in suite}
    (skipped,) = testcases["deeplab_v3"].result
    assert isinstance(skipped, Skipped)
    assert skipped.message.startswith("known failure (FAIL_MISMATCH): upsample rounding "
                                      "(https://example.org/issues/7)")
    (failure,) = testcases["edsr"].result
    assert isinstance(failure, Failure) and failure.type == "XPASS"
    assert failure.message.startswith("unexpectedly passed: remove the expectation")


def test_totals_and_summary_give_xfail_its_own_column() -> None:
    document = _document(_xfail(), _xpass(), case("models", "a8w8", "vit", "PASS"))
    assert format_totals(document) == "1 passed, 1 failed, 0 errors, 0 skipped, 1 xfail"
    text = render_summary(document)
    assert "**1 passed, 1 failed, 0 errors, 0 skipped, 1 xfail** of 3 case(s)" in text
    assert "| models.a8w8 | virtual-0 | 3 | 1 | 1 | 0 | 0 | 1 |" in text
    assert ("| `models.a8w8.deeplab_v3` | FAIL_MISMATCH | upsample rounding | "
            "<https://example.org/issues/7> |") in text
    failures = text.split("### Failures and errors")[1].split("###")[0]
    assert "models.a8w8.edsr" in failures and "deeplab_v3" not in failures


def test_compare_tells_a_known_failure_from_a_regression() -> None:
    before = _document(case("models", "a8w8", "deeplab_v3", "PASS"),
                       settle(KNOWN, case("models", "a8w8", "edsr", "FAIL_MISMATCH")),
                       case("models", "a8w8", "vit", "PASS"))
    after = _document(_xfail(), _xpass(), case("models", "a8w8", "vit", "FAIL_MISMATCH"))
    rows = {row.key: row for row in compare_results(before, after).rows}
    assert rows["models.a8w8.deeplab_v3"].statuses == ["known failure"]
    assert rows["models.a8w8.edsr"].statuses == ["fixed"]
    assert rows["models.a8w8.vit"].statuses == ["accuracy regression"]
