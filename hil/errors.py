"""Exceptions that cross module boundaries, each mapped to one exit code by the CLI."""

from __future__ import annotations


class UsageError(Exception):
    """Bad usage, configuration or input (exit code 3). The message is one line naming
    the file, entry or field at fault."""


class InfraError(Exception):
    """The board, the link or the adb server failed; not the model (verdict ERROR_INFRA)."""
