"""The verdict taxonomy and the numeric comparison of board outputs with host references.

Everything a verdict implies — its JUnit element, its effect on the exit code, whether it is
retried — is decided here and nowhere else.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np


class Verdict(enum.Enum):
    """The outcome of one case on one board."""

    PASS = "PASS"  # noqa: S105 - a verdict, not a password
    """Outputs match the host reference within the case's tolerance."""
    PASS_UNDELEGATED = "PASS_UNDELEGATED"  # noqa: S105
    """Passed, but ops expected on the NPU fell back to the CPU (a warning)."""
    SKIP = "SKIP"
    """Not run: the case says `skip: reason` (JUnit `<skipped>` with the reason; exit code
    unaffected)."""
    XFAIL = "XFAIL"
    """Failed as the case's expectation says (a known failure, with its reason and link):
    JUnit `<skipped>` with the reason; neither a failure for the exit code nor retried."""
    XPASS = "XPASS"
    """Passed although the case expects a failure: a failure ("unexpectedly passed: remove
    the expectation"), JUnit `<failure type="XPASS">`, exit code 1; not retried."""
    FAIL_EXPORT = "FAIL_EXPORT"
    """torch.export of the case's module failed."""
    FAIL_QUANTIZE = "FAIL_QUANTIZE"
    """Post-training quantization (A8W8) failed."""
    FAIL_LOWER = "FAIL_LOWER"
    """Partitioning, lowering or serialisation to .pte failed."""
    FAIL_LOAD = "FAIL_LOAD"
    """The runner could not load the program (runner exit 1)."""
    FAIL_RUN = "FAIL_RUN"
    """The runner exited non-zero, died by a signal, or ran past its deadline."""
    FAIL_MISMATCH = "FAIL_MISMATCH"
    """Outputs differ from the host reference beyond the tolerance."""
    ERROR_INFRA = "ERROR_INFRA"
    """Board lost, adb failure, board frozen: not the model's fault. Retried."""
    ERROR_INTERNAL = "ERROR_INTERNAL"
    """A bug in hil itself."""

    @property
    def passed(self) -> bool:
        return self in (Verdict.PASS, Verdict.PASS_UNDELEGATED)

    @property
    def is_failure(self) -> bool:
        """A test failure: the model or the backend is at fault, or a known failure is gone
        (XPASS: its expectation must go too)."""
        return self.value.startswith("FAIL_") or self is Verdict.XPASS

    @property
    def is_error(self) -> bool:
        """An error of the infrastructure or of hil, not of the model."""
        return self.value.startswith("ERROR_")

    @property
    def retried(self) -> bool:
        """Only infrastructure errors are retried (on another board when there is one)."""
        return self is Verdict.ERROR_INFRA

    @property
    def junit_element(self) -> str | None:
        """`failure`, `error`, `skipped`, or None for a pass."""
        if self.is_failure:
            return "failure"
        if self.is_error:
            return "error"
        if self in (Verdict.SKIP, Verdict.XFAIL):
            return "skipped"
        return None


EXPECTABLE = tuple(v for v in Verdict if v.value.startswith("FAIL_"))
"""Verdicts a case may declare as its known failure (`expect: {verdict: ...}`)."""


EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INFRA = 2
EXIT_USAGE = 3
EXIT_INTERRUPTED = 130


def exit_code(verdicts: Iterable[Verdict]) -> int:
    """0 all passed (SKIP and XFAIL count as passed), 1 any test failed (XPASS included),
    2 infrastructure/internal errors and no failure."""
    found = list(verdicts)
    if any(v.is_failure for v in found):
        return EXIT_FAILED
    if any(v.is_error for v in found):
        return EXIT_INFRA
    return EXIT_OK


@dataclass(frozen=True)
class Tolerance:
    """How close a board output must be to the host reference (elementwise
    |out - ref| <= atol + rtol * |ref|, and SQNR >= min_sqnr_db when set)."""

    atol: float = 1e-4
    """Absolute tolerance."""
    rtol: float = 1e-4
    """Relative tolerance."""
    min_sqnr_db: float | None = None
    """Minimum signal-to-quantization-noise ratio in dB, if any."""


