"""`hil -v run` as a child process, watched: its progress lines say which case finished when,
its log lines when a board starts recovering, is quarantined or comes back, when a traceback
appeared and how long the final results took to write; /proc says its RSS, fds and threads
when the first and the last case finished, and where its private adb server is."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from .procs import Sample, descendants, sample

PROGRESS = re.compile(r"^\[\s*(\d+)/(\d+)\] (\S+)\s+(\S+) \[(\S+)\]")
LOG_LINE = re.compile(r"^(\S+ \S+) (\w+) (\S+): (.*)$")
RECOVERY_START = re.compile(r"^(\S+): infrastructure error; recovery starts at (\S+)")
RECOVERY_STEP = re.compile(r"^(\S+): recovery (\S+): (board is back|failed)")
QUARANTINED = re.compile(r"^(\S+): quarantined(?: for the rest of the run)? \((.*)\)")
READMITTED = re.compile(r"^(\S+): back in the run \((.*)\)")
WRITTEN = re.compile(
    r"results: (\d+) cases written in ([\d.]+) s \(results.json ([\d.]+) s, JUnit ([\d.]+) s\)")
SAMPLE_EVERY_S = 2.0
"""Between two looks at hil's RSS for its peak."""


class Finished(NamedTuple):
    """A progress line: one case finished."""

    at: float
    """Epoch seconds."""
    done: int
    verdict: str
    key: str
    board: str


class Event(NamedTuple):
    """A board's log line: `recovery` (start), `step`, `quarantined` or `back`."""

    at: float
    """Epoch seconds."""
    kind: str
    board: str
    detail: str


@dataclass
class HilRun:
    """`hil -v run` as a child process, watched through its output and /proc."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    log_path: Path
    process: subprocess.Popen[str] | None = None
    finished: list[Finished] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    tracebacks: int = 0
    results_write: tuple[int, float, float, float] | None = None
    """Cases, seconds to write results.json and JUnit at the end, of which results.json, JUnit."""
    first: Sample | None = None
    last: Sample | None = None
    peak: Sample | None = None
    adb_socket: str | None = None
    in_recovery: set[str] = field(default_factory=set)
    out_of_run: set[str] = field(default_factory=set)
    """Boards quarantined and not back (yet)."""
    on_recovery: Callable[[str], None] | None = None
    """Called with the board's name when a recovery starts."""
    on_case: Callable[[], None] | None = None
    """Called when a case finished."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        self.process = subprocess.Popen(self.argv, cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, bufsize=1)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        threading.Thread(target=self._sample_loop, daemon=True).start()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _read_stdout(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        with (self.log_path.parent / "hil.stdout").open("w") as copy:
            for line in self.process.stdout:
                copy.write(line)
                match = PROGRESS.match(line)
                if not match:
                    continue
                done, total = int(match.group(1)), int(match.group(2))
                with self.lock:
                    self.finished.append(Finished(time.time(), done, match.group(3), match.group(4),
                                                  match.group(5)))
                if done == 1 or done == total:
                    self._take_sample(first=done == 1)
                if self.on_case is not None:
                    self.on_case()

    def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        with self.log_path.open("w") as copy:
            for line in self.process.stderr:
                copy.write(line)
                copy.flush()
                if "Traceback (most recent call last)" in line or line.startswith("Exception in thread"):
                    self.tracebacks += 1
                match = LOG_LINE.match(line.rstrip("\n"))
                if match:
                    self._log_event(match.group(4))

    def _log_event(self, message: str) -> None:
        now = time.time()
        written = WRITTEN.search(message)
        if written:
            self.results_write = (int(written.group(1)), float(written.group(2)),
                                  float(written.group(3)), float(written.group(4)))
        for kind, pattern in (("recovery", RECOVERY_START), ("step", RECOVERY_STEP),
                              ("quarantined", QUARANTINED), ("back", READMITTED)):
            match = pattern.match(message)
            if not match:
                continue
            board = match.group(1)
            with self.lock:
                self.events.append(Event(now, kind, board, match.group(2)))
                if kind == "recovery":
                    self.in_recovery.add(board)
                elif kind == "quarantined" or (kind == "step" and match.group(3) == "board is back"):
                    self.in_recovery.discard(board)
                if kind == "quarantined":
                    self.out_of_run.add(board)
                elif kind == "back":
                    self.out_of_run.discard(board)
            if kind == "recovery" and self.on_recovery is not None:
                self.on_recovery(board)

    def _take_sample(self, first: bool = False) -> None:
        if self.process is None:
            return
        taken = sample(self.process.pid, self.adb_socket)
        if taken is None:
            return
        with self.lock:
            if first:
                self.first = taken
            elif self.first is not None:
                self.last = taken
            if self.peak is None or taken.rss_mb > self.peak.rss_mb:
                self.peak = taken

    def _sample_loop(self) -> None:
        assert self.process is not None
        while self.process.poll() is None:
            if self.adb_socket is None:
                self.adb_socket = self._find_adb_socket()
            time.sleep(SAMPLE_EVERY_S)
            if self.first is not None:
                taken = sample(self.process.pid, self.adb_socket)
                with self.lock:
                    if taken is not None and (self.peak is None or taken.rss_mb > self.peak.rss_mb):
                        self.peak = taken

    def adb_server_pid(self) -> int | None:
        """The private adb server hil started (its child `adb -L localfilesystem:PATH ... server`)."""
        assert self.process is not None
        for pid, command in descendants(self.process.pid).items():
            if " nodaemon server" in command and command.split()[0].endswith("adb"):
                return pid
        return None

    def _find_adb_socket(self) -> str | None:
        assert self.process is not None
        for command in descendants(self.process.pid).values():
            match = re.search(r" -L localfilesystem:(\S+) nodaemon server", command)
            if match:
                return match.group(1)
        return None
