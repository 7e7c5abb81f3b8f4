"""GitHub Actions output of a results document: workflow commands (error annotations within
GitHub's 10-per-step limit, one `::group::` per suite.precision with the device logs inside
`::stop-commands::`) and the step summary appended to `$GITHUB_STEP_SUMMARY`.

Escaping follows the runner: data `%`→`%25`, CR→`%0D`, LF→`%0A`; properties also `:`→`%3A`
and `,`→`%2C`. Paths are emitted repo-relative, as results.json stores them.

The cases are read one at a time: the annotations keep the few worst (hil/report/bounded.py),
the groups spool their lines to temporary files, so a run's size does not reach memory.
"""

from __future__ import annotations

import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from hil.report.bounded import Best
from hil.report.localization import lead
from hil.report.results import (
    cap_text,
    case_key,
    clean_text,
    one_line,
    severity_rank,
)
from hil.report.stats import format_latency
from hil.report.summary import SUMMARY_LIMIT_BYTES, render_summary
from hil.verdict import Verdict
from hil.workflow_safe import in_github_actions as in_github_actions  # hil/commands/run.py's
from hil.workflow_safe import trusted

MAX_ANNOTATIONS = 10
"""GitHub keeps at most 10 annotations of each type (error, warning, notice) per step."""
ANNOTATION_CHARS = 4096
"""GitHub truncates an annotation message beyond 4096 characters."""
GROUP_LOG_CAP_BYTES = 16 * 1024
"""Tail of each device log shown in a group (the whole capped log is in JUnit/results.json)."""


def escape_data(text: str) -> str:
    """Escape a workflow command's message."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow command's property value (`file=`, `title=`, ...)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(command: str, message: str = "", **properties: Any) -> str:
    """`::command k=v,...::message` with escaping; None or empty properties are left out."""
    props = ",".join(
        f"{key}={escape_property(str(value))}"
        for key, value in properties.items()
        if value is not None and value != ""
    )
    return f"::{command}{' ' + props if props else ''}::{escape_data(message)}"


def _limit(text: str, chars: int = ANNOTATION_CHARS) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _title(case: dict[str, Any], run: dict[str, Any]) -> str:
    board = case.get("board")
    virtual = any(b.get("name") == board and b.get("virtual") for b in run.get("boards") or [])
    where = f" on {board}{' (VIRTUAL)' if virtual else ''}" if board else ""
    return f"{case['verdict']} {case_key(case)}{where}"


def _annotation(kind: str, case: dict[str, Any], run: dict[str, Any]) -> str:
    message = one_line(clean_text(lead(case, str(case.get("message") or "")))) or case["verdict"]
    detail = clean_text(str(case.get("detail") or "")).strip()
    text = _limit(f"{message}\n{detail}" if detail else message)
    return workflow_command(
        kind,
        text,
        file=case.get("file") or None,
        line=case.get("line") or None,
        title=_title(case, run),
    )


NOTICE_ENTRIES = MAX_ANNOTATIONS + ANNOTATION_CHARS // 8
"""Cases of each type kept for the annotations and the notice naming those left out: the
notice holds fewer (an entry, `s.p.i (XPASS), `, is at least 15 characters)."""


def annotations(results: dict[str, Any]) -> list[str]:
    """At most MAX_ANNOTATIONS error annotations (worst first), at most MAX_ANNOTATIONS
    warnings (PASS_UNDELEGATED), and one notice naming the cases left out, if any."""
    run = results.get("run") or {}
    # per type: the annotation of each of the first few, the `key (VERDICT)` of the next ones
    bad: Best[tuple[str, str]] = Best(count=NOTICE_ENTRIES)
    warned: Best[tuple[str, str]] = Best(count=NOTICE_ENTRIES)
    for index, case in enumerate(results.get("cases") or []):
        rank = severity_rank(index, case)
        if rank is not None:  # (a worse case may come later: each is annotated in case)
            _offer(bad, rank, case, run, "error", annotate=True)
        elif case["verdict"] == Verdict.PASS_UNDELEGATED.value:
            _offer(warned, index, case, run, "warning", annotate=warned.total < MAX_ANNOTATIONS)
    lines = [line for line, _ in bad.items()[:MAX_ANNOTATIONS]]
    lines += [line for line, _ in warned.items()[:MAX_ANNOTATIONS]]
    rest = [entry for _, entry in [*bad.items()[MAX_ANNOTATIONS:], *warned.items()[MAX_ANNOTATIONS:]]]
    left_out = max(0, bad.total - MAX_ANNOTATIONS) + max(0, warned.total - MAX_ANNOTATIONS)
    if left_out:
        text = (
            f"{left_out} more case(s) not annotated (GitHub shows {MAX_ANNOTATIONS} per type "
            "and step; all are in the step summary and JUnit): "
        )
        for count, entry in enumerate(rest):
            more = f"and {left_out - count} more"
            if len(text) + len(entry) + len(more) + 4 > ANNOTATION_CHARS:
                text += more
                break
            text += entry + (", " if count < left_out - 1 else "")
        lines.append(workflow_command("notice", text, title=f"hil: {left_out} more"))
    return lines


def _offer(kept: Best[tuple[str, str]], rank: Any, case: dict[str, Any], run: dict[str, Any],
           kind: str, annotate: bool) -> None:
    kept.offer(rank, lambda: (_annotation(kind, case, run) if annotate else "",
                              f"{case_key(case)} ({case['verdict']})"))


def _case_line(case: dict[str, Any]) -> str:
    message = one_line(clean_text(str(case.get("message") or "")))
    latency = format_latency(case)
    parts = [f"{case['verdict']:<16} {case_key(case)} [{case.get('board') or '-'}]"]
    if latency:
        parts.append(f"latency ms: {latency}")
    if message:
        parts.append(message)
    return "  ".join(parts)


def _details(case: dict[str, Any]) -> list[str]:
    """The detail and device logs of a failed or errored case, for its group."""
    verdict = Verdict(case["verdict"])
    if not (verdict.is_failure or verdict.is_error):
        return []
    lines = []
    detail = clean_text(str(case.get("detail") or "")).strip()
    if detail:
        lines += [f"--- {case_key(case)}: detail ---", cap_text(detail, GROUP_LOG_CAP_BYTES)]
    for name, log in (case.get("logs") or {}).items():
        if isinstance(log, str) and log.strip():
            text = clean_text(log).rstrip()
            lines += [f"--- {case_key(case)}: {name} log ---", _tail(text)]
    return lines


def _tail(text: str) -> str:
    data = text.encode("utf-8", "replace")
    if len(data) <= GROUP_LOG_CAP_BYTES:
        return text
    kept = data[-GROUP_LOG_CAP_BYTES:].decode("utf-8", "ignore")
    return f"[... {len(data) - GROUP_LOG_CAP_BYTES} bytes before; whole log in JUnit ...]\n{kept}"


class _Group:
    """One suite.precision's counts per verdict and its body, spooled to two anonymous
    temporary files (a line per case, then the details of the failed ones)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        # closed by log_groups; lines end at "\n" only, read back as written
        self.lines = tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n")  # noqa: SIM115
        self.details = tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n")  # noqa: SIM115

    def add(self, case: dict[str, Any]) -> None:
        self.counts[case["verdict"]] = self.counts.get(case["verdict"], 0) + 1
        self.lines.write(_case_line(case) + "\n")
        for line in _details(case):
            self.details.write(line + "\n")

    def body(self) -> Iterator[str]:
        """The body's lines (a line of a log is one too)."""
        for spool in (self.lines, self.details):
            spool.seek(0)
            for line in spool:
                yield line[:-1]

    def close(self) -> None:
        self.lines.close()
        self.details.close()


