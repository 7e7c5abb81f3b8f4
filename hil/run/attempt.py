"""One attempt of one case on one board: run the artifact, judge it, and make its record.

Case → Artifact → (board) Execution → Judgement → case record. An infrastructure error is
returned beside the record, for the scheduler (retry) and the pool (recovery) to act on.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hil.board.adb import AdbBoard
from hil.cases.case import Case
from hil.errors import InfraError
from hil.latency_plan import LatencyPlan
from hil.paths import safe_name
from hil.run.records import case_record
from hil.verdict import Verdict

ATTEMPT_LOG_CHARS = 8192
"""Tail of each log kept with an earlier attempt of a retried case."""


@dataclass
class Work:
    """A lowered case waiting for a board."""

    index: int
    case: Case
    artifact: Any
    cached: bool = False
    tried_on: list[str] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    """Earlier attempts that ended in ERROR_INFRA: board, verdict, message."""

    @property
    def slot(self) -> str:
        """The case's folder name, on the board and under the run's `cases/`."""
        return f"c{self.index:04d}"

    @property
    def lower_seconds(self) -> float:
        """Seconds this run spent lowering the case (0 for a cache hit)."""
        return 0.0 if self.cached else round(sum(self.artifact.times_s.values()), 4)

    def remember(self, record: dict[str, Any], started: str) -> None:
        """Keep a failed attempt's essentials with the case (its record is not written)."""
        self.history.append(
            {"board": record["board"], "verdict": record["verdict"], "message": record["message"],
             "started": started, "finished": record["finished"],
             "logs": {name: text[-ATTEMPT_LOG_CHARS:] for name, text in record["logs"].items()}}
        )


def infra_record(work: Work, reason: str, logs: dict[str, str] | None = None) -> dict[str, Any]:
    """The record of a case that ended in an infrastructure error (or never found a board)."""
    return case_record(
        work.case,
        board=work.tried_on[-1] if work.tried_on else None,
        verdict=Verdict.ERROR_INFRA.value,
        message=reason[:500],
        attempts=len(work.tried_on),
        pte_bytes=work.artifact.pte_bytes,
        timings_s={"lower": work.lower_seconds},
        logs=logs or {},
        earlier_attempts=list(work.history),
    )


def attempt(board: AdbBoard, work: Work, plan: LatencyPlan, out_dir: Path,
            keep_outputs: bool = False) -> tuple[dict[str, Any], InfraError | None]:
    """The case's record on `board`, and the infrastructure error if there was one. A case
    that did not pass carries the board's logcat tail and console excerpt, and its board
    outputs are written to `out_dir/cases/<slot>/output-<board>/` (every case's with
    `keep_outputs`)."""
    from hil.board.watchdog import BoardSilent
    from hil.judge import judge

    work.tried_on.append(board.name)
    artifact = work.artifact
    try:
        execution = board.run(artifact, work.slot, plan.iterations, plan.warmup, plan.noise)
        judgement = judge(work.case, artifact, execution)
        if keep_outputs or not judgement.verdict.passed:
            execution.write_outputs(out_dir / "cases" / work.slot / f"output-{safe_name(board.name)}")
    except InfraError as exc:
        logs = board.diagnostics(logcat=not isinstance(exc, BoardSilent))
        return infra_record(work, str(exc), logs), exc
    except Exception as exc:  # noqa: BLE001 - a bug in hil: record it, keep going
        return case_record(
            work.case, board=board.name, verdict=Verdict.ERROR_INTERNAL.value,
            message=f"{type(exc).__name__}: {exc}"[:300], detail=traceback.format_exc(),
            attempts=len(work.tried_on), earlier_attempts=list(work.history),
        ), None
    logs = {"runner": (execution.stdout + execution.stderr)[-65536:]}
    if not judgement.verdict.passed:
        logs.update(board.diagnostics())
    return case_record(
        work.case,
        board=board.name,
        verdict=judgement.verdict.value,
        message=judgement.message,
        attempts=len(work.tried_on),
        timings_s={"lower": work.lower_seconds, **execution.timings_s},
        cache_hit=work.cached,
        **execution.record_fields(),
        **artifact.record_fields(),
        outputs=judgement.output_records(),
        checker=judgement.checker_record(),
        logs=logs,
        earlier_attempts=list(work.history),
    ), None
