"""The per-case results table printed at the end of a run and by `hil report` (rich)."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from hil.report.results import clean_text, describe_board, one_line, worst_abs_error
from hil.verdict import Verdict

CI_WIDTH = 160
"""Line width when the output is not a terminal (CI logs): wide enough for the table."""
MESSAGE_WIDTH = 60
"""Message column width; longer messages end in an ellipsis."""


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
    verdicts = [Verdict(case["verdict"]) for case in results.get("cases") or []]
    passed = sum(v.passed for v in verdicts)
    failed = sum(v.is_failure for v in verdicts)
    errors = sum(v.is_error for v in verdicts)
    skipped = verdicts.count(Verdict.SKIP)
    xfailed = verdicts.count(Verdict.XFAIL)
    return f"{passed} passed, {failed} failed, {errors} errors, {skipped} skipped, {xfailed} xfail"


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

    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("suite", no_wrap=True)
    table.add_column("case", no_wrap=True)
    table.add_column("board", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("max abs err", justify="right", no_wrap=True)
    table.add_column("avg ms", justify="right", no_wrap=True)
    table.add_column("message", no_wrap=True, overflow="ellipsis", max_width=MESSAGE_WIDTH)
    for case in cases:
        verdict = Verdict(case["verdict"])
        table.add_row(
            Text(f"{case['suite']}.{case['precision']}"),
            Text(case["id"]),
            Text(case.get("board") or "-"),
            Text(verdict.value, style=verdict_style(verdict)),
            _number(worst_abs_error(case), ".3g"),
            _number((case.get("latency_ms") or {}).get("avg"), ".3f"),
            Text(one_line(clean_text(str(case.get("message") or "")))),
        )
    console.print(table)

    verdicts = [Verdict(case["verdict"]) for case in cases]
    bad = any(v.is_failure or v.is_error for v in verdicts)
    console.print(Text(format_totals(results), style="bold red" if bad else "bold green"))
    undelegated = verdicts.count(Verdict.PASS_UNDELEGATED)
    if undelegated:
        console.print(
            Text(
                f"warning: {undelegated} passed with ops undelegated (PASS_UNDELEGATED)",
                style="yellow",
            )
        )
