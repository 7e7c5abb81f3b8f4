"""The state of a bisection in `--out`: an append-only journal of its completed board runs,
replayed when the same command runs again (after a kill -9 too).

`OUT/bisect.journal`, one JSON object a line, as results.json's journal (hil/report/writer.py):
the first line is the header (`journal`, `version`, what the bisection is of: the digests of
GOOD and BAD and the options that decide it); every other line one completed board run
(`{"run": {...}}`, its record as bisect.json's `board_runs` holds it), written whole and
fsync'd before the run counts as done. A torn last line (killed while writing it) is left out.
The search is deterministic given its runs' outcomes, so replaying them leads it to the same
point, where it goes on: no completed run is made twice.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hil.errors import UsageError

JOURNAL_NAME = "bisect.journal"
SCHEMA = "exynos-hil/bisect-journal"
VERSION = 1


class Journal:
    """The completed board runs of one bisection, on disk and by key."""

    def __init__(self, out: Path, identity: dict[str, Any]) -> None:
        """Open `out`'s journal for the bisection `identity` describes: replayed when it is
        this bisection's, started otherwise; UsageError when `out` holds another's."""
        self.path = out / JOURNAL_NAME
        self.runs: dict[str, dict[str, Any]] = {}
        """Completed board runs by key, in the order they completed."""
        self.resumed = False
        header = {"journal": SCHEMA, "version": VERSION, "identity": identity}
        lines = self._read()
        if lines:
            if lines[0].get("journal") != SCHEMA or lines[0].get("identity") != identity:
                raise UsageError(f"--out {out}: holds another bisection ({self.path}): give another "
                                 "--out, or remove the folder to start again")
            for entry in lines[1:]:
                if isinstance(entry.get("run"), dict) and entry["run"].get("key"):
                    self.runs[entry["run"]["key"]] = entry["run"]
            self.resumed = True
        out.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        if not lines:
            self._append(header)

    def _read(self) -> list[dict[str, Any]]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        if data and not data.endswith(b"\n"):
            # a line torn by a kill in the middle of its write: cut off, so that what is
            # appended next starts a line of its own
            data = data[:data.rfind(b"\n") + 1]
            with self.path.open("r+b") as stream:
                stream.truncate(len(data))
        raw = data.splitlines()
        entries = []
        for number, line in enumerate(raw):
            try:
                entry = json.loads(line)
            except ValueError:
                raise UsageError(f"{self.path}: line {number + 1} is not valid JSON") from None
            if not isinstance(entry, dict):
                raise UsageError(f"{self.path}: line {number + 1} is not a journal entry")
            entries.append(entry)
        return entries

    def _append(self, entry: dict[str, Any]) -> None:
        os.write(self._fd, (json.dumps(entry, allow_nan=False) + "\n").encode())
        os.fsync(self._fd)

    def add(self, run: dict[str, Any]) -> None:
        """A completed board run (its record, with its `key`)."""
        self._append({"run": run})
        self.runs[run["key"]] = run

    def close(self) -> None:
        os.close(self._fd)
