"""The step summary: a Markdown rendering of a results document for `$GITHUB_STEP_SUMMARY`
(totals, a table per suite and board, the failures with their numbers, the slowest cases,
latencies and the command that reproduces the run).

GitHub rejects a step summary over 1 MiB, so the rendering has a byte budget: the fixed parts
(header, totals, the reproduce command) always fit, then the tables get rows in priority order
(failures, suites, slowest, latency) and each says how many rows it had to leave out.

The cases are read once, one at a time (`_Seen`): what is kept of them is bounded by the
budget (rows that could fit, hil/report/bounded.py), whatever the run's size.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hil.report.bounded import Best
from hil.report.localization import probe_rows
from hil.report.results import (
    INCOMPLETE_STATUSES,
    case_key,
    clean_text,
    describe_board,
    incomplete_line,
    one_line,
    severity_rank,
    worst_abs_error,
)
from hil.report.stats import SUMMARY_COLUMNS, summary_cells
from hil.verdict import Verdict

SUMMARY_LIMIT_BYTES = 1024 * 1024 - 1024
"""Budget of one step summary: GitHub's 1 MiB per step, less a margin."""
CELL_CHARS = 300
"""Longest table cell (messages); longer ones end in an ellipsis."""
SLOWEST = 10
"""Rows of the slowest-cases table."""
TIMING_KEYS = ("lower", "push", "exec", "pull")


_MARKDOWN = re.compile(r"([\\`*\[\]~])")
"""What could make a board's text Markdown in a cell: a link or image (`[..](..)`, `![..](..)`),
code, emphasis, strike-through; backslash-escaped (CommonMark: any ASCII punctuation)."""
_BARE_LINK = re.compile(r"(?i)\b(?:https?|ftp)://|\bwww\.")
"""The starts of the bare URLs GitHub links by itself (autolinks, GFM's extension)."""


def cell(value: Any, chars: int = CELL_CHARS) -> str:
    """`value` as one Markdown table cell: one line, no control characters, no HTML, no
    Markdown (no link, image, code or emphasis a board could write; a bare URL's `://` or
    `www.` escaped so it is not linked either), `|` escaped, at most `chars` characters."""
    text = one_line(clean_text(str(value)))
    if len(text) > chars:
        text = text[: chars - 1] + "…"
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MARKDOWN.sub(r"\\\1", text)
    text = _BARE_LINK.sub(lambda match: match.group(0).replace("/", "\\/").replace(".", "\\."), text)
    return text.replace("|", "\\|")


_LINK = re.compile(r"https://[A-Za-z0-9.-]+(?::\d+)?(?:/[A-Za-z0-9._~%/+=,;:@!$'()*-]*)?(?:[?#][A-Za-z0-9._~%/+=&,;:@!$'()*?#-]*)?")


def link_cell(value: Any) -> str:
    """A link a known failure's expectation names (configuration, not a board's text): an
    https URL of plain characters becomes an autolink (`<URL>`), anything else a `cell`."""
    text = str(value or "").strip()
    return f"<{text}>" if _LINK.fullmatch(text) else cell(text or "-")


def _num(value: Any, spec: str = ".3f") -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    return format(value, spec)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table_head(columns: list[str], right: set[str] = frozenset()) -> list[str]:
    return [_row(columns), _row(["---:" if c in right else "---" for c in columns])]


@dataclass
class _Section:
    """A heading and a table whose rows may be cut to fit the budget."""

    head: list[str]
    rows: list[str]
    what: str
    """What the rows are, for the `N more <what> not shown` line."""
    foot: list[str] = field(default_factory=list)
    kept: int = 0
    total: int | None = None
    """How many rows the section has (`rows` may hold only those that could fit)."""

    def render(self) -> list[str]:
        lines = [*self.head, *self.rows[: self.kept]]
        left_out = (len(self.rows) if self.total is None else self.total) - self.kept
        if left_out:
            lines.append("")
            lines.append(
                f"*{left_out} more {self.what} not shown (step summary size limit); "
                "see results.json and the JUnit report.*"
            )
        return [*lines, *self.foot, ""]


