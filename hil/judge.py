"""Turn one execution on a board into a verdict: runner status first, then the numbers."""

from __future__ import annotations

import signal
from dataclasses import dataclass

from hil.board.adb import Execution
from hil.cases.case import Case
from hil.lower.artifact import Artifact, read_raw
from hil.verdict import OutputComparison, Verdict, compare_outputs

NPU_FLOWS = ("enn",)
"""Flows on which `Case.expect_delegated` is required, not just recorded."""


@dataclass(frozen=True)
class Judgement:
    """A verdict with its one-line reason and the per-output statistics."""

    verdict: Verdict
    message: str
    comparisons: tuple[OutputComparison, ...] = ()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def missing_delegation(case: Case, artifact: Artifact) -> list[str]:
    """Ops the case expects inside a delegate that are not there."""
    delegated = {name.split(".")[1] if "." in name else name for name in artifact.delegated_ops}
    return [op for op in case.expect_delegated if op not in delegated]


def judge(case: Case, artifact: Artifact, execution: Execution) -> Judgement:
    """The verdict of `execution` of `artifact` for `case`."""
    code = execution.exit_code
    if execution.timed_out:
        return Judgement(Verdict.FAIL_RUN, "TIMEOUT: runner killed on the device at its deadline")
    if code == 1:
        return Judgement(Verdict.FAIL_LOAD, f"runner exit 1 (program load or flags): {_tail(execution)}")
    if code > 128:
        name = _signal_name(code - 128)
        return Judgement(Verdict.FAIL_RUN, f"runner killed by {name} (exit {code}): {_tail(execution)}")
    if code != 0:
        return Judgement(Verdict.FAIL_RUN, f"runner exit {code}: {_tail(execution)}")
    actuals = []
    for index, (path, meta) in enumerate(zip(execution.outputs, artifact.outputs, strict=True)):
        if path is None:
            return Judgement(Verdict.FAIL_RUN, f"output {index}: the runner wrote no output_{index}.bin")
        try:
            actuals.append(read_raw(path, meta))
        except ValueError as exc:
            return Judgement(Verdict.FAIL_RUN, f"output {index}: {exc}")
    references = [artifact.read_reference(i) for i in range(len(artifact.outputs))]
    comparisons = tuple(compare_outputs(references, actuals, case.tolerance))
    bad = [c for c in comparisons if not c.ok]
    if bad:
        extra = f" (+{len(bad) - 1} more outputs)" if len(bad) > 1 else ""
        return Judgement(Verdict.FAIL_MISMATCH, bad[0].reason + extra, comparisons)
    missing = missing_delegation(case, artifact)
    if missing and artifact.flow in NPU_FLOWS:
        return Judgement(
            Verdict.PASS_UNDELEGATED,
            f"passed, but not delegated on {artifact.flow}: {', '.join(missing)}",
            comparisons,
        )
    return Judgement(Verdict.PASS, "", comparisons)


def _tail(execution: Execution) -> str:
    lines = [line for line in (execution.stderr + execution.stdout).splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"
