"""`hil compare`: regressions between a baseline run and a current run, case by case.

- Latency: the change is the case's `p50` (else `avg`, records without samples) from base to
  new. It is a regression only when it is larger than the threshold (relative, default 10%)
  AND larger than `--min-delta-ms` (absolute) AND significant given both runs' samples: a
  two-sided Mann-Whitney U test (rank-sum; exact for small samples without ties, else the
  normal approximation) with p < ALPHA. It compares whole sample sets, so one slow sample
  or one lucky run does not decide. When either run marks the case `unstable` (its CV above
  the limit, a board that stayed hot), the samples themselves are not trusted: the case is
  a regression only if, on top of that, the new run's p10 is above the base's p90 (the
  bands do not overlap); otherwise its status is `unstable`, not a guess. With fewer than
  MIN_SAMPLES samples on a side nothing can be tested: `too few samples`
  (run with `--latency stable`). `faster` is the same test the other way.
- Accuracy: a verdict that went from a pass to a failure; or, per output, a max abs error that
  grew by more than the threshold and by more than a tenth of the output's `atol`, or an SQNR
  that dropped by more than SQNR_DROP_DB.
- Warnings (not regressions): a pass that became PASS_UNDELEGATED or a known failure
  (XFAIL: its expectation says why), a case that errored (infrastructure: nothing to
  compare), cases missing from either run. XPASS counts as passed numbers here: a known
  failure that went away is "fixed".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hil.errors import UsageError
from hil.latency import mann_whitney_p, percentile
from hil.report.results import case_key
from hil.report.stats import is_unstable, latency_of, samples_of, unstable_reasons
from hil.report.summary import cell
from hil.verdict import Verdict

DEFAULT_THRESHOLD = 0.10
"""Relative latency (and max abs error) growth that counts as a regression."""
ATOL_FRACTION = 0.1
"""A max abs error must also grow by more than this share of the output's atol."""
SQNR_DROP_DB = 3.0
"""An SQNR drop (dB) beyond this is an accuracy regression (3 dB: twice the noise power)."""
DEFAULT_MIN_DELTA_MS = 0.02
"""A latency change smaller than this (ms) is never a regression: below what one runner
invocation on a board resolves (scheduling and timer jitter are tens of microseconds)."""
ALPHA = 0.01
"""Significance level of the Mann-Whitney test. 1%, not 5%: a suite compares hundreds of
cases, and at 5% two identical runs would show a significant difference in one case in 20."""
MIN_SAMPLES = 3
"""Samples a run needs for the test (with 3 against 3 the smallest exact p is 0.1; the
`stable` profile's 30 give p-values far below ALPHA for a real shift)."""

LATENCY_REGRESSION = "latency regression"
ACCURACY_REGRESSION = "accuracy regression"
KNOWN_FAILURE = "known failure"
UNSTABLE = "unstable"
TOO_FEW = "too few samples"
STATUS_ORDER = (
    ACCURACY_REGRESSION,
    LATENCY_REGRESSION,
    UNSTABLE,
    TOO_FEW,
    "undelegated",
    KNOWN_FAILURE,
    "error",
    "missing",
    "new",
    "fixed",
    "faster",
    "ok",
)
"""Row statuses, the ones to read first first."""


def parse_min_delta(text: str) -> float:
    """`0.05` or `0.05ms` → 0.05 (ms); anything else is a UsageError naming `--min-delta-ms`."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*(?:ms)?\s*", text)
    if not match:
        raise UsageError(f"--min-delta-ms: expected milliseconds like 0.05, got {text!r}")
    return float(match.group(1))


def parse_threshold(text: str) -> float:
    """`10%` or `10` → 0.10; anything else is a UsageError naming `--threshold`."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*%?\s*", text)
    if not match:
        raise UsageError(f"--threshold: expected a percentage like 10% , got {text!r}")
    value = float(match.group(1)) / 100.0
    if value <= 0:
        raise UsageError(f"--threshold: {text!r} must be above 0%")
    return value