def log_groups(results: dict[str, Any]) -> Iterator[str]:
    """Per suite.precision: `::group::`, a line per case, the details and device logs of the
    failed ones — all inside `::stop-commands::TOKEN` ... `::TOKEN::` with a fresh random
    token, so nothing a device printed is taken as a command — then `::endgroup::`. The
    items are lines (the body's a line at a time): join them with newlines. (The token is
    drawn after every device line was written, and has 128 random bits: no device can have
    printed it.)"""
    groups: dict[str, _Group] = {}
    try:
        for case in results.get("cases") or []:
            name = f"{case['suite']}.{case['precision']}"
            group = groups.get(name)
            if group is None:
                group = groups[name] = _Group()
            group.add(case)
        for name, group in groups.items():
            title = f"{name}: " + ", ".join(f"{count} {verdict}" for verdict, count in group.counts.items())
            token = secrets.token_hex(16)
            yield workflow_command("group", title)
            yield workflow_command("stop-commands", token)
            yield from group.body()
            yield f"::{token}::"
            yield workflow_command("endgroup")
    finally:
        for group in groups.values():
            group.close()


def append_step_summary(results: dict[str, Any], path: Path) -> int:
    """Append the step summary to `path` within what is left of GitHub's 1 MiB per step;
    returns the bytes written."""
    path = Path(path)
    used = path.stat().st_size if path.exists() else 0
    text = render_summary(results, limit_bytes=max(0, SUMMARY_LIMIT_BYTES - used))
    if not text:
        return 0
    data = text.encode("utf-8")
    with path.open("ab") as stream:
        stream.write(data)
    return len(data)


def emit_github(results: dict[str, Any], stream: TextIO, summary_path: Path | None) -> None:
    """Write the groups and annotations to `stream` (the job log) and, when `summary_path`
    is set, append the step summary to it. They are hil's own commands, escaped here: written
    past the CLI's SafeStream (`hil/workflow_safe.py`)."""
    stream = trusted(stream)
    for chunk in log_groups(results):
        stream.write(chunk + "\n")
    for line in annotations(results):
        stream.write(line + "\n")
    stream.flush()
    if summary_path is not None:
        append_step_summary(results, summary_path)
