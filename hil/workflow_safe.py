"""Under GitHub Actions nothing a board says becomes a workflow command.

The runner takes any line of a step's output that starts, after blanks, with `::` (or the old
`##[`) as a command (actions/runner `ActionCommand.TryParseV2`: `message.TrimStart()`, then
`StartsWith("::")`), and it splits lines at CR as well as LF. Text from a board (a `uname -m`
answer, a kill's stderr, a console line, a file name) ends up in log messages, so at the CLI
edge (`install`, with `GITHUB_ACTIONS=true`):

- every log record's message has its CR and LF folded into ` ⏎ `: one record, one line;
- stdout and stderr are wrapped (`SafeStream`): a line that would start with `::` or `##[` gets
  `> ` in front of it. What hil means as a command (`hil/report/github.py`'s annotations and
  groups, whose device logs sit inside `::stop-commands::`) is written through `trusted(stream)`.
"""

from __future__ import annotations

import io
import logging
import os
import re
import sys
from typing import TextIO

FOLD = " ⏎ "
"""What a CR, LF or CRLF inside a log message becomes."""
MARK = "> "
"""Put before a line that would be taken as a workflow command."""
_COMMAND_STARTS = ("::", "##[")
_BREAK = re.compile(r"(\r\n|\r|\n)")


def fold(text: str) -> str:
    """`text` on one line: every CR, LF or CRLF becomes FOLD."""
    return _BREAK.sub(FOLD, text)


def _undecided(head: str) -> bool:
    """True while `head` (the start of a line) could still become a command's start."""
    stripped = head.lstrip()
    return any(start.startswith(stripped) for start in _COMMAND_STARTS)


class SafeStream(io.TextIOBase):
    """A text stream whose lines never start (after blanks) with `::` or `##[`: such a line
    gets MARK in front. The start of a line is held back until it is decided (blanks and a
    first `:` may be followed by the rest in the next write)."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw
        self._head = ""
        self._decided = False

    def write(self, text: str) -> int:
        out: list[str] = []
        for piece in _BREAK.split(text):
            if not piece:
                continue
            if _BREAK.fullmatch(piece):
                out.append(self._head + piece)
                self._head, self._decided = "", False
            elif self._decided:
                out.append(piece)
            else:
                head = self._head + piece
                if head.lstrip().startswith(_COMMAND_STARTS):
                    out.append(MARK + head)
                    self._head, self._decided = "", True
                elif _undecided(head):
                    self._head = head
                else:
                    out.append(head)
                    self._head, self._decided = "", True
        self.raw.write("".join(out))
        return len(text)

    def command(self, text: str) -> None:
        """Write `text` as it is (hil's own workflow commands), at a line start."""
        if self._head:
            self.raw.write(self._head + "\n")
        self._head = ""
        self._decided = bool(text) and not text.endswith(("\n", "\r"))  # mid-line after it
        self.raw.write(text)

    def flush(self) -> None:
        self.raw.flush()

    def close(self) -> None:
        """Write what is held back (a line of blanks, a lone `:`), then flush."""
        if self._head:
            self.raw.write(self._head)
            self._head = ""
        self.raw.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.raw, "encoding", "utf-8")


class _TrustedWriter:
    """`write` straight to the raw stream (through `SafeStream.command`)."""

    def __init__(self, stream: SafeStream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.command(text)
        return len(text)

    def flush(self) -> None:
        self._stream.flush()


def trusted(stream: TextIO) -> TextIO:
    """A writer for what hil means as workflow commands: `stream` itself, or its raw stream
    when it is a SafeStream."""
    return _TrustedWriter(stream) if isinstance(stream, SafeStream) else stream  # type: ignore[return-value]


class FoldingFormatter(logging.Formatter):
    """A log formatter whose record line is one line (`fold`); a traceback after it keeps its
    lines (the stream's SafeStream sees to their starts)."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        return fold(super().formatMessage(record))


def in_github_actions() -> bool:
    """True inside a GitHub Actions job (`GITHUB_ACTIONS=true`)."""
    return os.environ.get("GITHUB_ACTIONS") == "true"


def install() -> bool:
    """Under GitHub Actions: wrap stdout and stderr in SafeStreams (the root logger's stream
    handlers write through them) and fold every handler's records. False elsewhere."""
    if not in_github_actions():
        return False
    wrapped = {}
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if not isinstance(stream, SafeStream):
            wrapped[id(stream)] = SafeStream(stream)
            setattr(sys, name, wrapped[id(stream)])
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and id(handler.stream) in wrapped:
            handler.setStream(wrapped[id(handler.stream)])
        log_format = handler.formatter._fmt if handler.formatter is not None else None
        handler.setFormatter(FoldingFormatter(log_format))
    return True


def finish() -> None:
    """Write out what the SafeStreams hold back (at exit)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, SafeStream):
            stream.close()