def _size(lines: list[str]) -> int:
    return sum(len(line.encode("utf-8")) + 1 for line in lines)


def _header(results: dict[str, Any], seen: _Seen) -> list[str]:
    run = results.get("run") or {}
    verdicts = {Verdict(name): count for name, count in seen.verdicts.items()}
    passed = sum(count for v, count in verdicts.items() if v.passed)
    failed = sum(count for v, count in verdicts.items() if v.is_failure)
    errors = sum(count for v, count in verdicts.items() if v.is_error)
    skipped = verdicts.get(Verdict.SKIP, 0)
    xfailed = verdicts.get(Verdict.XFAIL, 0)
    undelegated = verdicts.get(Verdict.PASS_UNDELEGATED, 0)
    outcome = "failed" if failed else "infrastructure errors" if errors else "passed"
    if not seen.count:
        outcome = "no cases"
    status = run.get("status")
    if outcome == "passed" and status in INCOMPLETE_STATUSES:
        outcome = "incomplete"
    lines = [
        f"## exynos-hil: {outcome}" + (f" ({cell(status)})" if status != "complete" else ""),
        "",
        f"**{passed} passed, {failed} failed, {errors} errors, {skipped} skipped, "
        f"{xfailed} xfail** "
        f"of {seen.count} case(s)"
        + (f" — {undelegated} passed with ops undelegated (PASS_UNDELEGATED)" if undelegated else ""),
        "",
    ]
    incomplete = incomplete_line(results)
    if incomplete:
        lines += [f"> **Incomplete**: {cell(incomplete, 2000)}", ""]
    if run.get("virtual"):
        lines += [
            "> **VIRTUAL** board(s): ExecuTorch host runtime, no NPU. This proves the pipeline, "
            "not the NPU; latencies are host numbers.",
            "",
        ]
    boards = ", ".join(cell(describe_board(run, b.get("name"))) for b in run.get("boards") or [])
    facts = [
        ("run", run.get("id")),
        ("flow", run.get("flow")),
        ("because", run.get("flow_reason")),
        ("chipset", run.get("chipset")),
        ("shard", run.get("shard")),
        ("boards", boards or None),
        ("SDK", run.get("sdk") or "none"),
        ("hil", run.get("hil")),
        ("torch", run.get("torch")),
        ("executorch", run.get("executorch")),
        ("git", run.get("git_sha")),
        ("started", run.get("started")),
        ("finished", run.get("finished")),
    ]
    lines += [" · ".join(f"{name} {cell(value)}" for name, value in facts if value), ""]
    return lines


def _suites(seen: _Seen) -> _Section:
    columns = ["suite", "board", "cases", "passed", "failed", "errors", "skipped", "xfail",
               "time s"]
    rows = []
    for (suite, board), counts in seen.suites.items():
        verdicts = {Verdict(name): count for name, count in counts.items()}
        rows.append(_row([
            cell(suite),
            cell(board),
            str(sum(verdicts.values())),
            str(sum(count for v, count in verdicts.items() if v.passed)),
            str(sum(count for v, count in verdicts.items() if v.is_failure)),
            str(sum(count for v, count in verdicts.items() if v.is_error)),
            str(verdicts.get(Verdict.SKIP, 0)),
            str(verdicts.get(Verdict.XFAIL, 0)),
            _num(seen.seconds[(suite, board)], ".1f"),
        ]))
    head = ["### Suites", "", *_table_head(columns, set(columns[2:]))]
    return _Section(head, rows, "suite rows")


