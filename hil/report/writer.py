"""The run's writer of results.json: the cases live on disk only, so hil's memory does not
grow with the run (a 50,000-case night holds what a 50-case run does).

Writing costs O(cases) over a whole run, not per case:

- every finished case (and every change of the run's fields) is appended at once, as one
  JSON line, to the run's journal `results.json.journal` (one `write`; `fdatasync` at each
  checkpoint);
- `results.json` itself is rewritten atomically (temporary file, rename; fsync'd only by
  `finish`: see `atomic_writer`), streamed from the journal a line at a time
  (`write_document`: each case's line is the journal's, cut, not parsed again), only when
  the journal has grown by CHECKPOINT_GROWTH since the last rewrite (a geometric series:
  about (1 + 1/CHECKPOINT_GROWTH) times the final size written in all, and the file is
  never more than 1 - 1/(1 + CHECKPOINT_GROWTH) = 20 % of the cases behind), and when the
  run ends (`finish`), which also removes the journal.

So at every moment `results.json` is a valid document, and after any end of the run but a
SIGKILL or a power cut it holds every finished case. After those, `results.json` is a
valid document of its last rewrite (status `running`) and the journal beside it holds
every case finished before a SIGKILL (before the last checkpoint, after a power cut):
`load_results` replays it, so `hil report` and every other reader see them all
(`run.recovered_from_journal`). In memory: the run's fields and the count per verdict.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hil.report.results import (
    FINAL_STATUSES,
    SCHEMA,
    VERSION,
    CaseStream,
    cap_text,
    case_texts,
    journal_path,
    one_line,
    ordered_totals,
    sanitise,
    utc_now,
    write_document,
)
from hil.verdict import Verdict

CHECKPOINT_GROWTH = 0.25
"""results.json is rewritten when the journal has grown by this share since the last time."""
_CASE_PREFIX = b'{"case": '
"""A journal's case line is `{"case": ` + the case's text + `}`: `json.dumps` of {"case": record}."""


def _finished_case(case: dict[str, Any]) -> dict[str, Any]:
    """The record stored for `case`: sanitised, one-line message, capped detail and logs."""
    record = sanitise(case)
    verdict = record.get("verdict")
    if verdict not in {v.value for v in Verdict}:
        raise ValueError(f"case {record.get('id')!r}: {verdict!r} is not a finished verdict")
    record["message"] = one_line(str(record.get("message") or ""))
    record["detail"] = cap_text(str(record.get("detail") or ""))
    record["logs"] = {
        name: cap_text(log) if isinstance(log, str) else log
        for name, log in (record.get("logs") or {}).items()
    }
    return record


class ResultsWriter:
    """A run's results document: every change goes to the journal at once, and
    `results.json` is rewritten from it at checkpoints and on `finish` (see the module
    docstring)."""

    def __init__(self, path: Path, run_meta: dict[str, Any]) -> None:
        self.path = Path(path)
        run = sanitise(run_meta)
        run.setdefault("started", utc_now())
        run["status"] = "running"
        run["finished"] = None
        self._run: dict[str, Any] = run
        self.counts: Counter[str] = Counter()
        """Finished cases per verdict name."""
        self._journal_size = 0
        self._journal_at_checkpoint = 0
        self.checkpoints = 0
        """How often results.json was rewritten."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._journal: int | None = os.open(
            journal_path(self.path),
            os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC, 0o644,
        )
        self._append({"journal": SCHEMA, "version": VERSION, "run": run})
        self.checkpoint()

    @property
    def run(self) -> dict[str, Any]:
        """The run's fields as written: read them, do not change them."""
        return self._run

    @property
    def count(self) -> int:
        """Finished cases so far."""
        return sum(self.counts.values())

    def current(self) -> dict[str, Any]:
        """The whole document, its cases a `CaseStream` read from disk (the journal while the
        run goes, results.json once it is finished): iterate them, do not keep them."""
        return {"schema": SCHEMA, "version": VERSION, "run": self._run,
                "cases": CaseStream(self._case_texts, self.count),
                "totals": ordered_totals(self.counts)}

    def journal(self, case: dict[str, Any]) -> dict[str, Any]:
        """Append a finished case (a valid verdict is required) to the journal; the record as
        stored (sanitised, capped). On an error both files are left as they were."""
        record = _finished_case(case)
        if self._journal is None:
            raise ValueError(f"case {record.get('id')!r}: the run's results are finished")
        self._append({"case": record})
        self.counts[record["verdict"]] += 1
        return record

    def add(self, case: dict[str, Any]) -> bool:
        """`journal` a finished case, then rewrite results.json if a checkpoint is due; True
        when it was."""
        self.journal(case)
        return self.checkpoint_if_due()

    def update_run(self, **fields: Any) -> bool:
        """Set run fields learnt during the run (e.g. `boards` once they are up): journaled
        at once, in results.json from the next checkpoint; True when that was now."""
        clean = sanitise(fields)
        self._append({"run": clean})
        self._run = {**self._run, **clean}
        return self.checkpoint_if_due()

    def checkpoint(self, durable: bool = False) -> None:
        """Rewrite results.json with everything so far (status unchanged); `durable`: see
        `atomic_writer` (the run's last write is)."""
        if self._journal is not None:
            os.fdatasync(self._journal)  # a power cut loses at most what follows a checkpoint
        write_document(self.path, self._run, self._case_texts(), ordered_totals(self.counts), durable)
        self._journal_at_checkpoint = self._journal_size
        self.checkpoints += 1

    def finish(self, status: str) -> None:
        """Mark the run `complete`, `interrupted` or `refused`, stamp `finished`, rewrite
        results.json, then close and remove the journal (the file now holds everything)."""
        if status not in FINAL_STATUSES:
            raise ValueError(f"run status must be one of {FINAL_STATUSES}, not {status!r}")
        self._run = {**self._run, "status": status, "finished": utc_now()}
        self.checkpoint(durable=True)
        if self._journal is not None:
            os.close(self._journal)
            self._journal = None
            journal_path(self.path).unlink(missing_ok=True)

    def checkpoint_if_due(self) -> bool:
        """Rewrite results.json when the journal has grown enough (at once after `finish`);
        True when it was rewritten."""
        grown = self._journal_size - self._journal_at_checkpoint
        due = grown >= CHECKPOINT_GROWTH * self._journal_at_checkpoint
        if self._journal is not None and not due:
            return False
        # after finish a late change of the run's fields is written at once, and durably as
        # finish's own write was: no journal holds it any more
        self.checkpoint(durable=self._journal is None)
        return True

    def _case_texts(self) -> Iterator[str]:
        """Each finished case's text: from the journal while it is open, else from
        results.json (which then holds them all)."""
        if self._journal is None:
            yield from case_texts(self.path)
            return
        left = self._journal_size
        with journal_path(self.path).open("rb") as stream:
            for line in stream:
                left -= len(line)
                if left < 0:
                    return  # (not written by this writer: nothing is appended while it reads)
                if line.startswith(_CASE_PREFIX):
                    yield line[len(_CASE_PREFIX):-2].decode("utf-8")

    def _append(self, entry: dict[str, Any]) -> None:
        if self._journal is None:
            return
        line = (json.dumps(entry, allow_nan=False) + "\n").encode("utf-8")
        written = os.write(self._journal, line)
        if written != len(line):  # a short write (disk full): the torn line is cut off, so
            os.ftruncate(self._journal, self._journal_size)  # the next one starts a line
            raise OSError(f"{journal_path(self.path)}: short write ({written} of {len(line)} bytes)")
        # no sync per case (3 ms a case under load: a stall of ours, as results.json's per-case
        # fsync was): the line survives hil being killed; `checkpoint` syncs it to disk
        self._journal_size += len(line)
