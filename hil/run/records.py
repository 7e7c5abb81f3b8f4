"""What a run writes about itself and its cases: the `run` block's fields known at the start,
and the case record of results.json (hil/report/results.schema.json)."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import secrets
import subprocess
from collections.abc import Sequence
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


PYTHON_SIDE = ("torch", "torchvision", "executorch")
"""The distributions whose versions shape a lowering: results.json `run.packages` (with the
test rig's lowering package, hil/lower/rig.py, when it is installed)."""


def versions() -> dict[str, Any]:
    """hil's, torch's and ExecuTorch's versions, ExecuTorch's `git_version` (the commit its
    wheel was built from: `executorch_git`) and the Python side's versions (`packages`)."""
    from importlib.metadata import PackageNotFoundError, version

    from hil.lower.rig import RIG_DISTRIBUTION

    packages: dict[str, str] = {}
    for package in (*PYTHON_SIDE, RIG_DISTRIBUTION):
        try:
            packages[package] = version(package)
        except PackageNotFoundError:
            continue
    return {"hil": __version__, "torch": packages.get("torch"),
            "executorch": packages.get("executorch"), "executorch_git": executorch_git(),
            "packages": packages}


def executorch_git() -> str | None:
    """`executorch.version.git_version`, None without ExecuTorch (or in a build without it)."""
    try:
        from executorch.version import git_version
    except ImportError:
        return None
    return str(git_version) if git_version else None


def suite_digests(cases: Sequence[Case]) -> dict[str, dict[str, Any]]:
    """results.json `run.suites`: per suite, the sha256 of its planned cases' definitions
    (`definition_digest`, by case key order) and their count."""
    from hil.lower.cache import definition_digest

    by_suite: dict[str, list[tuple[str, str]]] = {}
    for case in cases:
        by_suite.setdefault(case.suite, []).append((case.key, definition_digest(case)))
    return {suite: {"digest": hashlib.sha256("".join(f"{key} {digest}\n" for key, digest in sorted(pairs))
                                              .encode()).hexdigest(), "cases": len(pairs)}
            for suite, pairs in sorted(by_suite.items())}


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
