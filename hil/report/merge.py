"""`hil merge`: the results documents of the shards of one run (or of runs that split the
cases otherwise) as one document, from which JUnit and the summary render as for any run.

Inputs must agree on what was tested (`chipset`, `flow`, and `git_sha` where both have one)
and must not hold the same case twice; anything else is bad input naming the file and field.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hil.errors import UsageError
from hil.report.results import case_key, totals

log = logging.getLogger(__name__)

MUST_AGREE = ("chipset", "flow")
"""Run fields every input must share."""
SHOULD_AGREE = ("hil", "torch", "executorch", "sdk")
"""Run fields whose disagreement is logged as a warning (the first input's value is kept)."""


def _without_shard(command: Sequence[str]) -> list[str]:
    """`command` without its `--shard I/N` (the merge covers the shards)."""
    kept: list[str] = []
    skip = False
    for part in command:
        if skip:
            skip = False
        elif part == "--shard":
            skip = True
        elif not part.startswith("--shard="):
            kept.append(part)
    return kept


def _merged_shard(shards: list[str]) -> tuple[str, list[str]]:
    """The merged `shard` field and the shards missing from a set of `I/N` of the same N:
    `1/1` when all N are there (the merge is the whole run)."""
    parsed = []
    for shard in shards:
        index, _, count = str(shard).partition("/")
        if not (index.isdigit() and count.isdigit()):
            return ",".join(shards), []
        parsed.append((int(index), int(count)))
    counts = {count for _, count in parsed}
    if len(counts) != 1:
        return ",".join(shards), []
    (count,) = counts
    missing = [f"{i}/{count}" for i in range(1, count + 1) if (i, count) not in parsed]
    if not missing:
        return "1/1", []
    return ",".join(sorted(set(shards), key=lambda s: int(s.partition("/")[0]))), missing


def merge_results(inputs: Sequence[tuple[Path, dict[str, Any]]]) -> dict[str, Any]:
    """One results document from loaded documents (`(path, document)` in the order given):
    cases concatenated, run metadata from the first input with the times spanning all, the
    boards united by name, and `merged_from` recording each input's run."""
    if not inputs:
        raise UsageError("merge: no results files given")
    first_path, first = inputs[0]
    run = dict(first["run"])
    seen: dict[str, Path] = {}
    cases: list[dict[str, Any]] = []
    boards: dict[str, dict[str, Any]] = {}
    for path, document in inputs:
        other = document["run"]
        for name in MUST_AGREE:
            if other.get(name) != run.get(name):
                raise UsageError(
                    f"{path}: field 'run.{name}' is {other.get(name)!r}, but {first_path} has "
                    f"{run.get(name)!r}: not parts of one run"
                )
        if other.get("git_sha") and run.get("git_sha") and other["git_sha"] != run["git_sha"]:
            raise UsageError(
                f"{path}: field 'run.git_sha' is {other['git_sha']!r}, but {first_path} has "
                f"{run['git_sha']!r}: not parts of one run"
            )
        for name in SHOULD_AGREE:
            if other.get(name) != run.get(name):
                log.warning(
                    "%s: run.%s is %r, %s has %r (keeping the latter)",
                    path,
                    name,
                    other.get(name),
                    first_path,
                    run.get(name),
                )
        for board in other.get("boards") or []:
            boards.setdefault(str(board.get("name")), board)
        for index, case in enumerate(document["cases"]):
            key = case_key(case)
            if key in seen:
                raise UsageError(
                    f"{path}: field 'cases[{index}]' ({key}) is also in {seen[key]}: "
                    "overlapping shards or the same file twice"
                )
            seen[key] = path
            cases.append(case)

    runs = [document["run"] for _, document in inputs]
    shard, missing = _merged_shard([str(r.get("shard") or "1/1") for r in runs])
    if missing:
        log.warning("merge: shard(s) %s missing", ", ".join(missing))
    finished = [r.get("finished") for r in runs]
    run.update(
        id=f"merged-{run.get('id')}" if len(inputs) > 1 else run.get("id"),
        status="complete" if all(r.get("status") == "complete" for r in runs) else "interrupted",
        started=min((r["started"] for r in runs if r.get("started")), default=None),
        finished=None if None in finished else max(finished),
        command=_without_shard(run.get("command") or []),
        virtual=any(r.get("virtual") for r in runs),
        git_sha=next((r["git_sha"] for r in runs if r.get("git_sha")), None),
        shard=shard,
        boards=list(boards.values()),
        usable_boards=_usable_boards(runs),
        merged_from=[
            {
                "path": str(path),
                "id": r.get("id"),
                "shard": r.get("shard"),
                "status": r.get("status"),
                "started": r.get("started"),
                "finished": r.get("finished"),
                "cases": len(d["cases"]),
            }
            for (path, d), r in zip(inputs, runs, strict=True)
        ],
    )
    if missing:
        run["missing_shards"] = missing
    run.pop("capacity_lost", None)
    lost = _capacity_lost(runs)
    if lost is not None:
        run["capacity_lost"] = lost
    return {**first, "run": run, "cases": cases, "totals": totals(cases)}


def _capacity_lost(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The inputs' `capacity_lost` summed (None when no input has one: runs before schema 4)."""
    known = [r["capacity_lost"] for r in runs if isinstance(r.get("capacity_lost"), dict)]
    if not known:
        return None
    out = sum(k.get("board_seconds_out") or 0.0 for k in known)  # numbers: `load_results` checked
    total = sum(k.get("board_seconds") or 0.0 for k in known)
    return {"board_seconds_out": round(out, 3), "board_seconds": round(total, 3),
            "fraction": round(out / total, 4) if total > 0 else 0.0}


def _usable_boards(runs: list[dict[str, Any]]) -> int | None:
    """Distinct boards that were usable at the start of any input (null when no input knows)."""
    if all(r.get("usable_boards") is None for r in runs):
        return None
    return len({b["name"] for r in runs for b in r.get("boards") or [] if "error" not in b})
