"""Progress of a run while it runs: on a terminal a rich progress bar with a live line per
finished case above it; anywhere else (CI logs, pipes) one plain line per case."""

from __future__ import annotations

import os
import sys
from typing import Any, Protocol, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from hil.report.console import verdict_style
from hil.report.results import case_key, clean_text, one_line, worst_abs_error
from hil.report.stats import latency_of
from hil.verdict import Verdict


class CaseProgress(Protocol):
    """Receives every finished case record (`Run`'s `on_record`), then `close()`."""

    def on_record(self, record: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def format_record(record: dict[str, Any], done: int, total: int) -> str:
    """`[ 3/12] VERDICT  suite.precision.id [board] p50 0.41 ms max_abs 1e-06  message`."""
    width = len(str(total))
    parts = [
        f"[{done:>{width}}/{total}] {record['verdict']:<16} {case_key(record)} [{record.get('board') or '-'}]"
    ]
    latency = latency_of(record, "p50")
    key = "p50"
    if latency is None:
        latency, key = latency_of(record, "avg"), "avg"
    if latency is not None:
        parts.append(f"{key} {latency:.3f} ms")
    error = worst_abs_error(record)
    if error is not None:
        parts.append(f"max_abs {error:.3g}")
    message = one_line(clean_text(str(record.get("message") or "")))
    line = " ".join(parts)
    return f"{line}  {message}" if message else line


class PlainProgress:
    """One line per finished case on `stream`, flushed at once (CI logs)."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total = total
        self.done = 0
        self.stream = stream

    def on_record(self, record: dict[str, Any]) -> None:
        """Write the case's line."""
        self.done += 1
        self.stream.write(format_record(record, self.done, self.total) + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Nothing to tear down."""


class RichProgress:
    """A progress bar at the bottom of the terminal, a coloured line per case above it."""

    def __init__(self, total: int, console: Console) -> None:
        self.total = total
        self.done = 0
        self.progress = Progress(
            TextColumn("cases"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[failed]} failed"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.failed = 0
        self.task = self.progress.add_task("cases", total=total, failed=0)
        self.progress.start()

    def on_record(self, record: dict[str, Any]) -> None:
        """Print the case's line above the bar and advance it."""
        self.done += 1
        verdict = Verdict(record["verdict"])
        self.failed += int(verdict.is_failure or verdict.is_error)
        line = format_record(record, self.done, self.total)
        self.progress.console.print(Text(line, style=verdict_style(verdict)))
        self.progress.update(self.task, advance=1, failed=self.failed)

    def close(self) -> None:
        """Remove the bar (the per-case lines stay)."""
        self.progress.stop()


def make_progress(total: int, stream: TextIO | None = None) -> CaseProgress:
    """RichProgress on an interactive terminal, PlainProgress in CI (`CI` or
    `GITHUB_ACTIONS` set) or when `stream` is not a terminal."""
    stream = stream or sys.stdout
    in_ci = bool(os.environ.get("CI") or os.environ.get("GITHUB_ACTIONS"))
    if stream.isatty() and not in_ci:
        return RichProgress(total, Console(file=stream, highlight=False, emoji=False))
    return PlainProgress(total, stream)