def _boards(run: dict[str, Any], per_board: Counter[str | None]) -> _Section | None:
    """One row per board of the run: usable, lost (quarantined at the end), left out or not
    usable at the start; its cases, recoveries and why it is out."""
    boards = [b for b in run.get("boards") or [] if isinstance(b, dict)]
    if not boards:
        return None
    columns = ["board", "state", "cases", "recoveries", "why"]
    rows = []
    for board in boards:
        name = board.get("name") or "-"
        recoveries = [r for r in board.get("recovery") or [] if isinstance(r, dict)]
        if board.get("left_out"):
            state = "left out"
        elif board.get("error") and board.get("quarantined"):
            state = "quarantined (flash failed)"
        elif board.get("error"):
            state = "not usable"
        elif board.get("quarantined"):
            state = "lost (quarantined)"
        else:
            state = "usable"
        why = board.get("error") or board.get("quarantined") or ""
        if recoveries and state != "usable":
            last = recoveries[-1]
            why += f" (last recovery step: {last.get('step')}: {last.get('message')})"
        steps = ", ".join(f"{r.get('step')} {'ok' if r.get('recovered') else 'failed'}" for r in recoveries)
        rows.append(_row([cell(name), state, str(per_board[name]),
                          cell(steps or "-"), cell(why or "-", 600)]))
    usable = sum(not b.get("error") for b in boards)
    head = ["### Boards", "", f"{usable} of {len(boards)} usable at the start "
            f"(run.usable_boards: {run.get('usable_boards')}).", "", *_builds(boards),
            *_capacity_line(run),
            *_table_head(columns, {"cases"})]
    return _Section(head, rows, "board rows")


def _builds(boards: list[dict[str, Any]]) -> list[str]:
    """A line per board whose build was not the expected one at the start of the run: what
    it ran, what it should have, and what provisioning made of it."""
    lines = []
    for board in boards:
        build = board.get("build") or {}
        if not build.get("differed"):
            continue
        flashes = board.get("flashes") or []
        if not flashes:
            outcome = "not flashed (run without --provision)"
        elif flashes[0].get("error"):
            outcome = f"flash failed: {flashes[0]['error']}"
        else:
            outcome = f"flashed: now {build.get('after')}"
        lines.append(f"- build differed on **{cell(board.get('name') or '-')}**: "
                     f"{build.get('property')} was `{cell(str(build.get('before')))}`, expected "
                     f"`{cell(str(build.get('expected')))}`; {cell(outcome, 300)}")
    return [*lines, ""] if lines else []


def _capacity_line(run: dict[str, Any]) -> list[str]:
    """`run.capacity_lost` as one line and a blank one (none when the run has no such field)."""
    lost = run.get("capacity_lost")
    if not isinstance(lost, dict) or not isinstance(lost.get("board_seconds"), (int, float)):
        return []
    per_board = ", ".join(f"{cell(b.get('name'))} {b['board_seconds_out']:.0f} s"
                          for b in run.get("boards") or []
                          if isinstance(b, dict) and isinstance(b.get("board_seconds_out"), (int, float))
                          and b["board_seconds_out"] > 0)
    out, fraction = lost.get("board_seconds_out"), lost.get("fraction")  # a hand-edited file
    out = out if isinstance(out, (int, float)) else 0  # may hold anything: no traceback
    fraction = fraction if isinstance(fraction, (int, float)) else 0
    return [f"Capacity lost to recovery: {out:.0f} of "
            f"{lost['board_seconds']:.0f} board-seconds out of the run "
            f"({100 * fraction:.1f} %)"
            + (f" — {per_board}." if per_board else "."), ""]


def _tolerance(case: dict[str, Any]) -> str:
    outputs = case.get("outputs") or []
    if not outputs:
        return "-"
    first = outputs[0]
    return f"atol {_num(first.get('atol'), 'g')}, rtol {_num(first.get('rtol'), 'g')}"


def _min_sqnr(case: dict[str, Any]) -> float | None:
    values = [o["sqnr_db"] for o in case.get("outputs") or [] if isinstance(o.get("sqnr_db"), (int, float))]
    return min(values, default=None)


def _failure_row(c: dict[str, Any]) -> str:
    return _row(
        [
            f"`{cell(case_key(c))}`",
            cell(c.get("board") or "-"),
            cell(c["verdict"]),
            cell(c.get("message") or ""),
            _num(worst_abs_error(c), ".4g"),
            _tolerance(c),
            _num(_min_sqnr(c), ".1f"),
            cell(f"{c.get('file')}:{c.get('line')}" if c.get("file") else "-"),
        ]
    )


