"""hil/workflow_safe.py: a line that GitHub's runner would take as a workflow command (after
blanks, `::` or `##[`; lines split at CR as well as LF) never leaves hil's stdout or stderr
unmarked, however the writes split it; hil's own commands go through as written."""

from __future__ import annotations

import io
import logging
import re

from hil.workflow_safe import FoldingFormatter, SafeStream, trusted


def _commands(text: str) -> list[str]:
    return [line for line in re.split(r"\r\n|\r|\n", text) if line.lstrip().startswith(("::", "##["))]


def test_no_line_starts_a_command_however_it_is_written() -> None:
    raw = io.StringIO()
    stream = SafeStream(raw)
    for chunk in ("armv7l\n::warning title=forged::x\n", "  :", ":error::split write\n", "a\r::notice::cr\n",
                  "##[error]old form\n", "\t", "", ":", ":set-output name=x::y", "\n", "ok :: mid-line\n"):
        stream.write(chunk)
    trusted(stream).write("::error title=hil::its own annotation\n")
    stream.close()
    text = raw.getvalue()
    assert _commands(text) == ["::error title=hil::its own annotation"]
    assert "> ::warning title=forged::x" in text and "ok :: mid-line" in text


def test_a_log_record_is_one_line() -> None:
    record = logging.LogRecord("hil.pool", logging.ERROR, __file__, 1, "not usable: %s", ("aarch64\n::warning x::y\r\nz",), None)
    line = FoldingFormatter("%(levelname)s %(message)s").format(record)
    assert "\n" not in line and "\r" not in line
    assert line == "ERROR not usable: aarch64 ⏎ ::warning x::y ⏎ z"
