"""Exceptions that cross module boundaries, each mapped to one exit code by the CLI."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any


class UsageError(Exception):
    """Bad usage, configuration or input (exit code 3). The message is one line naming
    the file, entry or field at fault."""


class InfraError(Exception):
    """The board, the link or the adb server failed; not the model (verdict ERROR_INFRA)."""


class Where:
    """Builds UsageErrors that name the file, the entry and the field of bad input."""

    def __init__(self, path: Path, entry: str = "") -> None:
        self.path = path
        self.entry = entry

    def error(self, field: str, problem: str) -> UsageError:
        where = f"{self.path}: {self.entry}: " if self.entry else f"{self.path}: "
        return UsageError(f"{where}{field}: {problem}")


def closest(word: str, choices: Iterable[str], cutoff: float = 0.75) -> str | None:
    """The choice one typo or so away from `word` (difflib's ratio >= `cutoff`), else None:
    what a did-you-mean suggests."""
    import difflib

    found = difflib.get_close_matches(word, list(choices), 1, cutoff)
    return found[0] if found else None


def unknown_name(word: str, choices: Iterable[str], what: str = "field") -> str:
    """`unknown field; did you mean 'module'? (allowed: calibration, checker, ...)`: the
    choices in words, sorted, with a suggestion when one is close."""
    choices = sorted(choices)
    suggestion = closest(word, choices)
    hint = f"; did you mean {suggestion!r}?" if suggestion else ""
    return f"unknown {what}{hint} (allowed: {', '.join(choices) or 'none'})"


def cause_in_words(exc: BaseException) -> str:
    """What went wrong, in words: the operating system's message (`No such file or directory:
    /var/run/docker.sock`) when an OSError lies under `exc` (its cause, its context or its
    arguments, as requests and urllib3 nest them), else the first line of `exc`'s message —
    never a Python repr like `('Connection aborted.', FileNotFoundError(2, ...))`."""
    seen: set[int] = set()
    todo: list[Any] = [exc]
    while todo:
        item = todo.pop(0)
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, OSError) and item.strerror:
            where = item.filename or getattr(item, "filename2", None)
            return f"{item.strerror}: {where}" if where else item.strerror
        todo += [item.__cause__, item.__context__, *item.args]
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class FlashError(InfraError):
    """Provisioning a board failed (hil/provision): `step` names the step that failed,
    `report` is the flash's record (results.json `run.boards[].flashes[]`)."""

    def __init__(self, message: str, step: str, report: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.step = step
        self.report = report or {}
