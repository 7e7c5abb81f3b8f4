"""A run's results as they are written: every finished case journaled at once, results.json
rewritten at geometric checkpoints and JUnit re-rendered with it (hil/report/results.py:
O(cases) over a run), both durable at the end. Nothing is recorded after `close`."""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hil.report.junit import write_junit

log = logging.getLogger(__name__)


class Recorder:
    """results.json (through `ResultsWriter`) and JUnit of one run; thread-safe."""

    def __init__(self, results_path: Path, junit_path: Path, meta: dict[str, Any],
                 on_record: Callable[[dict[str, Any]], None] | None = None) -> None:
        from hil.report.results import ResultsWriter

        self.meta = meta
        """The `run` block as known so far (kept in step with results.json's)."""
        self.junit_path = junit_path
        self.on_record = on_record
        self.writer = ResultsWriter(results_path, meta)
        junit_path.parent.mkdir(parents=True, exist_ok=True)
        write_junit(self.writer.current(), junit_path)
        self.closed = False
        self._lock = threading.Lock()

    @property
    def records(self) -> list[dict[str, Any]]:
        """The finished cases so far, as written to results.json (one copy in memory)."""
        return self.writer.cases

    def add(self, record: dict[str, Any]) -> None:
        """Journal a finished case; JUnit follows when results.json was rewritten."""
        with self._lock:
            if self.closed:
                return  # the run has ended (a stop): a case cut short by it is not a result
            if self.writer.add(record):
                self._write_junit(durable=False)  # valid after any stop; durable at the end
            if self.on_record is not None:
                self.on_record(record)

    def update_run(self, **fields: Any) -> None:
        """Run fields learnt on the way (boards, flow, usable boards)."""
        with self._lock:
            self.meta.update(fields)
            self.writer.update_run(**fields)

    def close(self, status: str | None) -> None:
        """Every case into results.json with `status` (None: hil itself failed, it stays
        `running`), then JUnit; idempotent."""
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
            self._write_junit()
            log.info("results: %d cases written in %.2f s (results.json %.2f s, JUnit %.2f s)",
                     len(self.records), time.perf_counter() - began, results_s,
                     time.perf_counter() - began - results_s)

    def _write_junit(self, durable: bool = True) -> None:
        write_junit(self.writer.current(), self.junit_path, durable)
        # junit-xml pretty-prints through a minidom tree, a web of reference cycles as large
        # as the run: collected now, it does not wait for a full collection
        gc.collect()
