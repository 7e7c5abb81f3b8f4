"""A run's results as they are written: every finished case journaled at once and its JUnit
testcase spooled at once; results.json rewritten from the journal at geometric checkpoints
and JUnit composed from the spools with it (hil/report/writer.py, hil/report/junit.py:
O(cases) over a run), both durable at the end. The cases stay on disk: memory holds the
run's fields and counts, not its cases. Nothing is recorded after `close`."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hil.report.junit import JUnitSpool, spool_folder
from hil.report.writer import ResultsWriter

log = logging.getLogger(__name__)


class Recorder:
    """results.json (through `ResultsWriter`) and JUnit (through `JUnitSpool`) of one run;
    thread-safe."""

    def __init__(self, results_path: Path, junit_path: Path, meta: dict[str, Any],
                 on_record: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.meta = meta
        """The `run` block as known so far (kept in step with results.json's)."""
        self.junit_path = junit_path
        self.on_record = on_record
        self.writer = ResultsWriter(results_path, meta)
        junit_path.parent.mkdir(parents=True, exist_ok=True)
        self._junit = JUnitSpool(spool_folder(junit_path))
        self._junit.write(junit_path, self.writer.run)
        self.closed = False
        self._lock = threading.Lock()

    @property
    def counts(self) -> Counter[str]:
        """Finished cases so far per verdict name."""
        return self.writer.counts

    @property
    def count(self) -> int:
        """Finished cases so far."""
        return self.writer.count

    def results(self) -> dict[str, Any]:
        """The document as written, its cases read back from disk as they are iterated
        (`ResultsWriter.current`)."""
        return self.writer.current()

    def add(self, record: dict[str, Any]) -> None:
        """Journal a finished case and spool its testcase; JUnit follows when results.json
        was rewritten."""
        with self._lock:
            if self.closed:
                return  # the run has ended (a stop): a case cut short by it is not a result
            self._junit.add(self.writer.journal(record), self.writer.run)
            if self.writer.checkpoint_if_due():
                self._junit_follows()
            if self.on_record is not None:
                self.on_record(record)

    def update_run(self, **fields: Any) -> None:
        """Run fields learnt on the way (boards, flow, usable boards)."""
        with self._lock:
            self.meta.update(fields)
            if self.writer.update_run(**fields) and not self.closed:
                self._junit_follows()

    def _junit_follows(self) -> None:
        """results.json was rewritten: so is JUnit, from the spool (valid after any stop;
        `close` writes the final one durably)."""
        self._junit.write(self.junit_path, self.writer.run, durable=False)

    def close(self, status: str | None) -> None:
        """Every case into results.json with `status` (None: hil itself failed, it stays
        `running`), then JUnit, and the spools removed; idempotent."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            began = time.perf_counter()
            if status is None:
                self.writer.checkpoint()
            else:
                self.writer.finish(status)
            results_s = time.perf_counter() - began
            try:
                self._junit.write(self.junit_path, self.writer.run)
            finally:
                self._junit.close()
            log.info("results: %d cases written in %.2f s (results.json %.2f s, JUnit %.2f s)",
                     self.count, time.perf_counter() - began, results_s,
                     time.perf_counter() - began - results_s)
