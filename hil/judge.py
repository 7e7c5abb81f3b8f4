"""Turn one execution on a board into a verdict: runner status first, then the numbers."""

from __future__ import annotations

import dataclasses
import math
import signal
from dataclasses import dataclass
from typing import Any

from hil.board.execution import Execution
from hil.cases.case import Case
from hil.checkers import CheckResult, cosine_similarity, run_checker
from hil.lower.artifact import Artifact, raw_array
from hil.runner.contract import Stage
from hil.verdict import OutputComparison, Tolerance, Verdict, compare_output

NPU_FLOWS = ("enn",)
"""Flows on which `Case.expect_delegated` is required, not just recorded."""


@dataclass(frozen=True)
class Judgement:
    """A verdict with its one-line reason and the per-output statistics."""

    verdict: Verdict
    message: str
    comparisons: tuple[OutputComparison, ...] = ()
    tolerances: tuple[tuple[Tolerance, str], ...] = ()
    """Per output, the tolerance applied and the rule that gave its atol."""
    cosine: tuple[float, ...] = ()
    """Per output, cosine similarity of the board's output with the reference."""
    check: CheckResult | None = None
    """The case's quantization checker, when it has one and the outputs were read."""

    def output_records(self) -> list[dict[str, Any]]:
        """The `outputs` entries of the case's results record."""
        return [
            {"index": c.index, "shape": list(c.shape), "dtype": c.dtype,
             "max_abs": c.max_abs, "max_rel": c.max_rel, "mae": c.mae, "sqnr_db": c.sqnr_db,
             "cosine": cos, "atol": tol.atol, "rtol": tol.rtol, "min_sqnr_db": tol.min_sqnr_db,
             "atol_rule": rule, "ok": c.ok}
            for c, cos, (tol, rule) in zip(self.comparisons, self.cosine, self.tolerances, strict=True)
        ]

    def checker_record(self) -> dict[str, Any] | None:
        """The `checker` entry of the case's results record (None without a checker)."""
        if self.check is None:
            return None
        return {"name": self.check.name, "ok": self.check.ok, "metrics": self.check.metrics,
                "reason": self.check.reason}


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def missing_delegation(case: Case, artifact: Artifact) -> list[str]:
    """Ops the case expects inside a delegate that are not there."""
    delegated = {name.split(".")[1] if "." in name else name for name in artifact.delegated_ops}
    return [op for op in case.expect_delegated if op not in delegated]


def output_tolerance(case: Case, artifact: Artifact, index: int) -> tuple[Tolerance, str]:
    """The tolerance of output `index` and the rule that gave its atol: for A8W8, the case's
    atol plus `atol_scale_steps` quantization steps of the output (the largest scale of its
    final dequantize and of the quantized inputs of the op producing it); the case's
    `tolerance_rule`, if any, says first where the numbers come from."""
    base = case.tolerance
    scale = artifact.output_scale(index)
    source = f"{case.tolerance_rule}: " if case.tolerance_rule else ""
    if case.atol_scale_steps and scale is not None:
        atol = base.atol + case.atol_scale_steps * scale
        rule = f"{source}{base.atol:g} + {case.atol_scale_steps:g} x quantization step {scale:.6g}"
        return dataclasses.replace(base, atol=atol), rule
    return base, f"{source}case atol"


def runner_judgement(execution: Execution) -> Judgement | None:
    """The verdict of a runner that did not finish, read from its log (None: it finished).

    FAIL_LOAD: it stopped before "Method loaded." (the program or its delegates and kernels
    did not load: exit 1 or an abort). FAIL_RUN: it stopped later (preparing inputs, while
    executing, writing outputs), died by a signal, or ran past its deadline (TIMEOUT). The
    message leads with the runner's own reason, its status code decoded."""
    if execution.timed_out:
        return Judgement(Verdict.FAIL_RUN, "TIMEOUT: runner killed on the device at its deadline")
    code = execution.exit_code
    if code == 0:
        return None
    log = execution.logs[-1] if execution.logs else None
    how = f"{_signal_name(code - 128)}, exit {code}" if code > 128 else f"exit {code}"
    reason = (log.reason if log is not None else "") or _tail(execution)
    stage = log.stage if log is not None else Stage.STARTED
    if stage < Stage.METHOD_LOADED:
        return Judgement(Verdict.FAIL_LOAD, f"runner could not load the program ({how}): {reason}")
    where = "preparing inputs" if stage is Stage.METHOD_LOADED else "executing"
    if stage is Stage.TIMED:
        where = "after executing"
    return Judgement(Verdict.FAIL_RUN, f"runner failed {where} ({how}): {reason}")


def judge(case: Case, artifact: Artifact, execution: Execution) -> Judgement:
    """The verdict of `execution` of `artifact` for `case`."""
    stopped = runner_judgement(execution)
    if stopped is not None:
        return stopped
    actuals = []
    for index, (data, meta) in enumerate(zip(execution.outputs, artifact.outputs, strict=True)):
        if data is None:
            return Judgement(Verdict.FAIL_RUN, f"output {index}: the runner wrote no output_{index}.bin")
        try:
            actuals.append(raw_array(data, meta, f"output_{index}.bin"))
        except ValueError as exc:
            return Judgement(Verdict.FAIL_RUN, f"output {index}: {exc}")
    references = [artifact.read_reference(i) for i in range(len(artifact.outputs))]
    tolerances = tuple(output_tolerance(case, artifact, i) for i in range(len(references)))
    comparisons = tuple(
        compare_output(i, ref, act, tol)
        for i, (ref, act, (tol, _)) in enumerate(zip(references, actuals, tolerances, strict=True))
    )
    cosine = tuple(
        cosine_similarity(ref, act) if ref.shape == act.shape else math.nan
        for ref, act in zip(references, actuals, strict=True)
    )
    check = None
    if case.checker is not None:
        fp32 = [artifact.read_fp32_reference(i) for i in range(len(references))]
        check = run_checker(case.checker, actuals, fp32, artifact.read_targets())
    details = {"comparisons": comparisons, "tolerances": tolerances, "cosine": cosine,
               "check": check}
    bad = [c for c in comparisons if not c.ok]
    if bad:
        extra = f" (+{len(bad) - 1} more outputs)" if len(bad) > 1 else ""
        return Judgement(Verdict.FAIL_MISMATCH, bad[0].reason + extra, **details)
    if check is not None and not check.ok:
        return Judgement(Verdict.FAIL_MISMATCH, f"checker {check.name}: {check.reason}", **details)
    missing = missing_delegation(case, artifact)
    if missing and artifact.flow in NPU_FLOWS:
        if case.require_delegation:
            return Judgement(
                Verdict.FAIL_LOWER,
                f"not delegated on {artifact.flow} (the case requires it): {', '.join(missing)}",
                **details,
            )
        return Judgement(
            Verdict.PASS_UNDELEGATED,
            f"passed, but not delegated on {artifact.flow}: {', '.join(missing)}",
            **details,
        )
    return Judgement(Verdict.PASS, "", **details)


def _tail(execution: Execution) -> str:
    lines = [line for line in (execution.stderr + execution.stdout).splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"
