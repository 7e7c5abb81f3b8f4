"""Progress of a run while it runs, both phases: lowering (lowered N/M, cache hits, failures)
and the boards (cases N/M, failures). On a terminal two rich progress bars with a live line
per finished case above them; anywhere else (CI logs, pipes) one plain line per case, the
lowering count with the case's name for each case lowered (`lowered 3/12 (0 cache hits) in
41.5 s: models.fp32.resnet18 (20.3 s)`; cache hits are counted at the first artifact, each
quarter and the end), and a `still lowering` line whenever HEARTBEAT_S pass without a line
(a cold models suite spends minutes on one case)."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Protocol, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from hil.report.console import verdict_style
from hil.report.results import case_key, clean_text, one_line, worst_abs_error
from hil.report.stats import headline_latency
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

    def elapsed(self) -> float:
        """Seconds since the lowering began."""
        return time.monotonic() - self._start

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
    headline = headline_latency(record)  # the same statistic as the table's column
    if headline is not None:
        parts.append(f"{headline[0]} {headline[1]:.3f} ms")
    error = worst_abs_error(record)
    if error is not None:
        parts.append(f"max_abs {error:.3g}")
    message = one_line(clean_text(str(record.get("message") or "")))
    line = " ".join(parts)
    return f"{line}  {message}" if message else line


HEARTBEAT_S = 30.0
"""Longest silence of the plain progress while cases are still lowering."""
HEARTBEAT_PREFIX = "still lowering:"
"""How the line after HEARTBEAT_S of silence starts (`still lowering: 3/12 done after 95 s`)."""


class PlainProgress:
    """One line per finished case and per case lowered on `stream`, flushed at once (CI
    logs), the lowering count at the first artifact, each quarter and the end, and a line
    whenever `heartbeat_s` pass in silence while lowering goes on."""

    def __init__(self, total: int, stream: TextIO, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.total = total
        self.done = 0
        self.stream = stream
        self.lowering = LoweringCount(total)
        self._lock = threading.Lock()
        self._last_line = time.monotonic()
        self._closed = threading.Event()
        self._heartbeat = threading.Thread(target=self._beat, args=(heartbeat_s,), daemon=True,
                                           name="progress-heartbeat")
        self._heartbeat.start()

    def _write(self, line: str) -> None:
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()
            self._last_line = time.monotonic()

    def _beat(self, heartbeat_s: float) -> None:
        """While lowering goes on: a line after `heartbeat_s` without one."""
        while not self._closed.wait(max(0.0, self._last_line + heartbeat_s - time.monotonic())):
            if self.lowering.finished:
                return
            if time.monotonic() - self._last_line >= heartbeat_s:
                try:
                    self._write(f"{HEARTBEAT_PREFIX} {self.lowering.done}/{self.lowering.total} "
                                f"done after {self.lowering.elapsed():.0f} s")
                except (ValueError, OSError):  # the stream was closed under it: nobody to tell
                    return

    def on_lowered(self, lowering: Any) -> None:
        """Count it; write the lowering count with the case's name for a case lowered (not a
        cache hit), and for cache hits after the first, at each quarter and after the last
        (lowering and the boards overlap: nothing else said what the first minutes were
        spent on)."""
        self.lowering.add(lowering)
        done, total = self.lowering.done, self.lowering.total
        quarters = {max(1, (total * q) // 4) for q in (1, 2, 3)}
        if not lowering.cached:
            failed = ", failed" if lowering.artifact is None else ""
            self._write(f"{self.lowering.summary()}: {lowering.case_key} ({lowering.seconds:.1f} s{failed})")
        elif done == 1 or done in quarters or self.lowering.finished:
            self._write(self.lowering.summary())

    def on_record(self, record: dict[str, Any]) -> None:
        """Write the case's line."""
        self.done += 1
        self._write(format_record(record, self.done, self.total))

    def close(self) -> None:
        """Stop the heartbeat."""
        self._closed.set()
        self._heartbeat.join()


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
            # third-party writes to sys.stderr go where hil.report.thirdparty sends fd 2 (the
            # run's third-party.log), never through the live display between the bars
            redirect_stderr=False,
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
