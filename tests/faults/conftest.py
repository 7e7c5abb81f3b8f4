"""The fault matrix's table: filled by test_matrix.py, printed at the end of the session."""

from __future__ import annotations

import pytest

MATRIX_ROWS: list[list[str]] = []
"""One row per fault run: fault, expected, observed, recovered, results lost."""
HEADER = ["fault", "expected verdict", "observed verdict", "recovered", "results lost"]


def render_matrix(rows: list[list[str]]) -> str:
    """The matrix as a plain-text table."""
    table = [HEADER, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER))]
    lines = [" | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in table]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if MATRIX_ROWS:
        terminalreporter.section("fault-injection matrix")
        terminalreporter.write_line(render_matrix(MATRIX_ROWS))