@dataclass(frozen=True)
class OutputComparison:
    """Error statistics of one output tensor."""

    index: int
    shape: tuple[int, ...]
    dtype: str
    max_abs: float
    max_rel: float
    mae: float
    sqnr_db: float
    ok: bool
    reason: str
    """Empty when ok; otherwise one line naming the output, the error and the tolerance."""


_TINY = np.finfo(np.float64).tiny


def sqnr_db(reference: np.ndarray, actual: np.ndarray) -> float:
    """10*log10(signal power / noise power); +inf for identical outputs."""
    ref = reference.astype(np.float64, copy=False).ravel()
    noise = ref - actual.astype(np.float64, copy=False).ravel()
    noise_power = float(np.mean(noise * noise)) if noise.size else 0.0
    signal_power = float(np.mean(ref * ref)) if ref.size else 0.0
    if noise_power == 0.0:
        return math.inf
    if signal_power == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal_power / noise_power)


def compare_output(
    index: int, reference: np.ndarray, actual: np.ndarray, tolerance: Tolerance
) -> OutputComparison:
    """Compare one board output with its host reference."""
    shape = tuple(int(d) for d in reference.shape)
    dtype = str(reference.dtype)
    if actual.shape != reference.shape or actual.dtype != reference.dtype:
        return OutputComparison(
            index, shape, dtype, math.inf, math.inf, math.inf, -math.inf, False,
            f"output {index}: got {actual.dtype}{list(actual.shape)}, "
            f"expected {reference.dtype}{list(reference.shape)}",
        )
    ref = reference.astype(np.float64)
    act = actual.astype(np.float64)
    if np.isfinite(ref).all() and np.isfinite(act).all():  # the common case, in fewer passes
        diff = np.abs(ref - act)
        magnitude = np.abs(ref)
        finite_ref, finite_act = ref, act
    else:
        finite = np.isfinite(ref) & np.isfinite(act)
        same_nonfinite = (~np.isfinite(ref)) & (ref == act)
        nan_both = np.isnan(ref) & np.isnan(act)
        diff = np.where(finite, np.abs(ref - act), np.where(same_nonfinite | nan_both, 0.0, np.inf))
        finite_ref, finite_act = np.where(finite, ref, 0.0), np.where(finite, act, 0.0)
        magnitude = np.abs(finite_ref)
    max_abs = float(diff.max()) if diff.size else 0.0
    rel = diff / np.maximum(magnitude if finite_ref is ref else np.abs(ref), _TINY)
    max_rel = float(rel.max()) if rel.size else 0.0
    mae = float(diff.mean()) if diff.size else 0.0
    sqnr = sqnr_db(finite_ref, finite_act)
    allowed = tolerance.atol + tolerance.rtol * magnitude
    bad = diff > allowed
    reason = ""
    if bad.any():
        worst = int(np.argmax(np.where(bad, diff - allowed, -np.inf)))
        position = list(np.unravel_index(worst, reference.shape)) if reference.ndim else []
        reason = (
            f"output {index}: max abs error {max_abs:.6g} exceeds tolerance "
            f"(atol {tolerance.atol:g}, rtol {tolerance.rtol:g}); "
            f"{int(bad.sum())}/{bad.size} elements out, worst at {[int(p) for p in position]}"
        )
    elif tolerance.min_sqnr_db is not None and sqnr < tolerance.min_sqnr_db:
        reason = (
            f"output {index}: SQNR {sqnr:.2f} dB below the minimum "
            f"{tolerance.min_sqnr_db:g} dB (max abs error {max_abs:.6g})"
        )
    return OutputComparison(
        index, shape, dtype, max_abs, max_rel, mae, sqnr, not reason, reason
    )


def compare_outputs(
    references: Sequence[np.ndarray], actuals: Sequence[np.ndarray], tolerance: Tolerance
) -> list[OutputComparison]:
    """Compare every output; a missing output is reported as such."""
    if len(actuals) != len(references):
        raise ValueError(f"expected {len(references)} outputs, the board returned {len(actuals)}")
    return [
        compare_output(i, ref, act, tolerance)
        for i, (ref, act) in enumerate(zip(references, actuals, strict=True))
    ]
