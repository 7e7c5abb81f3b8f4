"""Known failures and skips: what a case declares about its own outcome, and the verdict a
record gets from it.

A case (built-in or in a manifest) may carry

- `expect: {verdict: FAIL_MISMATCH, reason: "...", link: "..."}` — it still runs; ending
  with that verdict is XFAIL (JUnit `<skipped>` with the reason, exit code unaffected),
  passing is XPASS (a failure: the known failure is gone, remove the expectation), any
  other outcome keeps its own verdict (a different failure is not the known one);
- `skip: "reason"` — it is not lowered nor run: SKIP with the reason.

`settle` is applied to every finished case record (`hil.run.records.case_record`); the verdicts'
meaning for JUnit, the exit code and retries is in `hil.verdict`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hil.fields import Field, names
from hil.verdict import EXPECTABLE, Verdict

XPASS_MESSAGE = "unexpectedly passed: remove the expectation"


EXPECT_FIELDS = (
    Field("verdict", "a FAIL_* verdict", "the verdict the case is known to end with",
          required=True),
    Field("reason", "string", "one line: why it fails", required=True),
    Field("link", "string", "one line: an issue URL or a path", default='""'),
)
"""A manifest case's `expect:` mapping."""


@dataclass(frozen=True)
class Expectation:
    """A case's known failure."""

    verdict: Verdict
    """The failure the case is known to end in (one of EXPECTABLE)."""
    reason: str
    """Why, in one line (shown in JUnit's `<skipped>` and the reports)."""
    link: str = ""
    """Where it is tracked or explained (an issue, a repro script), if anywhere."""

    def describe(self) -> str:
        """`reason (link)`, or the reason alone."""
        return f"{self.reason} ({self.link})" if self.link else self.reason

    def record(self) -> dict[str, str]:
        """The `expected` entry of a results record."""
        return {"verdict": self.verdict.value, "reason": self.reason, "link": self.link}


def parse_expectation(raw: Any) -> Expectation:
    """An Expectation from a manifest's `expect` mapping; ValueError naming the key."""
    if not isinstance(raw, Mapping):
        raise ValueError("expected a mapping {verdict, reason, link}")
    unknown = set(raw) - names(EXPECT_FIELDS)
    if unknown:
        raise ValueError(f"{sorted(unknown)[0]}: unknown key (allowed: verdict, reason, link)")
    verdicts = [v.value for v in EXPECTABLE]
    if raw.get("verdict") not in verdicts:
        raise ValueError(f"verdict: expected one of {', '.join(verdicts)}, got {raw.get('verdict')!r}")
    reason, link = raw.get("reason"), raw.get("link", "")
    if not isinstance(reason, str) or not reason.strip() or "\n" in reason:
        raise ValueError("reason: required, one line of text saying why the case fails")
    if not isinstance(link, str) or "\n" in link:
        raise ValueError(f"link: expected one line of text (a URL or a path), got {link!r}")
    return Expectation(Verdict(raw["verdict"]), reason.strip(), link.strip())


def parse_skip(raw: Any) -> str:
    """A manifest's `skip` reason; ValueError unless it is one non-empty line."""
    if not isinstance(raw, str) or not raw.strip() or "\n" in raw:
        raise ValueError("expected one line of text saying why the case is skipped")
    return raw.strip()


def settle(expect: Expectation | None, record: dict[str, Any]) -> dict[str, Any]:
    """`record` with its verdict settled against `expect`: the known failure becomes XFAIL,
    a pass becomes XPASS, anything else is left as it is. The record keeps what actually
    happened (`actual_verdict`, the original message after the expectation's)."""
    if expect is None:
        return record
    verdict = Verdict(record["verdict"])
    record["expected"] = expect.record()
    message = str(record.get("message") or "")
    if verdict is expect.verdict:
        record["actual_verdict"] = verdict.value
        record["verdict"] = Verdict.XFAIL.value
        record["message"] = f"known failure ({verdict.value}): {expect.describe()}" + (
            f"; got: {message}" if message else "")
    elif verdict.passed:
        record["actual_verdict"] = verdict.value
        record["verdict"] = Verdict.XPASS.value
        record["message"] = (f"{XPASS_MESSAGE} (expected {expect.verdict.value}: "
                             f"{expect.describe()})")
    elif verdict.is_failure:
        record["message"] = (f"{message} (not the known failure {expect.verdict.value}: "
                             f"{expect.reason})")
    return record