@dataclass
class Row:
    """The comparison of one case (by `suite.precision.id`)."""

    key: str
    board: str
    verdicts: tuple[str | None, str | None]
    metric: str | None = None
    latency_ms: tuple[float | None, float | None] = (None, None)
    max_abs: tuple[float | None, float | None] = (None, None)
    sqnr_db: tuple[float | None, float | None] = (None, None)
    statuses: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    p_value: float | None = None
    """Mann-Whitney p-value of the two runs' samples, when both had enough."""

    @property
    def change(self) -> float | None:
        """Relative latency change (0.2 = 20% slower), None when not measured in both."""
        base, new = self.latency_ms
        if base is None or new is None or base <= 0:
            return None
        return new / base - 1.0

    @property
    def regression(self) -> bool:
        """A latency or accuracy regression."""
        return bool({LATENCY_REGRESSION, ACCURACY_REGRESSION} & set(self.statuses))

    @property
    def status(self) -> str:
        """The statuses, most important first, or `ok`."""
        return ", ".join(sorted(self.statuses, key=STATUS_ORDER.index)) or "ok"


@dataclass
class Comparison:
    """All rows of a comparison and what it was compared with."""

    base: dict[str, Any]
    new: dict[str, Any]
    threshold: float
    rows: list[Row]
    notes: list[str]
    min_delta_ms: float = DEFAULT_MIN_DELTA_MS

    @property
    def regressions(self) -> list[Row]:
        """Rows with a latency or an accuracy regression."""
        return [row for row in self.rows if row.regression]

    @property
    def missing(self) -> list[Row]:
        """Rows of base cases the new run does not have (not run, not compared)."""
        return [row for row in self.rows if "missing" in row.statuses]

    def failed(self, allow_missing: bool = False) -> bool:
        """What the exit code says: a regression, or a case of the base missing from the new
        run unless that is allowed."""
        return bool(self.regressions or (self.missing and not allow_missing))

    def heading(self, allow_missing: bool = False) -> str:
        """`## hil compare: ...` naming what makes the comparison fail, or `no regression`
        only when nothing does."""
        regressions, missing = len(self.regressions), len(self.missing)
        parts = [f"{regressions} regression(s)"] if regressions else []
        if missing and not allow_missing:
            parts.append(f"{missing} case(s) of the base missing from the new run")
        if parts:
            return "## hil compare: " + ", ".join(parts)
        allowed = f" ({missing} case(s) missing, allowed)" if missing else ""
        return f"## hil compare: no regression{allowed}"


def _worst(case: dict[str, Any], key: str, pick: Any) -> float | None:
    values = [o[key] for o in case.get("outputs") or [] if _number(o.get(key))]
    return pick(values) if values else None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _accuracy(base: dict[str, Any], new: dict[str, Any], threshold: float) -> list[str]:
    """Outputs whose error grew beyond the tolerances, as notes."""
    notes = []
    base_outputs = {o.get("index"): o for o in base.get("outputs") or []}
    for output in new.get("outputs") or []:
        before = base_outputs.get(output.get("index"))
        if before is None:
            continue
        index = output.get("index")
        old, now = before.get("max_abs"), output.get("max_abs")
        if _number(old) and _number(now):
            atol = output.get("atol") if _number(output.get("atol")) else 0.0
            if now - old > max(threshold * old, ATOL_FRACTION * atol):
                notes.append(f"output {index}: max abs error {old:.4g} → {now:.4g}")
        old, now = before.get("sqnr_db"), output.get("sqnr_db")
        if _number(old) and _number(now) and old - now > SQNR_DROP_DB:
            notes.append(f"output {index}: SQNR {old:.1f} → {now:.1f} dB")
    return notes


