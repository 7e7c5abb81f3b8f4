"""The console table: says VIRTUAL plainly, prints the totals line, and writes plain,
unwrapped text when stdout is not a terminal."""

from __future__ import annotations

import io

import pytest

from hil.report.console import CI_WIDTH, format_totals, make_console, render_table

from . import case, sample_results


def _render(results: dict) -> str:
    buffer = io.StringIO()
    render_table(results, make_console(buffer))
    return buffer.getvalue()


def test_header_says_the_board_is_virtual() -> None:
    out = _render(sample_results())
    assert "board: virtual-0 (VIRTUAL: ExecuTorch host runtime, no NPU)" in out.splitlines()


def test_totals_line_counts_each_kind() -> None:
    results = sample_results()
    assert format_totals(results) == "2 passed, 2 failed, 2 errors, 1 skipped, 0 xfail"
    assert "2 passed, 2 failed, 2 errors, 1 skipped, 0 xfail" in _render(results).splitlines()
    results["cases"] = [case("s", "fp32", f"c{i}", "PASS") for i in range(5)]
    results["cases"].append(case("s", "fp32", "bad", "FAIL_MISMATCH"))
    assert format_totals(results) == "5 passed, 1 failed, 0 errors, 0 skipped, 0 xfail"


def test_each_case_is_one_row_with_its_numbers() -> None:
    lines = _render(sample_results()).splitlines()
    (conv,) = [line for line in lines if " conv2d " in line]
    assert "smoke.fp32" in conv and "PASS" in conv and "1e-06" in conv and "0.400" in conv
    (add,) = [line for line in lines if " add " in line]
    assert "FAIL_MISMATCH" in add and "output 0: max abs error 0.5" in add


def test_not_a_terminal_means_no_escape_codes_and_no_wrapping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    results = sample_results()
    results["cases"][2]["message"] = "worst at [bold]here[/bold] " + "x" * 500
    out = _render(results)
    assert "\x1b" not in out
    assert all(len(line) <= CI_WIDTH for line in out.splitlines())
    (add,) = [line for line in out.splitlines() if " add " in line]
    assert "worst at [bold]here[/bold]" in add
    assert add.rstrip().endswith("…")
