"""The per-case results table printed at the end of a run and by `hil report` (rich).

The cases are read twice, one at a time: once to measure the columns and count the verdicts,
once to print the rows in tables of ROWS_PER_TABLE rows with those widths, which read as one
table; memory holds a slice of rows, not the run."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any, TextIO

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from hil.report.results import clean_text, describe_board, one_line, worst_abs_error
from hil.report.stats import HEADLINE, headline_latency
from hil.verdict import Verdict

CI_WIDTH = 160
"""Line width when the output is not a terminal (CI logs): wide enough for the table."""
MESSAGE_WIDTH = 60
"""Message column width; longer messages end in an ellipsis."""
ROWS_PER_TABLE = 250
"""Rows printed at once (a slice of the table)."""
COLUMNS = ("suite", "case", "board", "verdict", "max abs err", f"{HEADLINE} ms", "message")
"""The latency column is the live line's statistic (hil.report.stats.HEADLINE: the median)."""
_RIGHT = ("max abs err", f"{HEADLINE} ms")


def make_console(file: TextIO | None = None) -> Console:
    """A Console on `file` (stdout by default): colours on a terminal; on anything else no
    escape codes at all (whatever FORCE_COLOR says) and a fixed width instead of wrapping."""
    stream = file or sys.stdout
    if stream.isatty():
        return Console(file=stream, highlight=False, emoji=False)
    return Console(
        file=stream,
        force_terminal=False,
        color_system=None,
        no_color=True,
        width=CI_WIDTH,
        highlight=False,
        emoji=False,
    )


def verdict_style(verdict: Verdict) -> str:
    """The rich style a verdict is shown in (table and progress lines alike)."""
    if verdict is Verdict.PASS:
        return "green"
    if verdict is Verdict.PASS_UNDELEGATED:
        return "yellow"
    if verdict in (Verdict.SKIP, Verdict.XFAIL):
        return "dim"
    if verdict.is_error:
        return "magenta"
    return "bold red"


def _number(value: Any, spec: str) -> str:
    return format(value, spec) if isinstance(value, (int, float)) else "-"


def format_totals(results: dict[str, Any]) -> str:
    """`N passed, N failed, N errors, N skipped, N xfail` over the document's cases (XPASS
    counts as failed, XFAIL — a known failure — in its own column)."""
    return _totals_line(Counter(case["verdict"] for case in results.get("cases") or []))


def _totals_line(counts: Counter[str]) -> str:
    verdicts = {Verdict(name): count for name, count in counts.items()}
    passed = sum(count for v, count in verdicts.items() if v.passed)
    failed = sum(count for v, count in verdicts.items() if v.is_failure)
    errors = sum(count for v, count in verdicts.items() if v.is_error)
    skipped = verdicts.get(Verdict.SKIP, 0)
    xfailed = verdicts.get(Verdict.XFAIL, 0)
    return f"{passed} passed, {failed} failed, {errors} errors, {skipped} skipped, {xfailed} xfail"


def _latency(case: dict[str, Any]) -> str:
    """The case's HEADLINE latency; an older record's mean is marked `(avg)`."""
    headline = headline_latency(case)
    if headline is None:
        return "-"
    key, value = headline
    return f"{value:.3f}" + ("" if key == HEADLINE else f" ({key})")


def _cells(case: dict[str, Any]) -> list[Text]:
    verdict = Verdict(case["verdict"])
    return [
        Text(f"{case['suite']}.{case['precision']}"),
        Text(case["id"]),
        Text(case.get("board") or "-"),
        Text(verdict.value, style=verdict_style(verdict)),
        Text(_number(worst_abs_error(case), ".3g")),
        Text(_latency(case)),
        Text(one_line(clean_text(str(case.get("message") or "")))),
    ]


def _width(text: Text) -> int:
    """The width rich measures a cell at (its longest line)."""
    return max((cell_len(line) for line in text.plain.splitlines()), default=0)


def _table(widths: list[int], show_header: bool) -> Table:
    """A slice of the table: every column at its width over the whole run."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, show_header=show_header)
    for name, width in zip(COLUMNS, widths, strict=True):
        message = {"overflow": "ellipsis", "max_width": MESSAGE_WIDTH} if name == "message" else {}
        table.add_column(name, no_wrap=True, width=width, justify="right" if name in _RIGHT else "left",
                         **message)
    return table


def render_table(results: dict[str, Any], console: Console | None = None) -> None:
    """Print the run header (saying plainly when a board is VIRTUAL), one row per case and
    the totals line."""
    console = console or make_console()
    run = results.get("run") or {}
    cases = results.get("cases") or []

    flow = f"flow {run.get('flow')}"
    if run.get("flow_reason"):
        flow += f" ({run['flow_reason']})"
    console.print(Text(f"run {run.get('id')} [{run.get('status')}]: {flow}, chipset {run.get('chipset')}"))
    boards = [board["name"] for board in run.get("boards") or []] or [None]
    for name in boards:
        console.print(Text(f"board: {describe_board(run, name)}"))

    widths = [cell_len(name) for name in COLUMNS]
    counts: Counter[str] = Counter()
    for case in cases:
        counts[case["verdict"]] += 1
        widths = [max(width, _width(cell)) for width, cell in zip(widths, _cells(case), strict=True)]
    widths[-1] = min(widths[-1], MESSAGE_WIDTH)
    table = _table(widths, show_header=True)
    for index, case in enumerate(cases):
        if index and not index % ROWS_PER_TABLE:
            console.print(table)
            table = _table(widths, show_header=False)
        table.add_row(*_cells(case))
    console.print(table)

    bad = any(Verdict(name).is_failure or Verdict(name).is_error for name in counts)
    console.print(Text(_totals_line(counts), style="bold red" if bad else "bold green"))
    undelegated = counts[Verdict.PASS_UNDELEGATED.value]
    if undelegated:
        console.print(
            Text(
                f"warning: {undelegated} passed with ops undelegated (PASS_UNDELEGATED)",
                style="yellow",
            )
        )
