"""Known failures (`expect`) and skips: how a finished record's verdict is settled."""

from pathlib import Path

import pytest

from hil.cases import load_suite
from hil.cli import main
from hil.expectation import Expectation, parse_expectation, parse_skip, settle
from hil.report.results import load_results
from hil.verdict import Verdict

FLOW_MANIFEST = Path(__file__).resolve().parent / "fixtures" / "flow_expectations.yaml"

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
        ({"verdict": "FAIL_RUN", "reason": "x", "flows": ["npu"]}, "flows: expected a list of flows"),
        ({"verdict": "FAIL_RUN", "reason": "x", "flows": "enn"}, "flows: expected a list of flows"),
        ({"verdict": "FAIL_RUN", "reason": "x", "flows": []}, "flows: expected a list of flows"),
        ("FAIL_RUN", "expected a mapping"),
    ]:
        with pytest.raises(ValueError, match=error):
            parse_expectation(raw)
    assert parse_skip(" needs 8 GB ") == "needs 8 GB"
    with pytest.raises(ValueError):
        parse_skip("")


def test_a_known_failure_of_some_flows_holds_on_those_only():
    known = parse_expectation({"verdict": "FAIL_LOWER", "reason": "a visitor bug", "flows": ["xnnpack"]})
    assert known.flows == ("xnnpack",) and known.holds_on("xnnpack")
    assert not known.holds_on("enn") and not known.holds_on("portable")
    assert known.record() == {"verdict": "FAIL_LOWER", "reason": "a visitor bug", "link": "",
                              "flows": ["xnnpack"]}
    assert KNOWN.holds_on("enn") and "flows" not in KNOWN.record()  # no flows: every flow
    cases = {case.id: case for case in load_suite(str(FLOW_MANIFEST))}
    assert cases["known_here"].on_flow("xnnpack") is cases["known_here"]
    assert cases["known_elsewhere"].on_flow("xnnpack").expect is None
    assert cases["known_elsewhere"].on_flow("enn") is cases["known_elsewhere"]


def test_a_run_on_another_flow_judges_the_case_plainly(tmp_path: Path) -> None:
    """On flow xnnpack: the failure known there is XFAIL; the same failure known on flow enn
    only is a plain FAIL_MISMATCH, and a pass against it is a PASS, not an XPASS."""
    out = tmp_path / "out"
    code = main(["run", "--board", "virtual", "--suite", str(FLOW_MANIFEST), "--flow", "xnnpack",
                 "--out", str(out)])
    document = load_results(out / "results.json")
    verdicts = {case["id"]: case["verdict"] for case in document["cases"]}
    assert verdicts == {"known_here": "XFAIL", "known_elsewhere": "FAIL_MISMATCH", "passes_here": "PASS"}
    expected = {case["id"]: case.get("expected") for case in document["cases"]}
    assert expected["known_here"]["flows"] == ["xnnpack"] and expected["passes_here"] is None
    assert code == 1  # the plain FAIL_MISMATCH
