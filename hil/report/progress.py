"""Progress of a run while it runs, both phases: lowering (lowered N/M, cache hits, failures)
and the boards (cases N/M, failures). On a terminal two rich progress bars with a live line
per finished case above them; anywhere else (CI logs, pipes) one plain line per case and a
lowering line after the first artifact, at each quarter and at the end."""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Protocol, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from hil.report.console import verdict_style
from hil.report.results import case_key, clean_text, one_line, worst_abs_error
from hil.report.stats import latency_of
from hil.verdict import Verdict


class CaseProgress(Protocol):
    """Receives every lowering (`Run`'s `on_lowered`) and every finished case record
    (`on_record`), then `close()`."""

    def on_lowered(self, lowering: Any) -> None: ...

    def on_record(self, record: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class LoweringCount:
    """Lowering so far: lowered N of M, how many from the cache, how many failed."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.cached = 0
        self.failed = 0
        self._start = time.monotonic()

    def add(self, lowering: Any) -> None:
        """Count one `hil.lower.pool.Lowering`."""
        self.done += 1
        self.cached += int(lowering.cached)
        self.failed += int(lowering.artifact is None)

    @property
    def finished(self) -> bool:
        return self.done >= self.total

    def summary(self) -> str:
        """`lowered 7/7 (3 cache hits, 1 failed) in 12.3 s`."""
        extra = [f"{self.cached} cache hit{'s' if self.cached != 1 else ''}"]
        if self.failed:
            extra.append(f"{self.failed} failed")
        return (f"lowered {self.done}/{self.total} ({', '.join(extra)}) in "
                f"{time.monotonic() - self._start:.1f} s")


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
    """One line per finished case on `stream`, flushed at once (CI logs), and one line when
    the lowering is done."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total = total
        self.done = 0
        self.stream = stream
        self.lowering = LoweringCount(total)

    def on_lowered(self, lowering: Any) -> None:
        """Count it; write the lowering line after the first one, at each quarter and after
        the last (lowering and the boards overlap: one line at the end came after most cases
        had run, and nothing said what the first seconds were spent on)."""
        self.lowering.add(lowering)
        done, total = self.lowering.done, self.lowering.total
        quarters = {max(1, (total * q) // 4) for q in (1, 2, 3)}
        if done == 1 or done in quarters or self.lowering.finished:
            self.stream.write(self.lowering.summary() + "\n")
            self.stream.flush()

    def on_record(self, record: dict[str, Any]) -> None:
        """Write the case's line."""
        self.done += 1
        self.stream.write(format_record(record, self.done, self.total) + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Nothing to tear down."""


class RichProgress:
    """Two bars at the bottom of the terminal (lowering, cases on the boards), a coloured
    line per case above them."""

    def __init__(self, total: int, console: Console) -> None:
        self.total = total
        self.done = 0
        self.progress = Progress(
            TextColumn("{task.description:<7}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[note]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.failed = 0
        self.lowering = LoweringCount(total)
        self.lower_task = self.progress.add_task("lowered", total=total, note="0 cache hits")
        self.task = self.progress.add_task("cases", total=total, note="0 failed")
        self.progress.start()

    def on_lowered(self, lowering: Any) -> None:
        """Advance the lowering bar; when it is full, leave its summary line above."""
        self.lowering.add(lowering)
        note = f"{self.lowering.cached} cache hits" + (
            f", {self.lowering.failed} failed" if self.lowering.failed else "")
        self.progress.update(self.lower_task, advance=1, note=note)
        if self.lowering.finished:
            self.progress.console.print(Text(self.lowering.summary(), style="dim"))

    def on_record(self, record: dict[str, Any]) -> None:
        """Print the case's line above the bar and advance it."""
        self.done += 1
        verdict = Verdict(record["verdict"])
        self.failed += int(verdict.is_failure or verdict.is_error)
        line = format_record(record, self.done, self.total)
        self.progress.console.print(Text(line, style=verdict_style(verdict)))
        self.progress.update(self.task, advance=1, note=f"{self.failed} failed")

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
