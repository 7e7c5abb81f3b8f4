"""Known failures (`expect`) and skips: how a finished record's verdict is settled."""

import pytest

from hil.expectation import Expectation, parse_expectation, parse_skip, settle
from hil.verdict import Verdict

KNOWN = Expectation(Verdict.FAIL_MISMATCH, "int8 rounding in the upsample", "https://example.org/1")


def _record(verdict: Verdict, message: str = "") -> dict:
    return {"verdict": verdict.value, "message": message}


def test_the_known_failure_is_xfail_and_keeps_what_happened():
    record = settle(KNOWN, _record(Verdict.FAIL_MISMATCH, "output 0: max abs error 3"))
    assert record["verdict"] == "XFAIL" and record["actual_verdict"] == "FAIL_MISMATCH"
    assert record["message"] == ("known failure (FAIL_MISMATCH): int8 rounding in the upsample "
                                 "(https://example.org/1); got: output 0: max abs error 3")
    assert record["expected"] == {"verdict": "FAIL_MISMATCH", "reason": KNOWN.reason,
                                  "link": KNOWN.link}


@pytest.mark.parametrize("passed", [Verdict.PASS, Verdict.PASS_UNDELEGATED])
def test_a_pass_against_an_expectation_is_xpass(passed):
    record = settle(KNOWN, _record(passed))
    assert record["verdict"] == "XPASS" and record["actual_verdict"] == passed.value
    assert record["message"].startswith("unexpectedly passed: remove the expectation")


def test_other_outcomes_keep_their_verdict():
    other = settle(KNOWN, _record(Verdict.FAIL_RUN, "runner killed by SIGSEGV"))
    assert other["verdict"] == "FAIL_RUN"
    assert other["message"] == ("runner killed by SIGSEGV (not the known failure FAIL_MISMATCH: "
                                "int8 rounding in the upsample)")
    assert settle(KNOWN, _record(Verdict.ERROR_INFRA))["verdict"] == "ERROR_INFRA"
    assert settle(KNOWN, _record(Verdict.SKIP))["verdict"] == "SKIP"
    assert settle(None, _record(Verdict.PASS)) == _record(Verdict.PASS)


def test_manifest_expectations_and_skips_are_validated():
    assert parse_expectation({"verdict": "FAIL_RUN", "reason": " crashes "}) == Expectation(
        Verdict.FAIL_RUN, "crashes", "")
    for raw, error in [
        ({"verdict": "PASS", "reason": "x"}, "verdict: expected one of FAIL_EXPORT"),
        ({"verdict": "FAIL_RUN"}, "reason: required"),
        ({"verdict": "FAIL_RUN", "reason": "x", "url": "y"}, "url: unknown key"),
        ("FAIL_RUN", "expected a mapping"),
    ]:
        with pytest.raises(ValueError, match=error):
            parse_expectation(raw)
    assert parse_skip(" needs 8 GB ") == "needs 8 GB"
    with pytest.raises(ValueError):
        parse_skip("")
