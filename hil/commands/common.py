"""What the sub-commands share: the choices, the case selection, the flow of `hil lower`, the
cache folder, the lab's adb server, GitHub output. Light at import (`hil --help` imports it)."""

from __future__ import annotations

import argparse
import fnmatch
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hil.errors import UsageError
from hil.lower import FLOWS

FLOW_CHOICES = ("auto", *FLOWS)
CHIPSET_CHOICES = ("E9955", "E9965")
DRIFT_FLOOR_DB = 20.0
"""`hil localize --against fp32`: default SQNR floor of a node against fp32."""


def choice(value: str, choices: Sequence[str], flag: str) -> str:
    """`value` when it is one of `choices`; a UsageError naming `flag` otherwise."""
    if value not in choices:
        raise UsageError(f"{flag}: unknown value {value!r} (one of {', '.join(choices)})")
    return value


def select_cases(args: argparse.Namespace) -> tuple[list[Any], tuple[int, int]]:
    """The cases `--suite/--precision/--filter/--shard` select, and the shard."""
    from hil.cases import expand_precisions, load_suite, parse_shard, prefetch, select

    shard = parse_shard(args.shard)
    choice(args.chipset, CHIPSET_CHOICES, "--chipset")
    choice(args.flow, FLOW_CHOICES, "--flow")
    if args.precision not in ("fp32", "a8w8", "all"):
        raise UsageError(f"--precision: unknown value {args.precision!r} (fp32, a8w8, all)")
    cases = []
    for suite in args.suite or ["smoke"]:
        cases.extend(load_suite(suite, pretrained=args.pretrained))
    cases = expand_precisions(cases, args.precision)
    selected = select(cases, args.filter, (1, 1))
    tags, excluded = getattr(args, "tag", []), getattr(args, "exclude", [])
    if tags:
        selected = [c for c in selected
                    if any(fnmatch.fnmatchcase(t, pattern) for t in c.tags for pattern in tags)]
    if excluded:
        selected = [c for c in selected
                    if not any(fnmatch.fnmatchcase(c.id, g) or fnmatch.fnmatchcase(c.key, g)
                               for g in excluded)]
    if not selected:
        flags = [("--suite", args.suite or ["smoke"]), ("--precision", [args.precision]),
                 ("--filter", args.filter or []), ("--tag", tags), ("--exclude", excluded)]
        raise UsageError("no case matches " + " ".join(
            f"{flag} {shlex.quote(value)}" for flag, values in flags for value in values))
    chosen = select(selected, [], shard)
    prefetch(chosen)
    return chosen, shard


def lowering_flow(requested: str) -> str:
    """The flow of `hil lower` (no boards to check): `auto` is enn when LITECORE can lower
    here, else xnnpack."""
    from hil.sdk import enn_adaptor_available, require_enn_adaptor

    if requested == "enn":
        require_enn_adaptor()
    if requested != "auto":
        return requested
    return "enn" if enn_adaptor_available() else "xnnpack"


def cache_dir(flag: str | None) -> Path:
    """`--cache-dir`, else the default artifact cache."""
    from hil.lower.cache import default_cache_dir

    return Path(flag) if flag else default_cache_dir()


def lab_server(flag: str | None) -> str | None:
    """`--adb-server`, else HIL_ADB_SERVER, else adb's own variables (ADB_SERVER_SOCKET,
    ANDROID_ADB_SERVER_ADDRESS/PORT, adbutils' _HOST alias); validated."""
    from hil.adbaddress import server_choice

    return server_choice(flag)


def emit_github(results: dict[str, Any]) -> None:
    """Groups and annotations on stdout; the step summary appended to $GITHUB_STEP_SUMMARY."""
    from hil.report.github import emit_github

    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    sys.stdout.flush()
    emit_github(results, sys.stdout, Path(summary) if summary else None)


def writable(path: str | Path | None, flag: str, folder: bool = False) -> Path | None:
    """`path` (a file, or with `folder` a folder) made ready to be written: its folders are
    created and a scratch file is written and removed beside it, so a file in the way, a
    folder where a file should be, no permission or a read-only filesystem is one UsageError
    naming `flag` (exit 3) before anything runs, not a traceback after."""
    import tempfile

    if path is None:
        return None
    path = Path(path)
    where = path if folder else path.parent
    what = "folder" if folder else "file"
    if folder and path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path}: not a folder (a file is in the way)")
    if not folder and path.is_dir():
        raise UsageError(f"{flag} {path}: is a folder, expected a {what} path")
    try:
        for parent in [where, *where.parents]:
            if parent.exists():
                if not parent.is_dir():
                    raise UsageError(f"{flag} {path}: {parent} is a file, not a folder")
                break
        where.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=where, prefix=".hil-write-check-"):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise UsageError(f"{flag} {path}: cannot write this {what} ({reason})") from None
    return path


def add_regression_options(parser: argparse.ArgumentParser) -> None:
    """`--threshold` and `--min-delta-ms`: how `hil compare` (and the dashboard, which flags
    what compare flags) judges a latency regression."""
    parser.add_argument("--threshold", default="10%", metavar="PCT",
                        help="relative latency growth that is a regression (default: 10%%)")
    parser.add_argument("--min-delta-ms", default="0.02", metavar="MS",
                        help="a latency change below this many ms is never a regression "
                             "(default: 0.02)")
