"""Lowering: case → export → (quantize) → lower for a flow → `.pte` + inputs + host references.

One function per stage (hil/lower/build.py), each taking the previous stage's product; any
stage failure becomes a `LoweringFailed` carrying the verdict that names the stage. This
package's own module imports no torch: what only reads artifacts (the cache, a run whose
cases are all cached) does not pay for it.
"""

from __future__ import annotations

from hil.verdict import Verdict

FLOWS = ("enn", "xnnpack", "portable")
"""Every lowering flow hil knows (hil/lower/flows.py lowers for each)."""


class LoweringFailed(Exception):
    """A stage failed; `verdict` names it (FAIL_EXPORT, FAIL_QUANTIZE, FAIL_LOWER), or the
    case is not to be lowered at all (SKIP)."""

    def __init__(self, verdict: Verdict, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.verdict = verdict
        self.message = message
        self.detail = detail