def _compare_case(
    key: str, base: dict[str, Any] | None, new: dict[str, Any] | None, threshold: float,
    min_delta_ms: float,
) -> Row:
    boards = [c.get("board") or "-" for c in (base, new) if c is not None]
    row = Row(
        key=key,
        board=boards[0] if len(set(boards)) == 1 else " → ".join(boards),
        verdicts=(base["verdict"] if base else None, new["verdict"] if new else None),
    )
    if base is None:
        row.statuses.append("new")
        return row
    if new is None:
        row.statuses.append("missing")
        return row
    if len(set(boards)) > 1:
        row.notes.append("ran on another board")
    before, after = Verdict(base["verdict"]), Verdict(new["verdict"])
    row.max_abs = (_worst(base, "max_abs", max), _worst(new, "max_abs", max))
    row.sqnr_db = (_worst(base, "sqnr_db", min), _worst(new, "sqnr_db", min))
    if after.is_error or before.is_error:
        row.statuses.append("error")
    ran_before = before.passed or before is Verdict.XPASS  # XPASS: the numbers passed
    ran_now = after.passed or after is Verdict.XPASS
    if ran_before and after.is_failure and after is not Verdict.XPASS:
        row.statuses.append(ACCURACY_REGRESSION)
        row.notes.append(f"{before.value} → {after.value}")
    elif ran_before and after is Verdict.XFAIL:
        row.statuses.append(KNOWN_FAILURE)
        row.notes.append(f"{before.value} → XFAIL")
    elif (before.is_failure or before is Verdict.XFAIL) and ran_now:
        row.statuses.append("fixed")
    if before is Verdict.PASS and after is Verdict.PASS_UNDELEGATED:
        row.statuses.append("undelegated")
    accuracy = _accuracy(base, new, threshold)
    if accuracy:
        row.notes += accuracy
        if ACCURACY_REGRESSION not in row.statuses:
            row.statuses.append(ACCURACY_REGRESSION)
    _latency(row, base, new, threshold, min_delta_ms)
    return row