def _failures(bad: Best[str]) -> _Section | None:
    if not bad.total:
        return None
    columns = ["case", "board", "verdict", "message", "max abs err", "tolerance", "SQNR dB", "file"]
    head = [
        f"### Failures and errors ({bad.total}, worst first)",
        "",
        *_table_head(columns, {"max abs err", "SQNR dB"}),
    ]
    return _Section(head, bad.items(), "failures/errors", total=bad.total)


def _known_row(c: dict[str, Any]) -> str:
    expected = c.get("expected") or {}
    return _row([f"`{cell(case_key(c))}`", cell(expected.get("verdict") or "-"),
                 cell(expected.get("reason") or c.get("message") or ""),
                 link_cell(expected.get("link"))])


def _known_failures(known: Best[str]) -> _Section | None:
    if not known.total:
        return None
    columns = ["case", "expected", "reason", "link"]
    head = [f"### Known failures ({known.total}, XFAIL)", "", *_table_head(columns)]
    return _Section(head, known.items(), "known failures", total=known.total)


def _localization(cases: list[dict[str, Any]]) -> _Section | None:
    """Per localized case its finding, then a row per probe (board run)."""
    if not cases:
        return None
    head = ["### Localization (first diverging op)", ""]
    for case in cases:
        block = case["localization"]
        head.append(
            f"- `{cell(case_key(case))}` on {cell(block.get('board') or '-')}: "
            f"**{cell(block.get('message'))}** "
            f"({block.get('board_runs', 0)} board runs, at most {block.get('max_board_runs', '-')}; "
            f"{block.get('nodes', '-')} nodes, {block.get('clean_cut_points', '-')} clean cut points)"
        )
    columns = ["case", "probe", "node", "op", "module", "source", "max abs err", "SQNR dB", "verdict",
               "delegates/delegated/undelegated"]
    rows = [_row([f"`{cell(case_key(case))}`", *(cell(value) for value in row)])
            for case in cases for row in probe_rows(case)]
    head += ["", *_table_head(columns, {"probe", "max abs err", "SQNR dB"})]
    return _Section(head, rows, "probes")


def _total_s(case: dict[str, Any]) -> float:
    timings = (case.get("timings_s") or {}).values()
    return sum(t for t in timings if isinstance(t, (int, float)) and not isinstance(t, bool))


def _slow_row(c: dict[str, Any]) -> str:
    return _row(
        [
            f"`{cell(case_key(c))}`",
            cell(c.get("board") or "-"),
            _num(_total_s(c), ".2f"),
            *(_num((c.get("timings_s") or {}).get(k), ".3f") for k in TIMING_KEYS),
        ]
    )


def _slowest(timed: Best[str]) -> _Section | None:
    rows = timed.items()
    if not rows:
        return None
    columns = ["case", "board", "total s", *(f"{k} s" for k in TIMING_KEYS)]
    head = [f"### Slowest cases (top {len(rows)})", "", *_table_head(columns, set(columns[2:]))]
    return _Section(head, rows, "slow cases")


def _latency_row(c: dict[str, Any]) -> str:
    return _row([f"`{cell(case_key(c))}`", cell(c.get("board") or "-"),
                 *(cell(value) for value in summary_cells(c))])


def _latency(measured: Best[str]) -> _Section | None:
    if not measured.total:
        return None
    columns = ["case", "board", *SUMMARY_COLUMNS]
    head = [
        "<details><summary>Latency (ms), program memory and stability per case</summary>",
        "",
        *_table_head(columns, set(columns[2:-1])),
    ]
    return _Section(head, measured.items(), "latency rows", foot=["", "</details>"], total=measured.total)


def _row_size(row: str) -> int:
    return len(row.encode("utf-8")) + 1


