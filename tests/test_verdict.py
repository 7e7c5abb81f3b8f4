"""The verdict taxonomy and the numeric comparison."""

import math

import numpy as np

from hil.verdict import Tolerance, Verdict, compare_output, exit_code


def test_identical_outputs_pass_with_infinite_sqnr():
    ref = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    result = compare_output(0, ref, ref.copy(), Tolerance())
    assert result.ok and result.max_abs == 0.0 and math.isinf(result.sqnr_db)


def test_mismatch_names_output_error_and_tolerance():
    ref = np.zeros((2, 3), dtype=np.float32)
    act = ref.copy()
    act[1, 2] = 0.5
    result = compare_output(3, ref, act, Tolerance(atol=0.01, rtol=0.0))
    assert not result.ok
    assert "output 3" in result.reason and "0.5" in result.reason and "atol 0.01" in result.reason
    assert "[1, 2]" in result.reason


def test_sqnr_floor_fails_noisy_output():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal(1000).astype(np.float32)
    act = ref + rng.standard_normal(1000).astype(np.float32) * 0.1
    result = compare_output(0, ref, act, Tolerance(atol=1.0, rtol=0.0, min_sqnr_db=30))
    assert not result.ok and "SQNR" in result.reason
    assert 15 < result.sqnr_db < 25


def test_nan_in_output_is_a_mismatch():
    ref = np.ones(4, dtype=np.float32)
    act = ref.copy()
    act[2] = np.nan
    assert not compare_output(0, ref, act, Tolerance()).ok


def test_nan_on_both_sides_is_equal_as_upstream_judges():
    """Upstream's harness compares with `torch.allclose(equal_nan=True)`: the ops suite's `log`
    case (upstream's randn inputs, half negative) expects NaN where the host has NaN."""
    ref = np.array([np.nan, 1.0, np.inf, -np.inf], dtype=np.float32)
    result = compare_output(0, ref, ref.copy(), Tolerance(atol=1e-3, rtol=1e-3))
    assert result.ok and result.max_abs == 0.0
    swapped = ref.copy()
    swapped[2] = -np.inf  # an infinity of the other sign is no match
    assert not compare_output(0, ref, swapped, Tolerance()).ok


def test_shape_mismatch_is_reported():
    result = compare_output(0, np.ones((2, 2), np.float32), np.ones(4, np.float32), Tolerance())
    assert not result.ok and "expected float32[2, 2]" in result.reason


def test_exit_codes_and_junit_mapping():
    assert exit_code([Verdict.PASS, Verdict.PASS_UNDELEGATED, Verdict.SKIP]) == 0
    assert exit_code([Verdict.PASS, Verdict.ERROR_INFRA, Verdict.FAIL_MISMATCH]) == 1
    assert exit_code([Verdict.PASS, Verdict.ERROR_INFRA]) == 2
    assert Verdict.FAIL_RUN.junit_element == "failure"
    assert Verdict.ERROR_INTERNAL.junit_element == "error"
    assert Verdict.SKIP.junit_element == "skipped"
    assert Verdict.PASS.junit_element is None
    assert [v for v in Verdict if v.retried] == [Verdict.ERROR_INFRA]


def test_known_failures_do_not_fail_a_run_but_a_vanished_one_does():
    assert exit_code([Verdict.PASS, Verdict.XFAIL, Verdict.SKIP]) == 0
    assert exit_code([Verdict.PASS, Verdict.XPASS]) == 1
    assert Verdict.XFAIL.junit_element == "skipped" and not Verdict.XFAIL.is_failure
    assert Verdict.XPASS.junit_element == "failure" and Verdict.XPASS.is_failure
    assert not Verdict.XFAIL.retried and not Verdict.XPASS.retried
