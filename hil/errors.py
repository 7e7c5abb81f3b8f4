"""Exceptions that cross module boundaries, each mapped to one exit code by the CLI."""

from __future__ import annotations

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


class FlashError(InfraError):
    """Provisioning a board failed (hil/provision): `step` names the step that failed,
    `report` is the flash's record (results.json `run.boards[].flashes[]`)."""

    def __init__(self, message: str, step: str, report: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.step = step
        self.report = report or {}
