"""A run's results take memory bounded whatever its number of cases: recording, the final
results.json and JUnit, and the end-of-run renderings hold no case beyond the few they show.
Measured as bytes allocated (tracemalloc), never as time; each bound is a fraction of what
holding the cases would take (an O(cases) writer cannot meet it)."""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hil.report.github import annotations, log_groups
from hil.report.results import CaseStream, case_texts, journal_path, save_results
from hil.report.summary import render_summary
from hil.report.writer import ResultsWriter
from hil.run.recorder import Recorder

from . import RUN

MB = 1024 * 1024
LOG = "I executorch: a line of the runner's log, as a case keeps it\n" * 64
"""4 KB of log per case: what each case would cost an O(cases) writer at least."""


def _case(index: int) -> dict[str, Any]:
    failed = index % 10 == 3
    return {"suite": "mem", "precision": "fp32", "id": f"c{index:05d}", "classname": "mem.fp32",
            "board": f"b{index % 4}", "verdict": "FAIL_MISMATCH" if failed else "PASS",
            "message": "max abs error too large" if failed else "", "logs": {"runner": LOG},
            "timings_s": {"exec": index % 7 / 10}, "latency_ms": {"p50": 0.4, "mean": 0.4, "n": 3},
            "outputs": [{"index": 0, "max_abs": index % 11 / 10, "ok": not failed}]}


def _peak(action: Callable[[], Any]) -> int:
    """Bytes allocated at the peak of `action` above what was allocated before it."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        action()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_results_json_of_20000_cases_is_streamed_from_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    writer = ResultsWriter(path, RUN)
    record = writer.journal(_case(0))
    line = journal_path(path).read_bytes().splitlines()[-1] + b"\n"
    with journal_path(path).open("ab") as journal:  # 19,999 more of the same case, quickly
        journal.write(line * 19_999)
    writer._journal_size += len(line) * 19_999
    writer.counts[record["verdict"]] += 19_999
    size = journal_path(path).stat().st_size
    assert size > 20_000 * 4096
    peak = _peak(lambda: writer.finish("complete"))
    assert peak < size / 100  # holding the cases' text alone would take `size`
    assert sum(1 for _ in case_texts(path)) == 20_000


def test_recording_and_the_final_files_hold_no_case(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "results.json", tmp_path / "junit.xml",
                        {**RUN, "boards": [{"name": f"b{i}"} for i in range(4)]})
    for index in range(200):  # every testsuite and spool open, the checkpoints' sizes met
        recorder.add(_case(index))

    def record() -> None:
        for index in range(200, 1_500):
            recorder.add(_case(index))

    assert _peak(record) < MB  # its cases' logs alone: 1,300 * 4 KB
    assert _peak(lambda: recorder.close("complete")) < MB  # 1,500 * 4 KB
    assert os.path.getsize(tmp_path / "junit.xml") > 1_500 * len(LOG)  # JUnit has every log


def test_the_end_of_run_renderings_keep_what_they_show(tmp_path: Path) -> None:
    """Summary, annotations and groups (the table prints ROWS_PER_TABLE rows at a time: its
    slices read as one table, tests/report/test_streaming.py)."""
    path = tmp_path / "results.json"
    log = LOG * 3
    save_results({"run": dict(RUN), "cases": [{**_case(i), "logs": {"runner": log}} for i in range(3_000)]}, path)
    results = {"run": dict(RUN), "cases": CaseStream(lambda: case_texts(path), 3_000)}

    def render() -> None:
        assert "3000 case(s)" in render_summary(results)
        assert len(annotations(results)) == 11  # 10 and a notice naming the others
        for _ in log_groups(results):
            pass

    assert _peak(render) < 3_000 * len(log) / 5
