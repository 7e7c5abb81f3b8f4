"""What a run writes about itself and its cases: the `run` block's fields known at the start,
and the case record of results.json (hil/report/results.schema.json)."""

from __future__ import annotations

import datetime as dt
import os
import secrets
import subprocess
from typing import Any

from hil import __version__
from hil.cases.case import Case
from hil.expectation import settle
from hil.verdict import Verdict


def new_run_id() -> str:
    """`YYYYmmdd-HHMMSS-xxxxxx`: sortable, unique, safe as a device folder name."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_ms() -> str:
    """UTC with milliseconds: case start/end stamps, to order cases of concurrent runs."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def git_sha() -> str | None:
    if os.environ.get("GITHUB_SHA"):
        return os.environ["GITHUB_SHA"]
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {"hil": __version__}
    for package in ("torch", "executorch"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found


def case_record(case: Case, **fields: Any) -> dict[str, Any]:
    """A results.json case entry (hil/report/results.schema.json), its verdict settled against the
    case's known failure, if it declares one (XFAIL / XPASS)."""
    record: dict[str, Any] = {
        "suite": case.suite,
        "precision": case.precision,
        "id": case.id,
        "classname": case.classname,
        "file": case.file,
        "line": case.line,
        "board": None,
        "verdict": Verdict.ERROR_INTERNAL.value,
        "message": "",
        "detail": "",
        "attempts": 0,
        "timings_s": {},
        "latency_ms": None,
        "memory": None,
        "board_state": None,
        "pte_bytes": None,
        "delegation": None,
        "outputs": [],
        "checker": None,
        "logs": {},
        "tags": list(case.tags),
        "started": None,
        "finished": None,
    }
    record.update(fields)
    return settle(case.expect, record)