class _Seen:
    """What the summary keeps of the cases, read once: counts per verdict, suite and board,
    the rows of each table that could fit in `limit_bytes` (the worst failures, the first
    known failures and latencies, the slowest cases) and the localized cases."""

    def __init__(self, cases: Iterable[dict[str, Any]], limit_bytes: int) -> None:
        self.count = 0
        self.verdicts: Counter[str] = Counter()
        self.suites: dict[tuple[str, str], Counter[str]] = {}
        self.seconds: dict[tuple[str, str], float] = {}
        self.per_board: Counter[str | None] = Counter()
        self.failures: Best[str] = Best(budget=limit_bytes, size=_row_size)
        self.known: Best[str] = Best(budget=limit_bytes, size=_row_size)
        self.slowest: Best[str] = Best(count=SLOWEST)
        self.latency: Best[str] = Best(budget=limit_bytes, size=_row_size)
        self.localized: list[dict[str, Any]] = []
        for index, case in enumerate(cases):
            self._see(index, case)

    def _see(self, index: int, case: dict[str, Any]) -> None:
        self.count += 1
        verdict = case["verdict"]
        self.verdicts[verdict] += 1
        key = (f"{case['suite']}.{case['precision']}", case.get("board") or "-")
        self.suites.setdefault(key, Counter())[verdict] += 1
        self.seconds[key] = self.seconds.get(key, 0.0) + _total_s(case)
        self.per_board[case.get("board")] += 1
        rank = severity_rank(index, case)
        if rank is not None:
            self.failures.offer(rank, lambda: _failure_row(case))
        if verdict == Verdict.XFAIL.value:
            self.known.offer(index, lambda: _known_row(case))
        if case.get("timings_s"):  # the slowest first, the earlier of equals first
            self.slowest.offer((-_total_s(case), index), lambda: _slow_row(case))
        if case.get("latency_ms"):
            self.latency.offer(index, lambda: _latency_row(case))
        if case.get("localization"):  # what the section shows, not the case's logs and detail
            kept = ("suite", "precision", "id", "localization")
            self.localized.append({key: case.get(key) for key in kept})


def _reproduce(run: dict[str, Any]) -> list[str]:
    command = run.get("command") or []
    if not command:
        return []
    lines = ["### Reproduce", "", "```sh"]
    if run.get("git_sha"):
        lines.append(f"git checkout {one_line(clean_text(str(run['git_sha'])))}")
    lines += [
        one_line(clean_text(shlex.join(str(part) for part in command))),
        "```",
        "",
        "`hil replicate --print` prints the docker command that reruns it in the CI container.",
        "",
    ]
    return lines


def render_summary(results: dict[str, Any], limit_bytes: int = SUMMARY_LIMIT_BYTES) -> str:
    """The Markdown step summary of `results`, at most `limit_bytes` UTF-8 bytes (empty when
    not even the header fits)."""
    run = results.get("run") or {}
    seen = _Seen(results.get("cases") or [], limit_bytes)
    header, reproduce = _header(results, seen), _reproduce(run)
    fixed = _size(header) + _size(reproduce)
    if fixed > limit_bytes:
        return ""
    sections = {
        "suites": _suites(seen),
        "boards": _boards(run, seen.per_board),
        "failures": _failures(seen.failures),
        "localization": _localization(seen.localized),
        "known": _known_failures(seen.known),
        "slowest": _slowest(seen.slowest),
        "latency": _latency(seen.latency),
    }
    order = ("failures", "boards", "localization", "suites", "known", "slowest", "latency")
    priority = [s for s in (sections[k] for k in order) if s]
    # each section's heading and "N more not shown" line first; drop the least important
    # sections when even those do not fit
    while priority and fixed + sum(_size(s.render()) for s in priority) > limit_bytes:
        priority.pop()
    budget = limit_bytes - fixed - sum(_size(s.render()) for s in priority)
    for section in priority:
        for row in section.rows:
            cost = len(row.encode("utf-8")) + 1
            if cost > budget:
                break
            budget -= cost
            section.kept += 1
    kept = {id(s) for s in priority}
    shown = [s for s in sections.values() if id(s) in kept]
    return "\n".join([*header, *(line for s in shown for line in s.render()), *reproduce]) + "\n"
