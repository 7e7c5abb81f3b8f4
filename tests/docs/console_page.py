"""A page's shell session, as written: its `console` blocks (`$ COMMAND` lines, each followed
by the output the page shows) and the files it asks the reader to save (fenced blocks with
`title="NAME"`), in page order; the session run in one bash in a working folder; and the shown
output compared with what each command printed.

Before they are compared, shown and printed lines alike are normalised: run ids, ports,
durations (`13.1 s`, `p50 0.034 ms`), measured figures (`2.38e-07`, `0`), the artifact cache's
folder, the dashboard's count of nights, the width of table columns and rules. A shown line
`...` stands for any number of printed lines. `hil run` prints its lowering progress
(`lowered N/M ...`) and its cases from two threads, so those two streams are each compared in
order, not their interleaving; and a board runs the cases in the order the lowering workers
finish them, so a run of consecutive case lines (`[3/7] PASS ...`, or a table's rows) is
compared as a set of lines, its counters left out.
"""

from __future__ import annotations

import difflib
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

ELLIPSIS = "..."

_FENCE = re.compile(r"^```(?P<lang>[\w-]*)(?P<attrs>[^\n]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
_TITLE = re.compile(r'title="(?P<name>[^"]+)"')
_NORMALISE = (
    (re.compile(r"\b\d{8}-\d{6}-[0-9a-f]{6}\b"), "RUN-ID"),
    (re.compile(r"\(cache [^)]*\)"), "(cache DIR)"),
    (re.compile(r"\b(127\.0\.0\.1|localhost):\d+\b"), r"\1:PORT"),
    (re.compile(r"\b\d+ night\(s\)"), "N night(s)"),
    (re.compile(r"(?<![\w.])\d+(?:\.\d+)? (ms|s)\b"), r"T \1"),
    (re.compile(r"(?<![\w.-])-?(?:\d+\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+|0)(?![\w.])"), "N"),
    (re.compile(r"─+"), "─"),
    (re.compile(r"[ \t]+"), " "),
)
_LOWERING = re.compile(r"^lowered \d+/\d+\b")
_CASE_LINE = re.compile(r"^\[ ?\d+/(?P<total>\d+)\] ")
_TABLE_ROW = re.compile(r"^\S+\.(?:fp32|a8w8) ")
_MARK = "@@hil-docs-step"


@dataclass
class Step:
    """A command and the output the page shows for it, or a file the page asks to save."""

    command: str = ""
    shown: list[str] = field(default_factory=list)
    file: str = ""
    text: str = ""


def steps(page: str) -> list[Step]:
    """The page's commands and files, in page order."""
    found: list[Step] = []
    for block in _FENCE.finditer(page):
        title = _TITLE.search(block["attrs"])
        if block["lang"] == "console":
            for line in block["body"].splitlines():
                if line.startswith("$ "):
                    found.append(Step(command=line[2:]))
                elif found and found[-1].command:
                    found[-1].shown.append(line)
                else:
                    raise ValueError(f"output before any command in a console block: {line!r}")
        elif title:
            found.append(Step(file=title["name"], text=block["body"]))
    return found


def script(page_steps: list[Step]) -> str:
    """One bash session: each file saved, each command run with its exit status marked."""
    lines = ["set -u"]
    for index, step in enumerate(page_steps):
        if step.file:
            lines += [f"cat > {step.file} <<'HIL_DOCS_EOF'", step.text.rstrip("\n"), "HIL_DOCS_EOF"]
        else:
            lines += [f"printf '\\n{_MARK} {index}@@\\n'", f"{{ {step.command}\n}} 2>&1",
                      f"printf '\\n{_MARK}-exit {index} %d@@\\n' $?"]
    return "\n".join(lines) + "\n"


def run(page_steps: list[Step], folder: Path, env: dict[str, str], timeout: float) -> dict[int, tuple[int, list[str]]]:
    """Run the session in `folder`: {step index: (exit status, printed lines)}."""
    done = subprocess.run(["bash", "--noprofile", "--norc", "-c", script(page_steps)], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)
    printed: dict[int, tuple[int, list[str]]] = {}
    pattern = re.compile(rf"^{_MARK} (\d+)@@\n(.*?)\n{_MARK}-exit \1 (\d+)@@$", re.M | re.S)
    for match in pattern.finditer(done.stdout):
        lines = match[2].split("\n")
        while lines and not lines[-1].strip():
            lines.pop()
        printed[int(match[1])] = (int(match[3]), lines)
    if done.returncode != 0 or done.stderr.strip():
        raise RuntimeError(f"the session itself failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return printed


def normalise(line: str, folder: Path | None = None) -> str:
    """The line with what differs from run to run replaced (see the module's docstring)."""
    if folder is not None:
        line = line.replace(str(folder), ".")
    for pattern, replacement in _NORMALISE:
        line = pattern.sub(replacement, line)
    return line.strip()


def _matches(shown: list[str], printed: list[str]) -> bool:
    """`shown` (with `...` lines) matches all of `printed`."""
    if not shown:
        return not printed
    if shown[0] == ELLIPSIS:
        return any(_matches(shown[1:], printed[start:]) for start in range(len(printed) + 1))
    return bool(printed) and shown[0] == printed[0] and _matches(shown[1:], printed[1:])


def _kind(line: str) -> str:
    """'case' for a case's progress line, 'row' for a table's row, '' otherwise."""
    return "case" if _CASE_LINE.match(line) else "row" if _TABLE_ROW.match(line) else ""


def _case_order_left_out(lines: list[str]) -> list[str]:
    """Each run of consecutive case lines (or rows) sorted, progress counters left out."""
    result: list[str] = []
    start = 0
    for end in range(1, len(lines) + 1):
        if end == len(lines) or _kind(lines[end]) != _kind(lines[start]) or not _kind(lines[start]):
            run = [_CASE_LINE.sub(r"[i/\g<total>] ", line) for line in lines[start:end]]
            result += sorted(run) if _kind(lines[start]) else run
            start = end
    return result


def _streams(lines: list[str]) -> tuple[list[str], list[str]]:
    """(the lowering lines, the rest with the case order left out); a `...` line belongs to both."""
    lowering = [line for line in lines if line == ELLIPSIS or _LOWERING.match(line)]
    rest = [line for line in lines if line == ELLIPSIS or not _LOWERING.match(line)]
    return lowering, _case_order_left_out(rest)


def differences(step: Step, status: int, printed: list[str], folder: Path | None = None) -> str:
    """'' when the command exited 0 and printed what the page shows, else what differs."""
    shown = [normalise(line) for line in step.shown]
    got = [normalise(line, folder) for line in printed]
    problems = []
    if status != 0:
        problems.append(f"exit status {status}")
    if not all(_matches(want, have) for want, have in zip(_streams(shown), _streams(got), strict=True)):
        diff = difflib.unified_diff(shown, got, "the page shows", "the command printed", lineterm="")
        problems.append("\n".join(diff))
    return f"$ {step.command}\n" + "\n".join(problems) if problems else ""
