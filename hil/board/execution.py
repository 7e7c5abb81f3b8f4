"""What one artifact's runner invocations on a board produced: the `Execution` record, and the
latency and memory records assembled from the runner's logs, its `statistics.txt` files and
the `.pte` itself.

Plain data and pure functions (no adb): `hil/board/adb.py` fills the record, `hil/judge.py`
judges it and the run copies its measurements into the case record (`record_fields`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hil.latency import latency_stats
from hil.runner.contract import RunnerLog, parse_statistics

_PEAK_RSS_LINE = re.compile(r"^(?:Max RSS \(KiB\)|\s*Maximum resident set size \(kbytes\)): *(\d+)\s*$",
                            re.MULTILINE)
"""toybox's `time -v` line (busybox and GNU time print the second form)."""


@dataclass(frozen=True)
class Execution:
    """The runner invocations of one artifact on one board (one per `--iterations`)."""

    exit_code: int
    """Shell exit status: the last invocation's; 128+N when it died by signal N."""
    stdout: str
    stderr: str
    timed_out: bool
    """The runner ran past its deadline and was killed on the device."""
    logs: tuple[RunnerLog, ...]
    """Each invocation's log, read back (hil/runner/contract.py); only the last can have failed."""
    outputs: tuple[bytes | None, ...]
    """Each pulled `output_<i>.bin`, as the runner wrote it; None where the board wrote none.
    Kept in memory: the caller writes them where it wants them (`write_outputs`)."""
    timings_s: dict[str, float]
    """Seconds spent in `push`, `exec`, `pull`."""
    latency_ms: dict[str, Any] | None
    """The latency record (`latency_record`): the 1st run, the steady-state samples and the
    runner's own averages, with the same meaning on real and virtual boards."""
    memory: dict[str, Any] | None = None
    """The program's planned memory (read from the `.pte`) and the runner's peak RSS where
    the board can measure it (`memory_record`)."""
    board_state: dict[str, Any] | None = None
    """Thermal zones, cpufreq policies and the cool-down wait before the case (`thermal.py`)."""

    def write_outputs(self, folder: Path) -> None:
        """Write each output the board wrote as `folder/output_<i>.bin`."""
        folder.mkdir(parents=True, exist_ok=True)
        for index, data in enumerate(self.outputs):
            if data is not None:
                (folder / f"output_{index}.bin").write_bytes(data)

    def record_fields(self) -> dict[str, Any]:
        """The measurements of a results.json case record: `latency_ms`, `memory`,
        `board_state` (hil/report/results.schema.json)."""
        return {"latency_ms": self.latency_ms, "memory": self.memory, "board_state": self.board_state}


def latency_record(
    logs: Sequence[RunnerLog], statistics: Sequence[bytes | None], warmup: int
) -> dict[str, Any] | None:
    """The latency record of a case's runner invocations (each `--warm_up W
    --num_executions 1`): `init`, `load`, `first` (the 1st run after the warm-ups) from the
    first invocation's `statistics.txt`; one steady-state sample per invocation, the run after
    its 1st (the timing line's total / N); `runner_avg`, each invocation's own statistics
    `avg` = (1st + N runs) / (N + 1); `warmup`, the warm-ups before each 1st."""
    samples = [total / runs for runs, total, _avg in (log.timing for log in logs if log.timing) if runs]
    if not samples and not any(statistics):
        return None
    parsed = [parse_statistics(data) for data in statistics]
    latency: dict[str, Any] = {key: parsed[0][key] for key in ("init", "load", "first")
                               if parsed and key in parsed[0]}
    latency["runner_avg"] = [stats["avg"] for stats in parsed if "avg" in stats]
    latency["warmup"] = warmup
    latency.update(latency_stats(samples))
    return latency


def memory_record(
    program: dict[str, Any] | None, invocation_logs: Sequence[str] | None
) -> dict[str, Any] | None:
    """The `memory` record: the program's planned memory (`Artifact.planned_memory`: the
    memory-planned buffers, constants, delegate payloads, their sum; None: unknown, no
    record) and the runner's peak RSS, the largest over the invocations' `time -v` lines
    (None when the board cannot measure it or no invocation reported it)."""
    if program is None:
        return None
    peaks = [int(found) for text in invocation_logs or () for found in _PEAK_RSS_LINE.findall(text)]
    return {**program, "peak_rss_kib": max(peaks) if peaks else None}
