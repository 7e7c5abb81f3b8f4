"""Suites of cases: the built-in ones and YAML manifests, plus selection (filter, shard)."""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path

from hil.cases.case import PRECISIONS, Case
from hil.errors import UsageError, closest

BUILTIN_SUITES = ("smoke", "ops", "models")
"""Suites shipped with hil, selectable by name."""


def load_suite(name_or_path: str, pretrained: bool = False) -> list[Case]:
    """The cases of a built-in suite or of a manifest file (`*.yaml` / `*.yml`); `pretrained`
    makes the `models` suite load published weights (checked by `prefetch`)."""
    if name_or_path == "smoke":
        from hil.cases import smoke

        return smoke.cases()
    if name_or_path == "ops":
        from hil.cases import ops

        return ops.cases()
    if name_or_path == "models":
        from hil.cases import models

        return models.cases(pretrained=pretrained)
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        from hil.cases.manifest import load_manifest

        return load_manifest(Path(name_or_path))
    suggestion = closest(name_or_path, BUILTIN_SUITES)
    raise UsageError(
        f"--suite {name_or_path}: no such suite"
        + (f"; did you mean {suggestion!r}?" if suggestion else "")
        + f" (built-in: {', '.join(BUILTIN_SUITES)}; or a manifest path ending in .yaml)"
    )


def prefetch(cases: Iterable[Case]) -> None:
    """Fetch what the selected cases need before lowering (published weights); UsageError
    with one line naming the case when something cannot be had."""
    done: set[int] = set()
    for case in cases:
        if case.prefetch is not None and id(case.prefetch) not in done:
            done.add(id(case.prefetch))
            case.prefetch()


def expand_precisions(cases: Iterable[Case], precision: str) -> list[Case]:
    """Keep the cases at the requested precision (`all`: every precision)."""
    if precision not in (*PRECISIONS, "all"):
        raise UsageError(f"--precision: unknown precision {precision!r} (fp32, a8w8, all)")
    wanted = PRECISIONS if precision == "all" else (precision,)
    return [case for case in cases if case.precision in wanted]


def select(cases: Sequence[Case], filters: Sequence[str], shard: tuple[int, int]) -> list[Case]:
    """Cases matching any glob of `filters` (on the id or `suite.precision.id`), then the
    cases of shard `index/count` (1-based): a stable partition by a hash of the case key, so
    a case stays in its shard across runs and machines whatever else is added."""
    keys = [c.key for c in cases]
    if len(set(keys)) != len(keys):
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        raise UsageError(f"duplicate case id(s): {', '.join(dupes)}")
    chosen = [
        c
        for c in cases
        if not filters
        or any(fnmatch.fnmatchcase(c.id, f) or fnmatch.fnmatchcase(c.key, f) for f in filters)
    ]
    index, count = shard
    if count == 1:
        return chosen
    return [c for c in chosen if shard_of(c.key, count) == index]


def shard_of(key: str, count: int) -> int:
    """The 1-based shard a case key falls into."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def parse_shard(text: str) -> tuple[int, int]:
    """`I/N` with 1 <= I <= N."""
    parts = text.split("/")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise UsageError(f"--shard: expected I/N (e.g. 1/4), got {text!r}")
    index, count = int(parts[0]), int(parts[1])
    if count < 1 or not 1 <= index <= count:
        raise UsageError(f"--shard: {text!r} is out of range (need 1 <= I <= N)")
    return index, count