def _band(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return percentile(ordered, 10), percentile(ordered, 90)


def _latency(row: Row, base: dict[str, Any], new: dict[str, Any], threshold: float,
             min_delta_ms: float) -> None:
    """The latency status of a row (see the module docstring)."""
    for metric in ("p50", "avg"):
        old, now = latency_of(base, metric), latency_of(new, metric)
        if old is not None and now is not None:
            row.metric, row.latency_ms = metric, (old, now)
            break
    change = row.change
    if change is None:
        return
    old, now = row.latency_ms
    assert old is not None and now is not None
    slower = change > threshold and now - old > min_delta_ms
    faster = change < -threshold and old - now > min_delta_ms
    if not (slower or faster):
        return
    before, after = samples_of(base), samples_of(new)
    if min(len(before), len(after)) < MIN_SAMPLES:
        row.statuses.append(TOO_FEW)
        row.notes.append(f"{change * 100:+.1f}% on {len(before)} vs {len(after)} sample(s): "
                         "not testable (--latency stable)")
        return
    row.p_value = mann_whitney_p(before, after)
    significant = row.p_value < ALPHA
    noisy = [name for name, case in (("base", base), ("new", new)) if is_unstable(case)]
    if not significant:
        row.notes.append(f"p = {row.p_value:.2g}: not significant")
        if noisy:
            row.statuses.append(UNSTABLE)
            row.notes += [f"{name} unstable: {'; '.join(unstable_reasons(c)) or '?'}"
                          for name, c in (("base", base), ("new", new)) if name in noisy]
        return
    if noisy:
        (low_before, high_before), (low_after, high_after) = _band(before), _band(after)
        apart = low_after > high_before if slower else high_after < low_before
        if not apart:
            row.statuses.append(UNSTABLE)
            row.notes.append(f"p = {row.p_value:.2g} but {' and '.join(noisy)} unstable and the "
                             "p10-p90 bands overlap: not called")
            return
        row.notes.append(f"{' and '.join(noisy)} unstable, but the p10-p90 bands do not overlap")
    row.notes.insert(0, f"p = {row.p_value:.2g}")
    row.statuses.append(LATENCY_REGRESSION if slower else "faster")


def _run_notes(base: dict[str, Any], new: dict[str, Any]) -> list[str]:
    notes = []
    for name in ("chipset", "flow", "virtual"):
        if base["run"].get(name) != new["run"].get(name):
            notes.append(
                f"run.{name} differs ({base['run'].get(name)} → {new['run'].get(name)}): "
                "latencies may not be comparable"
            )
    if base["run"].get("virtual") or new["run"].get("virtual"):
        notes.append("VIRTUAL board(s): latencies are host-runtime numbers, not the NPU's")
    return notes


def compare_results(
    base: dict[str, Any],
    new: dict[str, Any],
    threshold: float = DEFAULT_THRESHOLD,
    min_delta_ms: float = DEFAULT_MIN_DELTA_MS,
) -> Comparison:
    """Compare two loaded results documents case by case (by `suite.precision.id`)."""
    base_cases = {case_key(c): c for c in base.get("cases") or []}
    new_cases = {case_key(c): c for c in new.get("cases") or []}
    keys = list(dict.fromkeys([*base_cases, *new_cases]))
    rows = [_compare_case(k, base_cases.get(k), new_cases.get(k), threshold, min_delta_ms)
            for k in keys]
    rows.sort(key=lambda r: (min(STATUS_ORDER.index(s) for s in r.statuses or ["ok"]), r.key))
    return Comparison(base, new, threshold, rows, _run_notes(base, new), min_delta_ms)


def _pair(values: tuple[Any, Any], spec: str, collapse: bool = True) -> str:
    old, now = (format(v, spec) if _number(v) else "-" for v in values)
    return old if old == now and collapse else f"{old} → {now}"


def _describe(label: str, path: Path, document: dict[str, Any]) -> str:
    run = document["run"]
    return (
        f"{label}: `{cell(path)}` (run {cell(run.get('id'))}, {cell(run.get('started'))}, "
        f"flow {cell(run.get('flow'))}, chipset {cell(run.get('chipset'))})"
    )


def render_markdown(comparison: Comparison, base_path: Path, new_path: Path,
                    allow_missing: bool = False) -> str:
    """The comparison as Markdown: a heading that names what fails it (`Comparison.heading`),
    the inputs, one table row per case (regressions first) and a counts line."""
    rows = comparison.rows
    pct = f"{comparison.threshold * 100:g}%"
    lines = [
        comparison.heading(allow_missing),
        "",
        _describe("base", base_path, comparison.base) + "  ",
        _describe("new", new_path, comparison.new),
        "",
        f"Thresholds: latency +{pct} (p50, else avg) and +{comparison.min_delta_ms:g} ms, "
        f"significant by a two-sided Mann-Whitney U test on both runs' samples (p < {ALPHA:g}; "
        f"p10 above the base's p90 when a run is unstable); max abs error +{pct} and more than "
        f"{ATOL_FRACTION:g}·atol; SQNR −{SQNR_DROP_DB:g} dB; a pass that became a failure.",
        "",
        *(f"> {cell(note)}" for note in comparison.notes),
        *([""] if comparison.notes else []),
        "| case | board | verdict | latency ms | change | max abs err | SQNR dB | status |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        verdict = " → ".join(dict.fromkeys(v or "-" for v in row.verdicts))
        latency = _pair(row.latency_ms, ".3f", collapse=False) + (f" ({row.metric})" if row.metric else "")
        change = f"{row.change * 100:+.1f}%" if row.change is not None else "-"
        status = cell(row.status + (": " + "; ".join(row.notes) if row.notes else ""), 600)
        if row.regression:  # hil's own emphasis, around the escaped text
            status = status.replace(cell(row.status), f"**{cell(row.status)}**", 1)
        lines.append(
            f"| `{cell(row.key)}` | {cell(row.board)} | {cell(verdict)} | {latency} | {change} | "
            f"{_pair(row.max_abs, '.3g')} | {_pair(row.sqnr_db, '.1f')} | {status} |"
        )
    counts = {status: sum(status in r.statuses for r in rows) for status in STATUS_ORDER[:-1]}
    counts["ok"] = sum(not r.statuses for r in rows)
    lines += ["", f"{len(rows)} case(s): " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)]
    return "\n".join(lines) + "\n"
